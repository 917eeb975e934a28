"""/v1/report-types: the registered report types, their params schemas, timeouts and attempt budgets; and
/v1/report-types/declarations (admin): the state of REPORT_TYPES_FILE in this process.

Read-only; the registry is loaded from settings when the app starts (declared types: and on change).
"""

from __future__ import annotations

from fastapi import APIRouter

from app.auth.http import PrincipalDep
from app.core.config import get_settings
from app.http.errors import problem_responses
from app.reports.declared import declarations
from app.reports.registry import registry
from app.reports.schemas import DeclarationsPublic, ReportTypePublic

router = APIRouter(prefix="/v1/report-types", tags=["report types"])


@router.get(
    "",
    response_model=list[ReportTypePublic],
    responses=problem_responses(401, 403),
    summary="Registered report types",
)
async def list_report_types(_principal: PrincipalDep) -> list[ReportTypePublic]:
    settings = get_settings()
    return [
        ReportTypePublic.of(t, settings.job_timeout_s, settings.default_max_attempts) for t in registry.all()
    ]


@router.get(
    "/declarations",
    response_model=DeclarationsPublic,
    responses=problem_responses(401, 403),
    summary="The report-types file's state",
)
async def get_declarations(_principal: PrincipalDep) -> DeclarationsPublic:
    """The declared types in force in the process that answers, and the last refusal of REPORT_TYPES_FILE
    (file, line, type, field, reason) if the file is broken: the types loaded before it stay in force."""
    return DeclarationsPublic.of(declarations.status)
