"""/v1/jobs: submit (one or a batch), read (with long-poll), list, download, cancel, replay, steps.

Thin: the wire shape in, one service call, the wire shape out.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, Field, ValidationError, field_serializer

from app.auth.http import PrincipalDep
from app.core.config import get_settings
from app.core.errors import NotFound, OrchestratorError, RateLimited, ValidationFailed
from app.core.states import JobStatus, is_terminal
from app.core.wire import IsoDateTime
from app.dead_letters.schemas import BulkReplay, BulkReplayResult, DeadLetterPublic, ResolveRequest
from app.fairshare import service as fairshare
from app.http.errors import domain_problem, field_errors, problem_responses
from app.http.pagination import ULID_RE, Cursor, JobId, Limit, check_id, decode_cursor, next_cursor
from app.http.responses import model_response
from app.http.schemas import Problem
from app.jobs import service
from app.jobs.batch import BatchEntry, BatchOutcome, submit_batch
from app.jobs.list_repository import JobFilter
from app.jobs.schemas import (
    JobBatchCreate,
    JobBatchItem,
    JobCreate,
    JobPage,
    JobPublic,
    ReplayRequest,
    StepPublic,
)
from app.jobs.service import SubmitResult
from app.outputs.http import output_response

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
# The dead-letter use cases that are jobs use cases (bulk replay, resolve), under the letters' own path.
letters_router = APIRouter(prefix="/v1/dead-letters", tags=["dead letters"])

MAX_WAIT_S = 30
OUTPUT_MEDIA_TYPES = ("text/csv", "text/plain", "application/octet-stream")


def _job_answer(job: JobPublic, status_code: int) -> Response:
    return model_response(job, status_code, headers={"Location": f"/v1/jobs/{job.id}"})


@router.post(
    "",
    status_code=202,
    response_model=JobPublic,
    responses={
        200: {"model": JobPublic, "description": "Idempotent replay: the job created earlier"},
        **problem_responses(401, 403, 409, 413, 422, 429, 503),
    },
    summary="Submit a report job",
)
async def submit_job(
    body: JobCreate,
    principal: PrincipalDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=200,
            description="Same key + same body → the same job",
        ),
    ] = None,
) -> Response:
    """`blocked_by` and `waiting_for` already say what the new job waits for: an unfinished predecessor with
    the same ordering key, a paused report type or tenant, a full concurrency cap."""
    result = await service.submit(principal.tenant, _request_of(body), idempotency_key)
    waits = result.waiting_for if result.created else (await fairshare.waiting_for([result.job]))[0]
    return _job_answer(JobPublic.of(result.job, waits), 202 if result.created else 200)


def _request_of(body: JobCreate) -> service.SubmitRequest:
    return service.SubmitRequest(
        report_type=body.report_type,
        params=body.params,
        run_at=body.run_at,
        max_attempts=body.max_attempts,
        ordering_key=body.ordering_key,
        callback_url=body.callback_url,
        on_predecessor_dead=body.on_predecessor_dead,
        priority=body.priority,
        deliver_to=tuple(body.deliver_to),
    )


class BatchItemResult(BaseModel):
    index: int = Field(description="The item's position in `jobs` (from 0)")
    status: Literal[200, 202, 409, 422, 429] = Field(
        description="What a single submit of this item would have answered"
    )
    job: JobPublic | None = Field(description="The job (202 new, 200 an idempotent repeat), else null")
    problem: Problem | None = Field(description="Why the item was refused (problem+json), else null")

    @field_serializer("problem")
    def _problem_as_sent(self, problem: Problem | None) -> dict[str, Any] | None:
        return problem.model_dump(exclude_none=True) if problem is not None else None


class JobBatchResult(BaseModel):
    results: list[BatchItemResult] = Field(description="One per item, in request order")
    created: int = Field(description="Items answered 202 (new jobs)")
    existing: int = Field(description="Items answered 200 (idempotent repeats)")
    rejected: int = Field(description="Items answered 409, 422 or 429")


def _batch_entry(item: JobBatchItem | dict[str, Any]) -> BatchEntry | OrchestratorError:
    """A parsed item, or the 422 of one that is not a JobBatchItem (or is larger than MAX_BODY_BYTES)."""
    if isinstance(item, dict):
        try:
            item = JobBatchItem.model_validate(item)
        except ValidationError as exc:
            return ValidationFailed("The job request is invalid.", field_errors(exc.errors()))
    limit = get_settings().max_body_bytes
    if len(item.__pydantic_serializer__.to_json(item, exclude_unset=True)) > limit:
        error = {"loc": [], "msg": f"the item exceeds MAX_BODY_BYTES ({limit} bytes)", "type": "too_large"}
        return ValidationFailed("The job request is too large.", [error])
    return BatchEntry(_request_of(item), item.idempotency_key)


def _batch_result(index: int, outcome: BatchOutcome, waits: dict[str, Any] | None) -> BatchItemResult:
    if isinstance(outcome, SubmitResult):
        status = 202 if outcome.created else 200
        job = JobPublic.of(outcome.job, waits)
        return BatchItemResult(index=index, status=status, job=job, problem=None)
    problem = Problem.model_validate(domain_problem(outcome, ("jobs", index)))
    return BatchItemResult(index=index, status=problem.status, job=None, problem=problem)


@router.post(
    "/batch",
    status_code=207,
    response_model=JobBatchResult,
    responses={
        207: {"description": "Every item's own answer, in request order"},
        **problem_responses(401, 403, 413, 422, 503),
    },
    summary="Submit up to 1,000 report jobs at once",
)
async def submit_jobs_batch(body: JobBatchCreate, principal: PrincipalDep) -> Response:
    """Each item is what `POST /v1/jobs` takes, plus an optional `idempotency_key`, and gets what a single
    submit would have answered (202, 200, 409, 422 or 429) without sinking the others. New jobs are
    inserted in one transaction and enqueued together after it; a database outage is a 503 for the
    whole batch and creates nothing. Items over the tenant's submit rate limit get 429 (the 207 then
    carries `Retry-After`). The body may be up to 64 × MAX_BODY_BYTES; each item up to MAX_BODY_BYTES."""
    outcomes = await submit_batch(principal.tenant, [_batch_entry(item) for item in body.jobs])
    waits = await _waits_of(outcomes)
    results = [_batch_result(i, outcome, waits.get(i)) for i, outcome in enumerate(outcomes)]
    statuses = [r.status for r in results]
    answer = JobBatchResult(
        results=results,
        created=statuses.count(202),
        existing=statuses.count(200),
        rejected=len(statuses) - statuses.count(202) - statuses.count(200),
    )
    retry_after_s = max((o.retry_after_s for o in outcomes if isinstance(o, RateLimited)), default=None)
    headers = {"Retry-After": str(retry_after_s)} if retry_after_s is not None else None
    return model_response(answer, 207, headers=headers)


async def _waits_of(outcomes: list[BatchOutcome]) -> dict[int, dict[str, Any] | None]:
    """What each item's job waits for (pause, full cap), by item index: a new job's came with its
    enqueue; an existing job's is asked in one Redis round trip for all of them (none when all are new)."""
    waits = {i: o.waiting_for for i, o in enumerate(outcomes) if isinstance(o, SubmitResult) and o.created}
    indexed = [(i, o.job) for i, o in enumerate(outcomes) if isinstance(o, SubmitResult) and not o.created]
    if indexed:
        found = await fairshare.waiting_for([job for _, job in indexed])
        waits.update({i: wait for (i, _), wait in zip(indexed, found, strict=True)})
    return waits


@router.get("", response_model=JobPage, responses=problem_responses(401, 403, 422, 503), summary="List jobs")
async def list_jobs(
    principal: PrincipalDep,
    status: Annotated[list[JobStatus] | None, Query(description="Repeat to match several")] = None,
    report_type: Annotated[str | None, Query(max_length=100)] = None,
    created_after: Annotated[IsoDateTime | None, Query()] = None,
    created_before: Annotated[IsoDateTime | None, Query()] = None,
    schedule_id: Annotated[str | None, Query(max_length=26, description="Jobs this schedule made")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    flt = JobFilter(
        scope=principal.tenant_scope,
        statuses=status or (),
        report_type=report_type,
        created_after=created_after,
        created_before=created_before,
        schedule_id=schedule_id,
    )
    found = await service.list_jobs(flt, decode_cursor(cursor), limit + 1)
    jobs = found.rows
    shown = jobs[:limit]
    waits = await fairshare.waiting_for(shown)
    page = JobPage(
        items=[JobPublic.of(j, w) for j, w in zip(shown, waits, strict=True)],
        next_cursor=next_cursor([j.id for j in jobs], limit, found.resume_before),
    )
    return model_response(page)


@router.get(
    "/{job_id}",
    response_model=JobPublic,
    responses=problem_responses(401, 403, 404, 422, 503),
    summary="Get a job, optionally waiting for it to finish",
)
async def get_job(
    job_id: JobId,
    principal: PrincipalDep,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S, description="Long-poll up to this many seconds")] = 0,
) -> Response:
    check_id(job_id)
    scope = principal.tenant_scope
    job = await service.get_job(job_id, scope)
    if wait > 0 and not is_terminal(job.status):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        pause_s = 0.02
        while not is_terminal(job.status) and (left := deadline - loop.time()) > 0:
            await asyncio.sleep(min(pause_s, left))
            pause_s = min(pause_s * 1.5, 0.5)
            job = await service.get_job(job_id, scope)
    return model_response(JobPublic.of(job, (await fairshare.waiting_for([job]))[0]))


@router.get(
    "/{job_id}/output",
    response_class=FileResponse,
    responses={
        200: {
            "content": {
                media_type: {"schema": {"type": "string", "format": "binary"}}
                for media_type in OUTPUT_MEDIA_TYPES
            },
            "description": "The report file, with the content type the report declared (a CSV, text, or "
            "any other type a report type writes)",
        },
        307: {
            "description": "With an object store (OUTPUT_STORAGE=s3://…) and OUTPUT_LINK_TTL_S > 0: the file "
            "is at the presigned link in `Location`, valid for OUTPUT_LINK_TTL_S seconds",
            "headers": {"Location": {"schema": {"type": "string", "format": "uri"}}},
        },
        **problem_responses(401, 403, 404, 409, 503),
    },
    summary="Download a finished job's report file",
)
async def get_job_output(job_id: JobId, principal: PrincipalDep) -> Response:
    """With an object store and OUTPUT_LINK_TTL_S > 0, a 307 to a presigned link valid that long."""
    check_id(job_id)
    job, stored = await service.get_output(job_id, principal.tenant_scope)
    return output_response(job, stored)


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=JobPublic,
    responses=problem_responses(401, 403, 404, 409, 503),
    summary="Cancel a job (a request, for a running job)",
)
async def cancel_job(job_id: JobId, principal: PrincipalDep) -> Response:
    """A `pending`, `scheduled` or `retrying` job is cancelled at once (202, `status: cancelled`).

    For a `running` job the cancel is a request: the answer is 202 with `status: running`,
    `cancel_requested: true` and `cancel_requested_at`. The job keeps running until its worker notices the
    request at its next heartbeat (every `STUCK_AFTER_S / 4`, at most 10 s) and ends `cancelled`, its attempt
    `cancelled`. A report that finishes first ends `done` (a failure ends `dead` if permanent, else
    `cancelled` without a retry): the job keeps `cancel_requested` and its time, and its attempt shows
    `finished_before_cancel: true`. A job that is already `done`, `dead` or `cancelled` answers 409."""
    check_id(job_id)
    job = await service.cancel(job_id, principal.tenant_scope)
    return _job_answer(JobPublic.of(job), 202)


@router.post(
    "/{job_id}/replay",
    status_code=202,
    response_model=JobPublic,
    responses=problem_responses(401, 403, 404, 409, 422, 503),
    summary="Replay a dead or cancelled job",
)
async def replay_job(job_id: JobId, principal: PrincipalDep, body: ReplayRequest | None = None) -> Response:
    """Attempts reset, replay_count + 1. For multi-step jobs, `steps` names the steps to run again
    (default: every failed step); succeeded steps never run again."""
    check_id(job_id)
    job = await service.replay(job_id, principal.tenant_scope, body.steps if body else None)
    return _job_answer(JobPublic.of(job, (await fairshare.waiting_for([job]))[0]), 202)


@router.get(
    "/{job_id}/steps",
    response_model=list[StepPublic],
    responses=problem_responses(401, 403, 404, 503),
    summary="A multi-step job's steps and their outcomes",
)
async def list_job_steps(job_id: JobId, principal: PrincipalDep) -> list[StepPublic]:
    check_id(job_id)
    return [StepPublic.of(row) for row in await service.list_steps(job_id, principal.tenant_scope)]


# ---- /v1/dead-letters: replay in bulk, resolve by hand ----------------------------------------------------


@letters_router.post(
    "/replay",
    status_code=202,
    response_model=BulkReplayResult,
    responses=problem_responses(401, 403, 413, 422, 503),
    summary="Replay dead letters in bulk (admin)",
)
async def replay_dead_letters(body: BulkReplay, _principal: PrincipalDep) -> BulkReplayResult:
    count = await service.replay_dead_letters(
        job_ids=body.job_ids or (), report_type=body.report_type, since=body.since
    )
    return BulkReplayResult(replayed=count)


@letters_router.post(
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
    letter = await service.resolve_dead_letter(
        letter_id, principal.tenant_scope, principal.label, body.reason
    )
    return DeadLetterPublic.of(letter)
