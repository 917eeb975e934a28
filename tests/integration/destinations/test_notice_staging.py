"""Staging an owners' notice: a subject a destination has had already is left out (each notice goes out
once), and any other error of the insert is raised, never swallowed as a warning.

Real MariaDB; the destination is a webhook receiver made over the API.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.core.db import session_scope
from app.destinations.delivery import Notice, stage_notice
from tests.utils.destinations import make_destination, webhook_body


def notice(subject: str, destination_id: str) -> Notice:
    return Notice(
        tenant="acme",
        event="missed",
        subject=subject,
        destination_ids=[destination_id],
        title="Schedule nightly did not run",
        lines=[("Why", "no scheduler was running at its time")],
    )


async def test_a_notice_staged_twice_is_stored_once(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    target = await make_destination(client, auth, webhook_body(receiver))
    async with session_scope() as session:
        first = await stage_notice(session, notice("missed:s1:2026-11-26T00:00:00", target["id"]))
    async with session_scope() as session:
        again = await stage_notice(session, notice("missed:s1:2026-11-26T00:00:00", target["id"]))
    assert len(first) == 1 and again == []


async def test_a_notice_the_table_cannot_hold_is_an_error_not_a_cut_row(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    """(Review) `INSERT IGNORE` turned a subject too long for its column into a warning and stored it cut."""
    target = await make_destination(client, auth, webhook_body(receiver))
    with pytest.raises(DBAPIError):
        async with session_scope() as session:
            await stage_notice(session, notice("missed:" + "x" * 200, target["id"]))
    async with session_scope() as session:
        stored = text("SELECT COUNT(*) FROM report_deliveries WHERE destination_id = :d")
        assert (await session.execute(stored, {"d": target["id"]})).scalar_one() == 0
