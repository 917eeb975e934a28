"""/v1/dead-letters: list dead letters, and replay them in bulk (admin).

Bulk replay is a jobs use case (`app.jobs.service.replay_dead_letters`) served here, beside the letters.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import PrincipalDep
from app.api.errors import problem_responses
from app.api.pagination import Cursor, Limit, decode_cursor, next_cursor
from app.core.wire import IsoDateTime
from app.dead_letters import service
from app.dead_letters.repository import LetterFilter
from app.dead_letters.schemas import BulkReplay, BulkReplayResult, DeadLetterPage, DeadLetterPublic
from app.jobs import service as jobs_service

router = APIRouter(prefix="/v1/dead-letters", tags=["dead letters"])


@router.get(
    "",
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
    limit: Limit = 50,
    cursor: Cursor = None,
) -> DeadLetterPage:
    flt = LetterFilter(
        scope=principal.tenant_scope,
        include_archived=include_archived,
        report_type=report_type,
        created_after=created_after,
        created_before=created_before,
    )
    rows = await service.list_letters(flt, decode_cursor(cursor), limit + 1)
    return DeadLetterPage(
        items=[DeadLetterPublic.of(r) for r in rows[:limit]],
        next_cursor=next_cursor([r.id for r in rows], limit),
    )


@router.post(
    "/replay",
    status_code=202,
    response_model=BulkReplayResult,
    responses=problem_responses(401, 403, 413, 422, 503),
    summary="Replay dead letters in bulk (admin)",
)
async def replay_dead_letters(body: BulkReplay, _principal: PrincipalDep) -> BulkReplayResult:
    count = await jobs_service.replay_dead_letters(
        job_ids=body.job_ids or (), report_type=body.report_type, since=body.since
    )
    return BulkReplayResult(replayed=count)
