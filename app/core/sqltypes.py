"""Column types every table shares: timestamps stored as naive UTC with microseconds (DATETIME(6) on
MySQL) that always come back timezone-aware, and enums stored as their values in a VARCHAR.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """DATETIME(6) holding naive UTC; accepts aware datetimes and returns aware UTC ones."""

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to UTCDateTime; pass an aware one")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)


def str_enum(enum_cls: type[Any], length: int = 16) -> sa.Enum:
    """An enum column holding the members' values in a VARCHAR (no native ENUM, no CHECK)."""
    return sa.Enum(
        enum_cls,
        native_enum=False,
        length=length,
        create_constraint=False,
        values_callable=lambda members: [m.value for m in members],
    )
