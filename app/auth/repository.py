"""SQL of API keys: add, look up by hash, list, revoke.

Only the SHA-256 of a key is stored; the raw key is shown once, at creation.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select

from app.core.repository import Repository, table_of
from app.core.tenancy import TenantScope
from app.models import ApiKey

KEYS = table_of(ApiKey)
key = KEYS.c


class ApiKeyRepository(Repository):
    async def add_key(self, row: ApiKey) -> None:
        self.session.add(row)
        await self.session.flush()

    async def get_by_hash(self, key_hash: str) -> ApiKey | None:
        return await self.first(select(ApiKey).where(key.key_hash == key_hash), ApiKey)

    async def get_by_id(self, key_id: str) -> ApiKey | None:
        return await self.first(select(ApiKey).where(key.id == key_id), ApiKey)

    async def list_keys(self, scope: TenantScope) -> list[ApiKey]:
        stmt = select(ApiKey).order_by(key.created_at)
        if scope.tenant is not None:
            stmt = stmt.where(key.tenant == scope.tenant)
        return await self.all(stmt, ApiKey)

    async def revoke(self, key_id_or_prefix: str, now: datetime) -> int:
        stmt = (
            KEYS.update()
            .where(or_(key.id == key_id_or_prefix, key.prefix == key_id_or_prefix), key.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        return await self.rowcount(stmt)
