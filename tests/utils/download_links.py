"""Delivered reports' download links in tests: a done job's link as a message would carry it, and the same
link with one of its parts changed (job id, file name, expiry or signature)."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, quote, urlsplit

import httpx

from app.core.config import get_settings
from app.outputs.links import link_secret, public_link, sign_link
from tests.utils.jobs import get_job, submit_id
from tests.utils.workers import drain

#: What a browser sends when a person clicks a link in a chat or a mail.
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


async def done_job(client: httpx.AsyncClient, auth: dict[str, str], rows: int = 5) -> tuple[str, str]:
    """A finished `demo.csv` job of `rows` rows: its id and its output's file name."""
    job_id = await submit_id(client, auth, "demo.csv", rows=rows)
    await drain()
    body = await get_job(client, auth, job_id)
    assert body["status"] == "done", body
    return job_id, str(body["output"]["filename"])


def link_for(job_id: str, filename: str, ttl_s: int | None = None) -> str:
    """The absolute link a delivery would send now (PUBLIC_BASE_URL + the signed path)."""
    return public_link(job_id, filename, get_settings(), time.time(), ttl_s)


def expired_link_for(job_id: str, filename: str, ago_s: int = 60) -> str:
    """A genuine link whose expiry passed `ago_s` seconds ago."""
    secret = link_secret(get_settings())
    assert secret is not None
    return sign_link(job_id, filename, int(time.time()) - ago_s, secret)


def tampered(link: str, part: str, value: str) -> str:
    """`link` with one part (`job_id`, `filename`, `exp`, `sig`) replaced by `value`, signature kept."""
    url = urlsplit(link)
    _, prefix, job_id, filename = url.path.split("/")
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    fields = {"job_id": job_id, "filename": filename, **query}
    fields[part] = quote(value, safe="") if part in ("job_id", "filename") else value
    return f"/{prefix}/{fields['job_id']}/{fields['filename']}?exp={fields['exp']}&sig={fields['sig']}"


def changed(value: str) -> str:
    """`value` with its last character changed (a one-character edit)."""
    return value[:-1] + ("A" if value[-1] != "A" else "B")
