"""Console pages of jobs under /ui: the filtered job list with bulk cancel and replay, one job (attempts,
steps, why it waits, download, cancel, replay) and the admin's "replay all matching" behind a confirmation
page that shows how many; the helpers here serve app/console/letter_routes.py too.

Every action goes through the service the API calls for it, in the viewer's tenants, with the same refusals:
a single action's refusal is the API's status as a readable page (404, 409, 422); a bulk action's per-item
refusals are summed up in the flash message.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.datastructures import ImmutableMultiDict

from app.console import service
from app.console.fairshare_routes import waiting_text
from app.console.session import Flash
from app.console.web import (
    ConsoleProblem,
    Viewer,
    ViewerDep,
    back_to,
    checked_form,
    readable_errors,
    render,
    safe_next,
)
from app.core.states import CANCELLABLE, REPLAYABLE, JobStatus
from app.core.tenancy import EVERY_TENANT, TenantScope
from app.destinations import delivery
from app.fairshare import service as fairshare
from app.jobs import service as jobs_service
from app.jobs.list_repository import JobFilter
from app.jobs.schemas import JobPublic
from app.outputs.http import output_response

router = APIRouter(prefix="/ui", include_in_schema=False)

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_BULK_ITEMS = 1000  # as many job ids as POST /v1/dead-letters/replay takes
ID_CHARS = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: what a ULID is made of

Model = TypeVar("Model", bound=BaseModel)
Values = Mapping[str, Any]  # a query string or a form, one value a name
Params = ImmutableMultiDict[str, Any]  # a query string or a form, with every value of a repeated name


# ---- reading filters from a query string (or a confirmation page's hidden fields) ----------------------


@dataclass
class Query:
    """Filters as the viewer gave them: `pairs` re-create the query string (links, hidden fields), `errors`
    say what could not be read (the list is then not shown rather than shown unfiltered)."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cursor: str | None = None
    limit: int = PAGE_SIZE

    def value(self, name: str) -> str:
        return next((v for k, v in self.pairs if k == name), "")

    def href(self, path: str, **extra: str) -> str:
        pairs = [*self.pairs, *extra.items()]
        return f"{path}?{urlencode(pairs)}" if pairs else path

    def text(self, params: Values, name: str, max_chars: int = 200) -> str | None:
        value = str(params.get(name) or "").strip()
        if len(value) > max_chars:
            self.errors.append(f"{name}: at most {max_chars} characters")
            return None
        if value:
            self.pairs.append((name, value))
        return value or None

    def when(self, params: Values, name: str) -> datetime | None:
        """A datetime-local value (no zone: UTC), or an ISO 8601 time with its zone."""
        raw = str(params.get(name) or "").strip()
        if not raw:
            return None
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            self.errors.append(f"{name}: not a date and time ({raw[:40]!r})")
            return None
        at = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        self.pairs.append((name, at.replace(tzinfo=None).isoformat()))  # as a datetime-local value
        return at

    def paging(self, params: Values) -> None:
        cursor = str(params.get("cursor") or "")
        if cursor and not service.ULID_RE.match(cursor):
            self.errors.append("cursor: not a cursor of this list")
        self.cursor = cursor or None
        raw_limit = str(params.get("limit") or "")
        if raw_limit:
            if raw_limit.isdigit() and 1 <= int(raw_limit) <= MAX_PAGE_SIZE:
                self.limit = int(raw_limit)
                self.pairs.append(("limit", raw_limit))
            else:
                self.errors.append(f"limit: a whole number from 1 to {MAX_PAGE_SIZE}")


@dataclass
class JobQuery(Query):
    statuses: list[JobStatus] = field(default_factory=list)
    exact_id: str | None = None
    filter: JobFilter = field(default_factory=lambda: JobFilter(scope=EVERY_TENANT))

    @property
    def dead_only(self) -> bool:
        return self.statuses == [JobStatus.DEAD]


def job_query(params: Params, viewer: Viewer) -> JobQuery:
    """The jobs list's filters. Only an admin may name a tenant (others always see just their own)."""
    query = JobQuery()
    for raw in params.getlist("status"):
        if not raw:
            continue
        try:
            status = JobStatus(raw)
        except ValueError:
            query.errors.append(f"status: {raw[:40]!r} is not a job status")
            continue
        if status not in query.statuses:
            query.statuses.append(status)
            query.pairs.append(("status", status.value))
    report_type = query.text(params, "report_type", 100)
    scope = viewer.principal.tenant_scope
    if viewer.is_admin and (tenant := query.text(params, "tenant", 64)):
        scope = TenantScope.only(tenant)
    ordering_key = query.text(params, "ordering_key", 200)
    created_after = query.when(params, "created_after")
    created_before = query.when(params, "created_before")
    prefix = None
    if q := query.text(params, "q", 40):
        wanted = q.upper()
        if len(wanted) == 26 and service.ULID_RE.match(wanted):
            query.exact_id = wanted
        elif len(wanted) < 26 and all(c in ID_CHARS for c in wanted):
            prefix = wanted
        else:
            query.errors.append("q: a job id, or the first characters of one (digits and capital letters)")
    query.paging(params)
    query.filter = JobFilter(
        scope=scope,
        statuses=query.statuses,
        report_type=report_type,
        created_after=created_after,
        created_before=created_before,
        ordering_key=ordering_key,
        id_prefix=prefix,
    )
    return query


def dead_job_query(params: Params, viewer: Viewer) -> JobQuery:
    """The filters of "replay all matching": the list's, for dead jobs only, every page."""
    query = job_query(params, viewer)
    query.pairs = [(k, v) for k, v in query.pairs if k not in ("status", "limit")]
    query.pairs.insert(0, ("status", JobStatus.DEAD.value))
    query.statuses = [JobStatus.DEAD]
    query.filter = dataclasses.replace(query.filter, statuses=[JobStatus.DEAD])
    return query


def here(request: Request) -> str:
    """This page's own address, for a form's `next` (where an action comes back to)."""
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


def checked(model: type[Model], **data: Any) -> Model:
    """A form's values checked by the API's own request schema; its complaints as a readable 422 page."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'form'}: {e['msg']}" for e in exc.errors()
        )
        raise ConsoleProblem(422, f"The form is invalid. {fields}") from exc


def many(form: dict[str, Any], name: str) -> list[str]:
    value = form.get(name)
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def summary(verb: str, outcomes: list[service.ItemOutcome]) -> Flash:
    """The flash of a bulk action: `2 cancelled; 1 refused: Job … is already done.`"""
    done = sum(1 for o in outcomes if o.refusal is None)
    refused = [o.refusal for o in outcomes if o.refusal is not None]
    text = f"{done} {verb}"
    if refused:
        text += f"; {len(refused)} refused: " + " ".join(refused)
    return Flash("error" if refused else "ok", text)


def check_id(value: str, what: str = "job") -> str:
    """A malformed id names nothing: 404 without a lookup, as the API answers."""
    if not service.ULID_RE.match(value):
        raise ConsoleProblem(404, f"No {what} {value[:40]!r}.")
    return value


def require_admin(viewer: Viewer) -> None:
    if not viewer.is_admin:
        raise ConsoleProblem(403, "This key lacks the `admin` scope.")


# ---- jobs ---------------------------------------------------------------------------------------------


@router.get("/jobs", response_class=HTMLResponse)
async def jobs_page(request: Request, viewer: ViewerDep) -> Response:
    query = job_query(request.query_params, viewer)
    if query.exact_id:
        return RedirectResponse(f"/ui/jobs/{query.exact_id}", status_code=303)
    rows, next_href = [], None
    if not query.errors:
        found = await jobs_service.list_jobs(query.filter, query.cursor, query.limit + 1)
        rows = found.rows[: query.limit]
        if len(found.rows) > query.limit:
            next_href = query.href("/ui/jobs", cursor=rows[-1].id)
        elif found.resume_before:
            next_href = query.href("/ui/jobs", cursor=found.resume_before)
    replay_matching = None
    if viewer.is_admin and query.dead_only and not query.errors:
        replay_matching = dead_job_query(request.query_params, viewer).href("/ui/jobs/replay-matching")
    return render(
        request, "jobs.html", viewer, page="jobs", query=query, rows=rows, next_href=next_href,
        statuses=list(JobStatus), here=here(request), replay_matching=replay_matching,
    )  # fmt: skip


@router.post("/jobs/bulk")
async def bulk_jobs(request: Request, viewer: ViewerDep) -> Response:
    form = await checked_form(request, viewer)
    back = safe_next(form.get("next") or "/ui/jobs")
    action = form.get("action")
    if action not in ("cancel", "replay"):
        return back_to(back, Flash("error", "Choose cancel or replay."))
    verb: Literal["cancel", "replay"] = "cancel" if action == "cancel" else "replay"
    return await act_on_selected(viewer, verb, many(form, "ids"), back)


async def act_on_selected(
    viewer: Viewer, action: Literal["cancel", "replay"], ids: list[str], back: str
) -> Response:
    if not ids:
        return back_to(back, Flash("error", "Select at least one job first."))
    if len(ids) > MAX_BULK_ITEMS:
        return back_to(back, Flash("error", f"Select at most {MAX_BULK_ITEMS} jobs at a time."))
    outcomes = await service.act_on_jobs(action, ids, viewer.principal.tenant_scope)
    return back_to(back, summary("cancelled" if action == "cancel" else "replayed", outcomes))


@router.get("/jobs/replay-matching", response_class=HTMLResponse)
async def replay_matching_confirm(request: Request, viewer: ViewerDep) -> Response:
    require_admin(viewer)
    query = dead_job_query(request.query_params, viewer)
    if query.errors:
        raise ConsoleProblem(422, "The filters are invalid. " + "; ".join(query.errors))
    count = len(await service.matching_job_ids(query.filter))
    return render(
        request, "replay_confirm.html", viewer, page="jobs", count=count, pairs=query.pairs,
        what="dead jobs matching these filters", action="/ui/jobs/replay-matching",
        back=query.href("/ui/jobs"),
    )  # fmt: skip


@router.post("/jobs/replay-matching")
async def replay_matching(request: Request, viewer: ViewerDep) -> Response:
    await checked_form(request, viewer, scope_needed="admin")
    query = dead_job_query(await request.form(), viewer)
    if query.errors:
        raise ConsoleProblem(422, "The filters are invalid. " + "; ".join(query.errors))
    ids = await service.matching_job_ids(query.filter)
    replayed = await service.replay_dead_jobs(ids)
    text = f"{replayed} of {len(ids)} matching dead jobs replayed."
    return back_to(query.href("/ui/jobs"), Flash("ok" if replayed == len(ids) else "error", text))


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
async def job_page(request: Request, viewer: ViewerDep, job_id: str) -> Response:
    with readable_errors():
        detail = await service.job_detail(job_id, viewer.principal.tenant_scope)
    job = detail.job
    doc = JobPublic.of(job, (await fairshare.waiting_for([job]))[0])
    return render(
        request, "job.html", viewer, page="jobs", job=job, doc=doc, waits_text=waiting_text(doc.waiting_for),
        attempts=detail.attempts,
        steps=detail.steps, params_json=json.dumps(job.params, indent=2, sort_keys=True, ensure_ascii=False),
        can_cancel=job.status in CANCELLABLE and not job.cancel_requested,
        can_replay=job.status in REPLAYABLE, here=here(request),
        deliveries=await delivery.job_deliveries(job.id, viewer.principal.tenant_scope),
    )  # fmt: skip


@router.get("/jobs/{job_id}/output")
async def job_output(viewer: ViewerDep, job_id: str) -> Response:
    """The report file, exactly as `GET /v1/jobs/{id}/output` serves it (tenant check, name, type, link)."""
    check_id(job_id)
    with readable_errors():
        job, stored = await jobs_service.get_output(job_id, viewer.principal.tenant_scope)
    return output_response(job, stored)


@router.post("/jobs/{job_id}/cancel")
async def cancel_job(request: Request, viewer: ViewerDep, job_id: str) -> Response:
    await checked_form(request, viewer)
    check_id(job_id)
    with readable_errors():
        job = await jobs_service.cancel(job_id, viewer.principal.tenant_scope)
    text = (
        f"Cancel requested: job {job.id} stops at its next heartbeat."
        if job.status == JobStatus.RUNNING
        else f"Job {job.id} cancelled."
    )
    return back_to(f"/ui/jobs/{job.id}", Flash("ok", text))


@router.post("/jobs/{job_id}/replay")
async def replay_job(request: Request, viewer: ViewerDep, job_id: str) -> Response:
    form = await checked_form(request, viewer)
    check_id(job_id)
    steps = many(form, "steps") or None  # none ticked: every failed step, as the API's default
    with readable_errors():
        job = await jobs_service.replay(job_id, viewer.principal.tenant_scope, steps)
    named = f" (steps: {', '.join(steps)})" if steps else ""
    return back_to(f"/ui/jobs/{job.id}", Flash("ok", f"Job {job.id} replayed{named}: it is pending again."))
