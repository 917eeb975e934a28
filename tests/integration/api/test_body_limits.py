"""The HTTP contract (CONTRACT.md) for big bodies: over MAX_BODY_BYTES is 413, counted or chunked, and
creates nothing; without a key it is 401 and with a read-only key 403 first; under the limit, accepted."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.utils.api_contract import CSV, assert_no_job_created
from tests.utils.keys import make_key
from tests.utils.problems import assert_problem


def big_body(size: int) -> bytes:
    body = json.dumps({"report_type": "demo.csv", "params": {"rows": 5, "pad": "x" * size}}).encode()
    assert len(body) > size
    return body


async def test_body_over_max_body_bytes_with_content_length_is_413(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    resp = await client.post(
        "/v1/jobs", content=big_body(2048), headers={**auth, "Content-Type": "application/json"}
    )
    assert "content-length" in {k.lower() for k in resp.request.headers}
    assert_problem(resp, 413)
    await assert_no_job_created(client, auth)


async def test_chunked_body_over_max_body_bytes_is_413(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    payload = big_body(4096)

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(payload), 256):
            yield payload[i : i + 256]

    resp = await client.post(
        "/v1/jobs", content=chunks(), headers={**auth, "Content-Type": "application/json"}
    )
    assert "content-length" not in {k.lower() for k in resp.request.headers}
    assert_problem(resp, 413)
    await assert_no_job_created(client, auth)


async def test_oversized_body_without_a_key_is_401_not_413(client: httpx.AsyncClient, env: Any) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    resp = await client.post("/v1/jobs", content=big_body(2048), headers={"Content-Type": "application/json"})
    assert_problem(resp, 401)


async def test_oversized_body_with_a_read_only_key_is_403_not_413(
    client: httpx.AsyncClient, env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    reader = await make_key("acme", "jobs:read")
    resp = await client.post(
        "/v1/jobs", content=big_body(2048), headers={**reader, "Content-Type": "application/json"}
    )
    assert_problem(resp, 403)


async def test_body_under_max_body_bytes_is_accepted(
    client: httpx.AsyncClient, auth: dict[str, str], env: Any
) -> None:
    await env.set(MAX_BODY_BYTES=1024)
    payload = json.dumps(CSV).encode()

    async def chunks() -> AsyncIterator[bytes]:
        yield payload

    resp = await client.post(
        "/v1/jobs", content=chunks(), headers={**auth, "Content-Type": "application/json"}
    )
    assert resp.status_code == 202, resp.text
