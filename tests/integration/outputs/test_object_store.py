"""Report files in an S3-compatible bucket (moto's server on a free port): uploaded by the attempt, streamed
or linked (links stop working after OUTPUT_LINK_TTL_S), an outage a retry or a 503, deleted by retention."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.etree import ElementTree

import boto3
import httpx
import pytest
from botocore.config import Config

from app.core.config import get_settings
from app.maintenance import service as maintenance
from tests.utils.jobs import get_attempts, get_job, submit_id
from tests.utils.object_store import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, MotoS3, moto_serving
from tests.utils.presign_gate import PresignGate
from tests.utils.workers import drain


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    yield from moto_serving()


@pytest.fixture(scope="module")
def gate(moto: MotoS3) -> Iterator[PresignGate]:
    front = PresignGate(moto.endpoint)
    try:
        yield front.start()
    finally:
        front.stop()


@pytest.fixture
async def s3(env: Any, moto: MotoS3) -> MotoS3:
    moto.start()  # a test may have stopped it
    moto.reset()
    await env.set(**moto.settings(OUTPUT_LINK_TTL_S="0"))
    return moto


def spooled_files() -> list[Path]:
    return [p for p in Path(get_settings().output_dir).rglob("*") if p.is_file()]


def link_query(link: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}


def expires_at(query: dict[str, str]) -> float:
    """When a presigned link stops working: its X-Amz-Date (whole seconds) plus its X-Amz-Expires."""
    signed_at = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    return signed_at.timestamp() + int(query["X-Amz-Expires"])


async def at_the_start_of_a_second() -> None:
    """Links carry a whole-second X-Amz-Date: one asked for now has all of its first second ahead."""
    await asyncio.sleep(1.02 - time.time() % 1)


async def download_link(client: httpx.AsyncClient, auth: dict[str, str], job_id: str) -> str:
    await at_the_start_of_a_second()
    resp = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    assert resp.status_code == 307, resp.text
    return resp.headers["location"]


async def test_a_done_job_s_file_is_in_the_bucket_under_its_attempt_key_and_streamed_by_the_api(
    client: httpx.AsyncClient, auth: dict[str, str], s3: MotoS3
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=30_000)
    await drain()
    body = await get_job(client, auth, job_id)
    assert body["status"] == "done"
    assert s3.keys(job_id) == [f"{job_id}/r0-a1/demo-{job_id}.csv"]
    assert not any(job_id in str(p) for p in spooled_files())  # the worker's spool is cleaned up
    resp = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/csv")
    assert resp.headers["content-disposition"] == f'attachment; filename="demo-{job_id}.csv"'
    assert int(resp.headers["content-length"]) == body["output"]["size"] == len(resp.content)
    lines = resp.text.splitlines()
    assert lines[0] == "id,name,value" and len(lines) == 30_001


async def test_a_download_answers_307_to_a_presigned_link_that_serves_the_file_under_its_name(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, s3: MotoS3
) -> None:
    await env.set(OUTPUT_LINK_TTL_S="30")
    job_id = await submit_id(client, auth, "demo.csv", rows=10)
    await drain()
    resp = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
    assert resp.status_code == 307
    link = resp.headers["location"]
    assert link.startswith(f"{s3.endpoint}/{s3.bucket}/{s3.prefix}/{job_id}/r0-a1/")
    async with httpx.AsyncClient(trust_env=False) as store_client:
        fetched = await store_client.get(link)
    assert fetched.status_code == 200
    assert fetched.headers["content-disposition"] == f'attachment; filename="demo-{job_id}.csv"'
    assert fetched.headers["content-type"].startswith("text/csv")
    assert fetched.text.splitlines()[0] == "id,name,value"
    # Auth and tenant checks come before any link: another tenant's key sees a 404.
    from tests.utils.keys import make_key

    other = await make_key(tenant="other-tenant")
    assert (await client.get(f"/v1/jobs/{job_id}/output", headers=other)).status_code == 404
    assert (await client.get(f"/v1/jobs/{job_id}/output")).status_code == 401


async def test_a_download_link_stops_working_after_output_link_ttl_s(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, s3: MotoS3, gate: PresignGate
) -> None:
    # Through the gate, which refuses presigned links as S3 does (moto serves them forever).
    await env.set(**s3.settings(OUTPUT_S3_ENDPOINT_URL=gate.endpoint, OUTPUT_LINK_TTL_S="1"))
    job_id = await submit_id(client, auth, "demo.csv", rows=10)
    await drain()
    link = await download_link(client, auth, job_id)
    assert link.startswith(f"{gate.endpoint}/{s3.bucket}/{s3.prefix}/{job_id}/r0-a1/")
    signed = link_query(link)
    assert signed["X-Amz-Expires"] == "1"
    assert signed["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" and len(signed["X-Amz-Signature"]) == 64
    async with httpx.AsyncClient(trust_env=False) as browser:
        at_once = await browser.get(link)
        assert at_once.status_code == 200, at_once.text
        assert at_once.headers["content-disposition"] == f'attachment; filename="demo-{job_id}.csv"'
        assert at_once.text.splitlines()[0] == "id,name,value"

        await asyncio.sleep(max(0.0, expires_at(signed) + 0.3 - time.time()))
        expired = await browser.get(link)
        assert expired.status_code == 403, expired.text
        assert expired.headers["content-type"] == "application/xml"
        error = ElementTree.fromstring(expired.content)
        assert error.findtext("Code") == "AccessDenied"
        assert error.findtext("Message") == "Request has expired"
        assert error.findtext("X-Amz-Expires") == "1"
        # Lengthening the link by hand breaks its signature: only the API can hand out a longer one.
        edited = await browser.get(link.replace("X-Amz-Expires=1&", "X-Amz-Expires=3600&"))
        assert edited.status_code == 403
        assert ElementTree.fromstring(edited.content).findtext("Code") == "SignatureDoesNotMatch"

        # The API is where a user comes back for a link: a fresh one, which works again.
        fresh = await download_link(client, auth, job_id)
        assert link_query(fresh)["X-Amz-Date"] > signed["X-Amz-Date"]
        again = await browser.get(fresh)
        assert again.status_code == 200, again.text
        assert again.text.splitlines()[0] == "id,name,value"
    assert [r.code for r in gate.refusals] == ["AccessDenied", "SignatureDoesNotMatch"]


async def test_the_presign_gate_checks_links_signed_by_botocore_too(s3: MotoS3, gate: PresignGate) -> None:
    """The gate's SigV4 check is not obstore's own code read back: a link botocore signs (another signer,
    other query parameters) passes it, and fails it once expired or edited."""
    s3.client().put_object(Bucket=s3.bucket, Key=f"{s3.prefix}/a b/ü+(1).csv", Body=b"x,y\n")
    signer = boto3.client(
        "s3",
        endpoint_url=gate.endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
    await at_the_start_of_a_second()
    link = signer.generate_presigned_url(
        "get_object",
        Params={
            "Bucket": s3.bucket,
            "Key": f"{s3.prefix}/a b/ü+(1).csv",
            "ResponseContentDisposition": 'attachment; filename="a b.csv"',
        },
        ExpiresIn=1,
    )
    async with httpx.AsyncClient(trust_env=False) as browser:
        ok = await browser.get(link)
        assert ok.status_code == 200 and ok.content == b"x,y\n", ok.text
        assert ok.headers["content-disposition"] == 'attachment; filename="a b.csv"'
        edited = await browser.get(link.replace("filename%3D%22a", "filename%3D%22z"))
        assert edited.status_code == 403
        await asyncio.sleep(max(0.0, expires_at(link_query(link)) + 0.3 - time.time()))
        assert (await browser.get(link)).status_code == 403
    assert [r.code for r in gate.refusals[-2:]] == ["SignatureDoesNotMatch", "AccessDenied"]


async def test_the_store_down_during_a_download_is_a_503_problem(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, s3: MotoS3
) -> None:
    job_id = await submit_id(client, auth, "demo.csv", rows=10)
    await drain()
    s3.stop()
    for ttl_s in ("0", "30"):  # streamed, or checked before a link is signed
        await env.set(OUTPUT_LINK_TTL_S=ttl_s)
        resp = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
        assert resp.status_code == 503, resp.text
        assert resp.headers["content-type"].startswith("application/problem+json")
        assert resp.json()["status"] == 503


async def test_the_store_down_during_an_upload_fails_the_attempt_which_retries_until_the_job_is_done(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, s3: MotoS3
) -> None:
    await env.set(RETRY_DELAYS_S="[0.5, 1, 1, 1, 1, 1, 1]")
    job_id = await submit_id(client, auth, "demo.csv", rows=1000)
    s3.stop()
    restart = threading.Timer(2.0, s3.start)
    restart.start()
    try:
        await drain(timeout_s=90)
    finally:
        restart.join()
    body = await get_job(client, auth, job_id)
    assert body["status"] == "done", body
    attempts = await get_attempts(client, auth, job_id)
    assert attempts[0]["outcome"] == "failed"
    assert attempts[0]["error"]["type"] == "OutputStoreUnavailable" and attempts[0]["error"]["retryable"]
    assert attempts[-1]["outcome"] == "succeeded"
    assert s3.keys(job_id) == [f"{job_id}/r0-a{body['attempt']}/demo-{job_id}.csv"]
    assert (await client.get(f"/v1/jobs/{job_id}/output", headers=auth)).status_code == 200
    assert not any(job_id in str(p) for p in spooled_files())  # failed attempts leave no spool behind


async def test_retention_deletes_a_job_s_objects_and_keeps_the_job_while_the_store_is_down(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any, s3: MotoS3
) -> None:
    await env.set(JOB_RETENTION_S="0.3")
    first = await submit_id(client, auth, "demo.csv", rows=5)
    await drain()
    assert s3.keys(first)
    s3.stop()
    await asyncio.sleep(0.4)
    assert (await maintenance.run_tick(use_lease=False))["jobs_purged"] == 0
    assert (await client.get(f"/v1/jobs/{first}", headers=auth)).status_code == 200
    s3.start()  # an empty store again (moto keeps objects in memory): upload one more to see it deleted
    second = await submit_id(client, auth, "demo.csv", rows=5)
    await drain()
    assert s3.keys(second)
    await asyncio.sleep(0.4)
    assert (await maintenance.run_tick(use_lease=False))["jobs_purged"] == 2
    assert s3.keys() == []
    for job_id in (first, second):
        assert (await client.get(f"/v1/jobs/{job_id}", headers=auth)).status_code == 404
