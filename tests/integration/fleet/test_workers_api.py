"""GET /v1/workers: admin only, lists what processes announced, hides gone ones unless `state=all`."""

from __future__ import annotations

import os
import socket
from importlib import metadata
from typing import Any

import httpx

from app.fleet import service
from tests.utils.fleet import list_workers, silence
from tests.utils.keys import make_key
from tests.utils.problems import assert_problem


async def test_listing_workers_without_a_key_is_401(client: httpx.AsyncClient, env: Any) -> None:
    assert_problem(await client.get("/v1/workers"), 401)


async def test_listing_workers_with_a_jobs_read_key_is_403(client: httpx.AsyncClient, env: Any) -> None:
    reader = await make_key(scopes="jobs:read,jobs:write")
    body = assert_problem(await client.get("/v1/workers", headers=reader), 403)
    assert "admin" in body["detail"]


async def test_announced_processes_are_listed_live_with_what_they_announced(
    client: httpx.AsyncClient, env: Any
) -> None:
    admin = await make_key(scopes="admin")
    worker_id = await service.announce("worker", concurrency=4, metrics_port=9187)
    scheduler_id = await service.announce("scheduler", concurrency=0, metrics_port=0)

    items = {item["id"]: item for item in await list_workers(client, admin)}

    assert set(items) == {worker_id, scheduler_id}
    worker = items[worker_id]
    host, pid = socket.gethostname(), os.getpid()
    assert worker["name"] == f"{host}:{pid}" and worker["host"] == host and worker["pid"] == pid
    assert worker["kind"] == "worker" and worker["concurrency"] == 4 and worker["jobs_running"] == 0
    assert worker["version"] == metadata.version("report-orchestrator")
    assert worker["metrics_port"] == 9187 and worker["last_tick_at"] is None
    assert worker["state"] == "live"
    assert worker["started_at"].endswith("Z") and worker["last_heartbeat_at"].endswith("Z")
    assert items[scheduler_id]["kind"] == "scheduler" and items[scheduler_id]["metrics_port"] is None


async def test_gone_processes_are_hidden_unless_state_is_all(client: httpx.AsyncClient, env: Any) -> None:
    admin = await make_key(scopes="admin")
    live_id = await service.announce("worker", concurrency=2, metrics_port=None)
    gone_id = await service.announce("dead_letter", concurrency=20, metrics_port=None)
    await silence(gone_id, 60)

    assert [item["id"] for item in await list_workers(client, admin)] == [live_id]
    everything = {item["id"]: item["state"] for item in await list_workers(client, admin, state="all")}
    assert everything == {live_id: "live", gone_id: "gone"}


async def test_a_process_is_gone_once_silent_for_one_and_a_half_heartbeats(
    client: httpx.AsyncClient, env: Any
) -> None:
    await env.set(WORKER_HEARTBEAT_S="10")
    admin = await make_key(scopes="admin")
    process_id = await service.announce("worker", concurrency=1, metrics_port=None)
    await silence(process_id, 14)
    assert [item["state"] for item in await list_workers(client, admin, state="all")] == ["live"]
    await silence(process_id, 2)  # 16 s > 1.5 × 10 s
    assert [item["state"] for item in await list_workers(client, admin, state="all")] == ["gone"]


async def test_an_unknown_state_is_422_naming_the_parameter(client: httpx.AsyncClient, env: Any) -> None:
    admin = await make_key(scopes="admin")
    body = assert_problem(await client.get("/v1/workers", params={"state": "dead"}, headers=admin), 422)
    assert body["errors"] and body["errors"][0]["loc"] == ["query", "state"], body


async def test_the_openapi_document_names_the_operation_and_its_problem_answers(
    client: httpx.AsyncClient, env: Any
) -> None:
    operation = (await client.get("/openapi.json")).json()["paths"]["/v1/workers"]["get"]
    assert operation["operationId"] == "list_workers"
    assert {"401", "403", "422"} <= set(operation["responses"])
    [state] = [p for p in operation["parameters"] if p["name"] == "state"]
    assert state["in"] == "query"
