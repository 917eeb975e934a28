"""The worker registry for tests: list it through the API, read or age a row in the database directly."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text

from tests.utils.jobs import Headers


async def list_workers(
    client: httpx.AsyncClient, headers: Headers, state: str = "live"
) -> list[dict[str, Any]]:
    """GET /v1/workers?state=…; asserts 200; returns the items."""
    resp = await client.get("/v1/workers", params={"state": state}, headers=headers)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def registry_row(process_id: str) -> dict[str, Any] | None:
    """The row as stored, or None once it is deleted."""
    from app.core.db import session_scope

    async with session_scope() as session:
        row = (
            await session.execute(text("SELECT * FROM worker_processes WHERE id = :id"), {"id": process_id})
        ).first()
    return None if row is None else dict(row._mapping)


async def silence(process_id: str, for_s: float) -> None:
    """Move the row's last heartbeat `for_s` seconds into the past, as if the process had gone quiet."""
    from app.core.db import session_scope

    async with session_scope() as session:
        await session.execute(
            text(
                "UPDATE worker_processes "
                "SET last_heartbeat_at = last_heartbeat_at - INTERVAL :s SECOND WHERE id = :id"
            ),
            {"s": int(for_s), "id": process_id},
        )
