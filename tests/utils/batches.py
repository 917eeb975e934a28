"""Bulk submit through the API: post a batch, assert the 207 envelope, read the per-item answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from tests.utils.jobs import Headers


def item(report_type: str = "demo.csv", key: str | None = None, **params: Any) -> dict[str, Any]:
    """One batch item; `key` becomes its idempotency_key."""
    body: dict[str, Any] = {"report_type": report_type, "params": params or {"rows": 1}}
    if key is not None:
        body["idempotency_key"] = key
    return body


async def post_batch(
    client: httpx.AsyncClient, headers: Headers, items: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """POST /v1/jobs/batch; asserts 207, one result per item in order and consistent counts."""
    resp = await client.post("/v1/jobs/batch", json={"jobs": list(items)}, headers=headers)
    assert resp.status_code == 207, resp.text
    answer = dict(resp.json())
    results = answer["results"]
    assert [r["index"] for r in results] == list(range(len(items)))
    statuses = [r["status"] for r in results]
    assert answer["created"] == statuses.count(202)
    assert answer["existing"] == statuses.count(200)
    assert answer["rejected"] == len(items) - answer["created"] - answer["existing"]
    for result in results:
        assert (result["job"] is None) == (result["status"] not in (200, 202)), result
        assert (result["problem"] is None) == (result["status"] in (200, 202)), result
    return answer


def statuses(answer: Mapping[str, Any]) -> list[int]:
    return [r["status"] for r in answer["results"]]


def job_ids(answer: Mapping[str, Any]) -> list[str | None]:
    return [r["job"]["id"] if r["job"] else None for r in answer["results"]]
