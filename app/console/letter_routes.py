"""Console pages of dead letters under /ui: the list (archived on demand), replay selected, resolve by hand
with a reason, and the admin's bulk replay by filter behind a confirmation page that shows how many.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.console import service
from app.console.job_routes import (
    Query,
    Values,
    act_on_selected,
    check_id,
    checked,
    here,
    many,
    require_admin,
)
from app.console.session import Flash
from app.console.web import (
    ConsoleProblem,
    ViewerDep,
    back_to,
    checked_form,
    readable_errors,
    render,
    safe_next,
)
from app.dead_letters import service as letters_service
from app.dead_letters.repository import LetterFilter
from app.dead_letters.schemas import BulkReplay, ResolveRequest
from app.jobs import service as jobs_service

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/dead-letters", response_class=HTMLResponse)
async def dead_letters_page(request: Request, viewer: ViewerDep) -> Response:
    params = request.query_params
    query = Query()
    report_type = query.text(params, "report_type", 100)
    since = query.when(params, "since")
    archived = str(params.get("archived") or "") in ("1", "on", "true")
    if archived:
        query.pairs.append(("archived", "1"))
    query.paging(params)
    rows, next_href = [], None
    if not query.errors:
        flt = LetterFilter(
            scope=viewer.principal.tenant_scope,
            include_archived=archived,
            report_type=report_type,
            created_after=since,
        )
        rows = await letters_service.list_letters(flt, query.cursor, query.limit + 1)
        if len(rows) > query.limit:
            rows = rows[: query.limit]
            next_href = query.href("/ui/dead-letters", cursor=rows[-1].id)
    return render(
        request, "dead_letters.html", viewer, page="dead-letters", query=query, rows=rows,
        archived=archived, next_href=next_href, here=here(request),
    )  # fmt: skip


@router.post("/dead-letters/replay")
async def replay_selected_letters(request: Request, viewer: ViewerDep) -> Response:
    """The selected letters' jobs, replayed one by one as `POST /v1/jobs/{id}/replay` would (jobs:write,
    own tenant): the bulk endpoint is admin-only and spans every tenant."""
    form = await checked_form(request, viewer)
    return await act_on_selected(
        viewer, "replay", many(form, "ids"), safe_next(form.get("next") or "/ui/dead-letters")
    )


@router.post("/dead-letters/{letter_id}/resolve")
async def resolve_letter(request: Request, viewer: ViewerDep, letter_id: str) -> Response:
    form = await checked_form(request, viewer)
    check_id(letter_id, "dead letter")
    body = checked(ResolveRequest, reason=form.get("reason", ""))
    with readable_errors():
        letter = await jobs_service.resolve_dead_letter(
            letter_id, viewer.principal.tenant_scope, viewer.principal.label, body.reason
        )
    text = f"Dead letter of job {letter.job_id} resolved; jobs waiting on it may proceed."
    return back_to(safe_next(form.get("next") or "/ui/dead-letters"), Flash("ok", text))


def bulk_replay_request(params: Values) -> tuple[BulkReplay, list[tuple[str, str]]]:
    """The admin's bulk replay filter, checked as `POST /v1/dead-letters/replay` checks it."""
    query = Query()
    report_type = query.text(params, "report_type", 100)
    since = query.when(params, "since")
    if query.errors:
        raise ConsoleProblem(422, "The filter is invalid. " + "; ".join(query.errors))
    return checked(BulkReplay, report_type=report_type, since=since), query.pairs


@router.get("/dead-letters/replay-confirm", response_class=HTMLResponse)
async def replay_letters_confirm(request: Request, viewer: ViewerDep) -> Response:
    require_admin(viewer)
    body, pairs = bulk_replay_request(request.query_params)
    count = await service.letters_to_replay(body.report_type, body.since)
    return render(
        request, "replay_confirm.html", viewer, page="dead-letters", count=count, pairs=pairs,
        what="dead jobs whose unreplayed letters match (every tenant, archived letters included)",
        action="/ui/dead-letters/replay-confirm", back="/ui/dead-letters",
    )  # fmt: skip


@router.post("/dead-letters/replay-confirm")
async def replay_letters(request: Request, viewer: ViewerDep) -> Response:
    form = await checked_form(request, viewer, scope_needed="admin")
    body, _ = bulk_replay_request(form)
    replayed = await jobs_service.replay_dead_letters(report_type=body.report_type, since=body.since)
    return back_to("/ui/dead-letters", Flash("ok", f"{replayed} dead jobs replayed."))
