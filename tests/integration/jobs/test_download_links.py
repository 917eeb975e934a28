"""Delivered reports' download links (GET /d/{job_id}/{filename}): no API key, the file while the link is
genuine and unexpired; 403 when tampered, 410 when expired, 404/409/410 for the job and its file; a page for
a browser; a fresh presigned link when the file is in an object store; the signature never logged."""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from app.core.config import get_settings
from devtools.servers import free_port
from tests.utils.download_links import (
    BROWSER_ACCEPT,
    changed,
    done_job,
    expired_link_for,
    link_for,
    tampered,
)
from tests.utils.jobs import submit_id
from tests.utils.object_store import MotoS3, moto_serving
from tests.utils.problems import BOGUS_ID, assert_problem

BASE_URL = "http://test"  # the suite's ASGI client: links are absolute under PUBLIC_BASE_URL


@pytest.fixture
async def links(env: Any) -> Any:
    await env.set(PUBLIC_BASE_URL=BASE_URL, DOWNLOAD_LINK_SECRET="integration-link-secret")
    return env


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    yield from moto_serving()


def assert_private(resp: httpx.Response) -> None:
    assert resp.headers["cache-control"] == "no-store"
    assert resp.headers["referrer-policy"] == "no-referrer"


async def test_a_link_downloads_the_file_without_any_api_key(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any
) -> None:
    job_id, filename = await done_job(client, auth, rows=25)
    link = link_for(job_id, filename)
    assert link.startswith(f"{BASE_URL}/d/{job_id}/{filename}?exp=")
    resp = await client.get(link)
    assert resp.status_code == 200, resp.text
    assert_private(resp)
    assert resp.headers["content-type"].startswith("text/csv")
    assert resp.headers["content-disposition"] == f'attachment; filename="{filename}"'
    with_key = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    assert resp.content == with_key.content and resp.text.splitlines()[0] == "id,name,value"


@pytest.mark.parametrize("part", ["job_id", "filename", "exp", "sig"])
async def test_a_link_with_any_part_changed_is_refused_403(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any, part: str
) -> None:
    job_id, filename = await done_job(client, auth)
    other_id, other_filename = await done_job(client, auth)  # a real job and file: only the signature says no
    link = link_for(job_id, filename)
    query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    value = {
        "job_id": other_id,
        "filename": other_filename,
        "exp": str(int(query["exp"]) + 86400),
        "sig": changed(query["sig"]),
    }[part]
    resp = await client.get(tampered(link, part, value))
    assert_problem(resp, 403)
    assert_private(resp)
    assert query["sig"] not in resp.text


async def test_the_signature_is_checked_before_the_job_is_looked_up(
    client: httpx.AsyncClient, links: Any
) -> None:
    """An unknown job behind a forged link is 403, not 404: a forger learns nothing of which jobs exist."""
    forged = tampered(link_for(BOGUS_ID, "demo.csv"), "sig", "A" * 43)
    assert_problem(await client.get(forged), 403)
    unsigned = f"/d/{BOGUS_ID}/demo.csv"
    assert_problem(await client.get(unsigned), 403)


async def test_with_mysql_down_a_forged_or_expired_link_is_still_refused_and_a_genuine_one_is_503(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any
) -> None:
    """Signature and expiry are checked without the database: only a genuine link reaches it."""
    job_id, filename = await done_job(client, auth)
    genuine, expired = link_for(job_id, filename), expired_link_for(job_id, filename)
    db_url = get_settings().database_url.get_secret_value()
    await links.set(DATABASE_URL=re.sub(r"@127\.0\.0\.1:\d+/", f"@127.0.0.1:{free_port()}/", db_url))
    assert_problem(await client.get(tampered(genuine, "sig", changed(genuine[-43:]))), 403)
    assert_problem(await client.get(expired), 410)
    resp = await client.get(genuine)
    assert_problem(resp, 503)
    assert resp.headers["retry-after"] == "2"
    assert_private(resp)
    page = await client.get(genuine, headers={"Accept": BROWSER_ACCEPT})
    assert page.status_code == 503 and "unavailable" in page.text


async def test_an_expired_link_is_refused_410(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any
) -> None:
    job_id, filename = await done_job(client, auth)
    resp = await client.get(expired_link_for(job_id, filename))
    body = assert_problem(resp, 410)
    assert "expired" in body["title"]
    assert_private(resp)


async def test_a_link_lives_delivery_link_ttl_s(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any
) -> None:
    await links.set(DELIVERY_LINK_TTL_S="120")
    job_id, filename = await done_job(client, auth)
    exp = int(parse_qs(urlsplit(link_for(job_id, filename)).query)["exp"][0])
    assert 119 <= exp - time.time() <= 120


async def test_a_browser_gets_a_readable_page_for_a_refused_link(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any
) -> None:
    job_id, filename = await done_job(client, auth)
    headers = {"Accept": BROWSER_ACCEPT}
    for link, status, words in (
        (tampered(link_for(job_id, filename), "sig", "A" * 43), 403, "not valid"),
        (expired_link_for(job_id, filename), 410, "expired"),
    ):
        resp = await client.get(link, headers=headers)
        assert resp.status_code == status
        assert resp.headers["content-type"].startswith("text/html")
        assert_private(resp)
        assert "default-src 'none'" in resp.headers["content-security-policy"]
        assert f"<h1>This download link {'is ' if status == 403 else 'has '}{words}</h1>" in resp.text
        assert f"HTTP {status}" in resp.text


async def test_a_genuine_link_to_an_unknown_job_is_404(client: httpx.AsyncClient, links: Any) -> None:
    assert_problem(await client.get(link_for(BOGUS_ID, "demo.csv")), 404)


async def test_a_genuine_link_to_another_file_name_of_the_job_is_403(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any
) -> None:
    job_id, _ = await done_job(client, auth)
    assert_problem(await client.get(link_for(job_id, "other.csv")), 403)


async def test_a_link_to_a_job_that_is_not_done_is_409(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=5)  # no worker ran: still pending
    assert_problem(await client.get(link_for(job_id, f"demo-{job_id}.csv")), 409)


async def test_a_link_to_a_job_whose_file_is_gone_is_410(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any
) -> None:
    job_id, filename = await done_job(client, auth)
    shutil.rmtree(Path(get_settings().output_dir) / job_id)
    resp = await client.get(link_for(job_id, filename))
    assert_problem(resp, 410)
    assert_private(resp)


async def test_the_access_log_never_shows_a_link_s_signature(
    client: httpx.AsyncClient, links: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """uvicorn's access line carries the path and query; the app's filter replaces the signature."""
    link = link_for(BOGUS_ID, "demo.csv")
    path = link.removeprefix(BASE_URL)
    sig = parse_qs(urlsplit(link).query)["sig"][0]
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        logging.getLogger("uvicorn.access").info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", path, "1.1", 404
        )
    assert caplog.records and sig not in caplog.text
    assert "sig=***" in caplog.text


async def test_a_link_to_a_file_in_an_object_store_answers_307_to_a_fresh_presigned_link(
    client: httpx.AsyncClient, auth: dict[str, str], links: Any, moto: MotoS3
) -> None:
    moto.start()
    moto.reset()
    await links.set(**moto.settings(OUTPUT_LINK_TTL_S="30"))
    job_id, filename = await done_job(client, auth, rows=10)
    resp = await client.get(link_for(job_id, filename))
    assert resp.status_code == 307, resp.text
    assert_private(resp)
    presigned = resp.headers["location"]
    assert presigned.startswith(f"{moto.endpoint}/{moto.bucket}/{moto.prefix}/{job_id}/r0-a1/{filename}?")
    assert "X-Amz-Signature=" in presigned
    async with httpx.AsyncClient(trust_env=False) as browser:
        fetched = await browser.get(presigned)
    assert fetched.status_code == 200
    assert fetched.text.splitlines()[0] == "id,name,value"
    # OUTPUT_LINK_TTL_S=0 (clients cannot reach the store): the link streams the object through the API.
    await links.set(OUTPUT_LINK_TTL_S="0")
    streamed = await client.get(link_for(job_id, filename))
    assert streamed.status_code == 200 and streamed.content == fetched.content
    assert_private(streamed)
