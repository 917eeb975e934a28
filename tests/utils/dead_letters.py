"""Jobs that die on their first attempt, and the dead-letter list as the API shows it."""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.jobs import submit_id
from tests.utils.workers import drain


async def kill_permanently(client: httpx.AsyncClient, auth: dict[str, str], n: int = 1) -> list[str]:
    """Submit `n` jobs that fail permanently and run each to dead before the next is submitted; returns their
    ids in the order they died (jobs drained together may die in any order, and their letters with them)."""
    ids = []
    for _ in range(n):
        ids.append(await submit_id(client, auth, "demo.flaky", fail_times=1, permanent=True))
        await drain()
    return ids


async def letters(client: httpx.AsyncClient, headers: dict[str, str], **query: Any) -> list[dict[str, Any]]:
    resp = await client.get("/v1/dead-letters", params=query, headers=headers)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def resolve(
    client: httpx.AsyncClient, headers: dict[str, str], letter_id: str, reason: str = "fixed by hand"
) -> httpx.Response:
    """POST the letter's resolve with `reason`; the answer is the caller's to check."""
    path = f"/v1/dead-letters/{letter_id}/resolve"
    return await client.post(path, json={"reason": reason}, headers=headers)
