"""/v1/dead-letters: list dead letters, resolve one by hand, and replay them in bulk (admin).

Bulk replay and resolve are jobs use cases (`app.jobs.service`) served here, beside the letters.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.deps import PrincipalDep
from app.api.errors import problem_responses
from app.api.pagination import ULID_RE, Cursor, Limit, decode_cursor, next_cursor
from app.core.errors import NotFound
from app.core.wire import IsoDateTime
from app.dead_letters import service
from app.dead_letters.repository import LetterFilter
from app.dead_letters.schemas import (
    BulkReplay,
    BulkReplayResult,
    DeadLetterPage,
    DeadLetterPublic,
    ResolveRequest,
)
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


@router.post(
    "/{letter_id}/resolve",
    response_model=DeadLetterPublic,
    responses=problem_responses(401, 403, 404, 409, 413, 422, 503),
    summary="Resolve a dead letter by hand (no replay)",
)
async def resolve_dead_letter(
    letter_id: Annotated[str, Path(description="Dead letter id (ULID)")],
    body: ResolveRequest,
    principal: PrincipalDep,
) -> DeadLetterPublic:
    """For a dead job whose effect an operator fixed by hand: the letter is archived with who and why, and the
    jobs of its ordering key that wait for it proceed. The job stays `dead` and can still be replayed."""
    if not ULID_RE.match(letter_id):
        raise NotFound(f"No dead letter {letter_id[:40]!r}.")
    letter = await jobs_service.resolve_dead_letter(
        letter_id, principal.tenant_scope, principal.label, body.reason
    )
    return DeadLetterPublic.of(letter)
