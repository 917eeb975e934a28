"""/v1/report-types: the registered report types, their params schemas, timeouts and attempt budgets.

Read-only; the registry is loaded from settings when the app starts.
"""

from __future__ import annotations

from fastapi import APIRouter

from app.auth.http import PrincipalDep
from app.core.config import get_settings
from app.http.errors import problem_responses
from app.reports.registry import registry
from app.reports.schemas import ReportTypePublic

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
