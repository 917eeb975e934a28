"""/v1/jobs: submit, read (with long-poll), list, attempts and output download.

Thin: validate the wire shape, call `app.service`, shape the answer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Response
from fastapi.responses import FileResponse

from app import service
from app.api.deps import PrincipalDep, tenant_scope
from app.api.errors import problem_responses
from app.api.responses import FastJSONResponse
from app.api.schemas import AttemptPublic, IsoDateTime, JobCreate, JobPage, JobPublic, StepPublic
from app.errors import NotFound, ValidationFailed
from app.repository import JobFilter
from app.representation import job_document
from app.states import JobStatus, is_terminal

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

MAX_WAIT_S = 30
MAX_LIMIT = 200
ULID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")

JobId = Annotated[str, Path(description="Job id (ULID)")]


def check_id(job_id: str) -> str:
    if not ULID_RE.match(job_id):
        raise NotFound(f"No job {job_id[:40]!r}.")
    return job_id


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    if not ULID_RE.match(raw):
        raise ValidationFailed(
            "Bad cursor.",
            [{"loc": ["query", "cursor"], "msg": "not a cursor from this API", "type": "cursor"}],
        )
    return raw


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
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=200,
            description="Same key + same body → the same job",
        ),
    ] = None,
) -> FastJSONResponse:
    req = service.SubmitRequest(
        report_type=body.report_type,
        params=body.params,
        run_at=body.run_at,
        max_attempts=body.max_attempts,
        ordering_key=body.ordering_key,
        callback_url=body.callback_url,
        on_predecessor_dead=body.on_predecessor_dead,
    )
    result = await service.submit(principal.tenant, req, idempotency_key)
    return FastJSONResponse(
        job_document(result.job),
        status_code=202 if result.created else 200,
        headers={"Location": f"/v1/jobs/{result.job.id}"},
    )


@router.get("", response_model=JobPage, responses=problem_responses(401, 403, 422, 503), summary="List jobs")
async def list_jobs(
    principal: PrincipalDep,
    status: Annotated[list[JobStatus] | None, Query(description="Repeat to match several")] = None,
    report_type: Annotated[str | None, Query(max_length=100)] = None,
    created_after: Annotated[IsoDateTime | None, Query()] = None,
    created_before: Annotated[IsoDateTime | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: Annotated[
        str | None, Query(max_length=100, description="`next_cursor` of the previous page")
    ] = None,
) -> FastJSONResponse:
    before_id = decode_cursor(cursor) if cursor else None
    flt = JobFilter(
        tenant=tenant_scope(principal),
        statuses=status or (),
        report_type=report_type,
        created_after=created_after,
        created_before=created_before,
    )
    jobs = await service.list_jobs(flt, before_id, limit + 1)
    next_cursor = encode_cursor(jobs[limit - 1].id) if len(jobs) > limit else None
    return FastJSONResponse({"items": [job_document(j) for j in jobs[:limit]], "next_cursor": next_cursor})


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
) -> FastJSONResponse:
    check_id(job_id)
    tenant = tenant_scope(principal)
    job = await service.get_job(job_id, tenant)
    if wait > 0 and not is_terminal(job.status):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        pause_s = 0.02
        while not is_terminal(job.status) and (left := deadline - loop.time()) > 0:
            await asyncio.sleep(min(pause_s, left))
            pause_s = min(pause_s * 1.5, 0.5)
            job = await service.get_job(job_id, tenant)
    return FastJSONResponse(job_document(job))


@router.get(
    "/{job_id}/attempts",
    response_model=list[AttemptPublic],
    responses=problem_responses(401, 403, 404, 503),
    summary="A job's attempts, oldest first",
)
async def list_attempts(job_id: JobId, principal: PrincipalDep) -> list[AttemptPublic]:
    check_id(job_id)
    rows = await service.list_attempts(job_id, tenant_scope(principal))
    return [AttemptPublic.of(r) for r in rows]


@router.get(
    "/{job_id}/output",
    response_class=FileResponse,
    responses={
        200: {
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            "description": "The report file, with the content type the report declared",
        },
        **problem_responses(401, 403, 404, 409, 503),
    },
    summary="Download a finished job's report file",
)
async def get_output(job_id: JobId, principal: PrincipalDep) -> FileResponse:
    check_id(job_id)
    job, path = await service.get_output(job_id, tenant_scope(principal))
    return FileResponse(
        path,
        media_type=job.output_content_type or "application/octet-stream",
        filename=job.output_filename or path.name,
    )


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=JobPublic,
    responses=problem_responses(401, 403, 404, 409, 503),
    summary="Cancel a job",
)
async def cancel_job(job_id: JobId, principal: PrincipalDep) -> FastJSONResponse:
    """Waiting jobs are cancelled at once; a running job is asked to stop and ends `cancelled` shortly."""
    check_id(job_id)
    job = await service.cancel(job_id, tenant_scope(principal))
    return FastJSONResponse(job_document(job), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})


@router.get(
    "/{job_id}/steps",
    response_model=list[StepPublic],
    responses=problem_responses(401, 403, 404, 503),
    summary="A multi-step job's steps and their outcomes",
)
async def list_steps(job_id: JobId, principal: PrincipalDep) -> list[StepPublic]:
    check_id(job_id)
    return [StepPublic.of(row) for row in await service.list_steps(job_id, tenant_scope(principal))]
