"""/v1/jobs/{id}/attempts: a job's attempts, oldest first (who ran it, when, and how each ended).

Thin: one service call, one wire shape.
"""

from __future__ import annotations

from fastapi import APIRouter

from app.attempts import service
from app.attempts.schemas import AttemptPublic
from app.auth.http import PrincipalDep
from app.http.errors import problem_responses
from app.http.pagination import JobId, check_id

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get(
    "/{job_id}/attempts",
    response_model=list[AttemptPublic],
    responses=problem_responses(401, 403, 404, 503),
    summary="A job's attempts, oldest first",
)
async def list_job_attempts(job_id: JobId, principal: PrincipalDep) -> list[AttemptPublic]:
    check_id(job_id)
    return [AttemptPublic.of(r) for r in await service.list_attempts(job_id, principal.tenant_scope)]
