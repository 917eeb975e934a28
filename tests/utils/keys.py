"""API keys for tests: create one in the database and get its Authorization header."""

from __future__ import annotations


async def make_key(tenant: str = "acme", scopes: str = "jobs:read,jobs:write") -> dict[str, str]:
    from app.auth import service

    _, raw = await service.create_api_key(tenant, scopes.split(","))
    return bearer(raw)


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}
