"""API keys: create (shown once, stored hashed), authenticate, list, revoke; and the Principal a key gives.

A tenant is a lowercase ASCII slug: MySQL compares case-, accent- and trailing-space-insensitively.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from app.auth.repository import ApiKeyRepository
from app.core.db import session_scope
from app.core.errors import ValidationFailed
from app.core.ids import new_id
from app.core.tenancy import EVERY_TENANT, TENANT_RE, TenantScope
from app.core.times import utcnow
from app.models import ApiKey

KEY_PREFIX = "ro_"
VALID_SCOPES = frozenset({"jobs:read", "jobs:write", "admin"})


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    key_id: str
    tenant: str
    scopes: frozenset[str]
    name: str | None = None

    @property
    def label(self) -> str:
        """Who did it, as recorded on what a caller changes by hand: `key 01J… "ops" (acme)`."""
        named = f' "{self.name}"' if self.name else ""
        return f"key {self.key_id}{named} ({self.tenant})"

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes

    def has(self, scope: str) -> bool:
        return self.is_admin or scope in self.scopes

    @property
    def tenant_scope(self) -> TenantScope:
        """The tenants this key may see: its own, or every tenant for admin keys."""
        return EVERY_TENANT if self.is_admin else TenantScope.only(self.tenant)


async def create_api_key(tenant: str, scopes: Sequence[str], name: str | None = None) -> tuple[ApiKey, str]:
    """Create a key and return it with the raw secret, which is shown once and stored only hashed."""
    bad = sorted(set(scopes) - VALID_SCOPES)
    if bad or not scopes:
        raise ValidationFailed(
            "Unknown scopes.", [{"loc": ["scopes"], "msg": f"unknown or empty: {bad}", "type": "scope"}]
        )
    if not TENANT_RE.fullmatch(tenant):
        raise ValidationFailed(
            "Bad tenant.",
            [{"loc": ["tenant"], "type": "tenant", "msg": "1-64 of a-z 0-9 . _ : - (lowercase ASCII slug)"}],
        )
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(
        id=new_id(),
        prefix=raw[:12],
        key_hash=hash_key(raw),
        tenant=tenant,
        scopes=",".join(sorted(set(scopes))),
        name=name,
    )
    async with session_scope() as session:
        await ApiKeyRepository(session).add_key(key)
    return key, raw


async def authenticate(raw_key: str) -> Principal | None:
    digest = hash_key(raw_key)
    async with session_scope() as session:
        key = await ApiKeyRepository(session).get_by_hash(digest)
    if key is None or key.revoked_at is not None or not secrets.compare_digest(key.key_hash, digest):
        return None
    return _principal(key)


async def principal_by_id(key_id: str) -> Principal | None:
    """The key a console session was opened with, as long as it is not revoked."""
    async with session_scope() as session:
        key = await ApiKeyRepository(session).get_by_id(key_id)
    if key is None or key.revoked_at is not None:
        return None
    return _principal(key)


def _principal(key: ApiKey) -> Principal:
    return Principal(key.id, key.tenant, frozenset(s for s in key.scopes.split(",") if s), key.name)


async def list_api_keys(scope: TenantScope) -> list[ApiKey]:
    async with session_scope() as session:
        return await ApiKeyRepository(session).list_keys(scope)


async def revoke_api_key(key_id_or_prefix: str) -> bool:
    async with session_scope() as session:
        return await ApiKeyRepository(session).revoke(key_id_or_prefix, utcnow()) > 0
