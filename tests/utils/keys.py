"""API keys for tests: create one in the database and get its Authorization header."""

from __future__ import annotations


async def make_key(tenant: str = "acme", scopes: str = "jobs:read,jobs:write") -> dict[str, str]:
    from app.auth import service

    _, raw = await service.create_api_key(tenant, scopes.split(","))
    return bearer(raw)


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


async def make_named_key(
    name: str, tenant: str = "acme", scopes: str = "jobs:read,jobs:write"
) -> tuple[str, dict[str, str]]:
    """A key with a name (what a resolve records as its author); returns its id and Authorization header."""
    from app.auth import service

    key, raw = await service.create_api_key(tenant, scopes.split(","), name)
    return key.id, bearer(raw)
