"""/v1/dead-letters: list dead letters. Resolving one by hand and replaying them in bulk are jobs use cases,
served under the same path by `app.jobs.routes.letters_router`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.auth.http import PrincipalDep
from app.core.wire import IsoDateTime
from app.dead_letters import service
from app.dead_letters.repository import LetterFilter
from app.dead_letters.schemas import DeadLetterPage, DeadLetterPublic
from app.http.errors import problem_responses
from app.http.pagination import Cursor, Limit, decode_cursor, next_cursor

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
