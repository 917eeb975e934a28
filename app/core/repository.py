"""The base of every domain repository: one session, typed read helpers and the guarded UPDATE.

A guarded UPDATE is a compare-and-set: it names the statuses it moves from, is checked against the state
table (`app.core.states.TRANSITIONS`) before it runs, and reports the rows it changed (0: the CAS lost).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from sqlalchemy import Table, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import ColumnElement, Executable

from app.core.states import JobStatus, check_transition

T = TypeVar("T")


def table_of(model: Any) -> Table:
    """A SQLModel class's Core table, for statements that need no ORM unit of work."""
    table: Table = model.__table__
    return table


def insert_values(table: Table, obj: Any) -> dict[str, Any]:
    """Column values of a model instance for a Core INSERT (an unset autoincrement key and the columns the
    database computes are left out)."""
    values = {column.name: getattr(obj, column.name) for column in table.columns if column.computed is None}
    return {k: v for k, v in values.items() if v is not None or not table.c[k].primary_key}


class Repository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def all(self, stmt: Executable, _type: type[T] | None = None) -> list[T]:
        """Every first-column value (or ORM entity) of `stmt`."""
        return list((await self.session.execute(stmt)).scalars().all())

    async def first(self, stmt: Executable, _type: type[T] | None = None) -> T | None:
        first: T | None = (await self.session.execute(stmt)).scalars().first()
        return first

    async def rowcount(self, stmt: Executable) -> int:
        """Rows an UPDATE/DELETE touched."""
        return int((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def guarded_update(
        self,
        table: Table,
        where: Iterable[ColumnElement[bool]],
        values: dict[str, Any],
        from_statuses: Iterable[JobStatus],
    ) -> int:
        """UPDATE … WHERE `where` (the compare-and-set); a status change must be allowed from every one of
        `from_statuses` by the state table, or `IllegalTransition` is raised before any SQL runs."""
        target = values.get("status")
        if target is not None:
            check_transition(from_statuses, JobStatus(target))
        return await self.rowcount(update(table).where(*where).values(**values))
