"""Destinations as tests make them (one body per kind, pointed at the suite's fake servers) and the reads the
delivery tests need (a job's deliveries, run to the end by the notifications worker)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.workers import drain, drain_alerts

WEBHOOK_SECRET = "dest-webhook-secret-0123456789"


def dingtalk_body(fake: Any, name: str = "ops-dingtalk") -> dict[str, Any]:
    return {
        "kind": "dingtalk",
        "name": name,
        "url": fake.url,
        "secret": fake.secret,
        "at_mobiles": ["13800000000"],
    }


def feishu_body(fake: Any, name: str = "ops-feishu") -> dict[str, Any]:
    return {"kind": "feishu", "name": name, "url": fake.url, "secret": fake.secret}


def webhook_body(receiver: Any, name: str = "warehouse-hook") -> dict[str, Any]:
    return {"kind": "webhook", "name": name, "url": receiver.url, "secret": receiver.secret}


async def make_destination(
    client: httpx.AsyncClient, auth: dict[str, str], body: dict[str, Any]
) -> dict[str, Any]:
    resp = await client.post("/v1/destinations", json=body, headers=auth)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def deliveries(client: httpx.AsyncClient, auth: dict[str, str], job_id: str) -> list[dict[str, Any]]:
    resp = await client.get(f"/v1/jobs/{job_id}/deliveries", headers=auth)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


def told(receiver: Any) -> list[dict[str, Any]]:
    """Every owners' notice a webhook receiver accepted, in order: a message of one notice, or each notice
    of a digest (`notices`, each with its title and facts)."""
    out: list[dict[str, Any]] = []
    for accepted in receiver.accepted:
        body = accepted.body
        out += body["notices"] if body.get("notice") == "digest" else [body]
    return out


async def run_and_deliver() -> None:
    """Run every queued job, then every delivery (and retry) on the notifications channel."""
    await drain()
    await drain_alerts()
