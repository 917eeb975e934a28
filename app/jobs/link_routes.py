"""`GET /d/{job_id}/{filename}?exp=&sig=`: a delivered report's download link, no API key: the signature is
checked before anything is read, then the expiry, the job and its file; refusals are a page or problem+json.
"""

from __future__ import annotations

import html
import logging
import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.core.config import get_settings
from app.core.db import is_db_outage
from app.core.errors import NotFound, OrchestratorError
from app.core.states import JobStatus
from app.core.tenancy import EVERY_TENANT
from app.http.errors import problem, problem_responses, status_of
from app.jobs import service
from app.jobs.routes import OUTPUT_MEDIA_TYPES
from app.outputs.http import output_response
from app.outputs.links import LINK_PREFIX, LinkRefused, link_secret, redact_signature, verify_link

router = APIRouter(prefix=LINK_PREFIX, tags=["download links"])

#: Every answer of a link: never cached (a shared cache would hand the file on), never a Referer onwards.
LINK_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Robots-Tag": "noindex"}
PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'"

_TITLES = {
    403: "This download link is not valid",
    404: "This report no longer exists",
    409: "This report is not ready",
    410: "This download link has expired",
    503: "Downloads are unavailable right now",
}
_DETAILS = {
    403: "The link was changed or is incomplete. Copy the whole link from the message again.",
    404: "The report was deleted (reports are kept for a limited time). Ask for it to be produced again.",
    409: "The report is being produced again. Try the link once it has finished.",
    410: "Download links work for a limited time. Ask for a new link or download the report from the API.",
    503: "The service could not reach its storage. Try again in a minute.",
}
_DESCRIPTIONS = {
    403: "The link was changed or is incomplete (bad or missing signature, another file name)",
    404: "No such job (never existed, or deleted after its retention)",
    409: "The job is not `done` (replayed and running again)",
    410: "The link has expired, or the job's file is gone",
    503: "MySQL or the object store is unreachable",
}


class SignatureRedaction(logging.Filter):
    """Keeps link signatures out of the access log (uvicorn logs each request's path and query)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, str) and "sig=" in a for a in record.args):
            record.args = tuple(redact_signature(a) if isinstance(a, str) else a for a in record.args)
        return True


def install_log_redaction() -> None:
    """Redact signatures in uvicorn's access log (once per process, however many apps are built)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, SignatureRedaction) for f in access.filters):
        access.addFilter(SignatureRedaction())


def _wants_page(request: Request) -> bool:
    """A person who clicked the link in a chat or a mail (a browser asks for text/html)."""
    return "text/html" in request.headers.get("accept", "").lower()


def _page(status: int) -> str:
    title, detail = html.escape(_TITLES[status]), html.escape(_DETAILS[status])
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>body{{font-family:system-ui,sans-serif;max-width:36rem;"
        "margin:4rem auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}p{line-height:1.5}"
        f".code{{color:#777}}</style></head><body><h1>{title}</h1><p>{detail}</p>"
        f'<p class="code">HTTP {status}</p></body></html>'
    )


def refusal(request: Request, status: int) -> Response:
    """A refused link: a short page for a browser, problem+json for everything else."""
    if _wants_page(request):
        headers = {**LINK_HEADERS, "Content-Security-Policy": PAGE_CSP}
        return HTMLResponse(_page(status), status_code=status, headers=headers)
    headers = {**LINK_HEADERS, "Retry-After": "2"} if status == 503 else LINK_HEADERS
    return problem(status, _DETAILS[status], title=_TITLES[status], headers=headers)


@router.get(
    "/{job_id}/{filename}",
    response_class=Response,
    responses={
        200: {
            "content": {t: {"schema": {"type": "string", "format": "binary"}} for t in OUTPUT_MEDIA_TYPES},
            "description": "The report file, with the content type the report declared",
        },
        307: {
            "description": "With an object store and OUTPUT_LINK_TTL_S > 0: a fresh presigned link",
            "headers": {"Location": {"schema": {"type": "string", "format": "uri"}}},
        },
        **{
            code: {**doc, "description": _DESCRIPTIONS[int(code)]}
            for code, doc in problem_responses(403, 404, 409, 410, 503).items()
        },
    },
    summary="Download a delivered report through its signed link (no API key)",
)
async def download_by_link(
    request: Request,
    job_id: str,
    filename: str,
    exp: Annotated[str | None, Query(description="Expiry, unix seconds")] = None,
    sig: Annotated[str | None, Query(description="The link's signature")] = None,
) -> Response:
    """The links delivered reports carry (`DOWNLOAD_LINK_SECRET`, `DELIVERY_LINK_TTL_S`). A browser
    (`Accept: text/html`) is refused with a short page, other clients with problem+json."""
    try:
        verify_link(job_id, filename, exp, sig, link_secret(get_settings()), time.time())
    except LinkRefused as exc:
        return refusal(request, exc.status)
    try:
        job = await service.get_job(job_id, EVERY_TENANT)
        if job.status != JobStatus.DONE:
            return refusal(request, 409)
        if job.output_filename != filename:
            return refusal(request, 403)
        try:
            job, stored = await service.get_output(job_id, EVERY_TENANT)
        except NotFound:
            return refusal(request, 410)  # the job is there, its file is not (purged, or the store lost it)
    except OrchestratorError as exc:
        if status_of(exc) not in _TITLES:
            raise
        return refusal(request, status_of(exc))
    except Exception as exc:
        if not is_db_outage(exc):
            raise
        return refusal(request, 503)
    if job.output_filename != filename:  # replaced between the two reads
        return refusal(request, 403)
    answer = output_response(job, stored)
    answer.headers.update(LINK_HEADERS)
    return answer
