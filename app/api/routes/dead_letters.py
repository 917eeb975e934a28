"""/v1/dead-letters and /v1/jobs/{id}/replay: inspect dead letters and replay them.

Bulk replay is admin-only (AuthMiddleware enforces the scope before anything is read).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app import dead_letters, service
from app.api.deps import PrincipalDep, tenant_scope
from app.api.errors import problem_responses
from app.api.responses import FastJSONResponse
from app.api.routes.jobs import MAX_LIMIT, JobId, check_id, decode_cursor, encode_cursor
from app.api.schemas import (
    BulkReplay,
    BulkReplayResult,
    DeadLetterPage,
    DeadLetterPublic,
    IsoDateTime,
    JobPublic,
    ReplayRequest,
)
from app.repository import LetterFilter
from app.representation import job_document

router = APIRouter(tags=["dead letters"])


@router.get(
    "/v1/dead-letters",
    response_model=DeadLetterPage,
    responses=problem_responses(401, 403, 422, 503),
    summary="List dead letters (unarchived by default)",
)
async def list_dead_letters(
    principal: PrincipalDep,
    include_archived: Annotated[bool, Query(description="Also list archived dead letters")] = False,
    report_type: Annotated[str | None, Query(max_length=100)] = None,
    created_after: Annotated[IsoDateTime | None, Query()] = None,
    created_before: Annotated[IsoDateTime | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: Annotated[str | None, Query(max_length=100)] = None,
) -> DeadLetterPage:
    flt = LetterFilter(
        tenant=tenant_scope(principal),
        include_archived=include_archived,
        report_type=report_type,
        created_after=created_after,
        created_before=created_before,
    )
    rows = await dead_letters.list_letters(flt, decode_cursor(cursor) if cursor else None, limit + 1)
    next_cursor = encode_cursor(rows[limit - 1].id) if len(rows) > limit else None
    return DeadLetterPage(items=[DeadLetterPublic.of(r) for r in rows[:limit]], next_cursor=next_cursor)


@router.post(
    "/v1/dead-letters/replay",
    status_code=202,
    response_model=BulkReplayResult,
    responses=problem_responses(401, 403, 413, 422, 503),
    summary="Replay dead letters in bulk (admin)",
)
async def bulk_replay(body: BulkReplay, _principal: PrincipalDep) -> BulkReplayResult:
    count = await dead_letters.replay_letters(
        job_ids=body.job_ids or (), report_type=body.report_type, since=body.since
    )
    return BulkReplayResult(replayed=count)


@router.post(
    "/v1/jobs/{job_id}/replay",
    status_code=202,
    response_model=JobPublic,
    tags=["jobs"],
    responses=problem_responses(401, 403, 404, 409, 422, 503),
    summary="Replay a dead or cancelled job",
)
async def replay(
    job_id: JobId, principal: PrincipalDep, body: ReplayRequest | None = None
) -> FastJSONResponse:
    """Attempts reset, replay_count + 1. For multi-step jobs, `steps` names the steps to run again
    (default: every failed step); succeeded steps never run again."""
    check_id(job_id)
    job = await service.replay(job_id, tenant_scope(principal), body.steps if body else None)
    return FastJSONResponse(job_document(job), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})
