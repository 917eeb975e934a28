"""`reportctl keys …`: create, list and revoke API keys, straight in the database of DATABASE_URL (the only
way to mint a key: the API never does)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

keys = typer.Typer(help="API keys (talks to the database in DATABASE_URL)", no_args_is_help=True)


# The database commands import the app's database layer when they run: an API command starts without it
# (SQLAlchemy and the models are most of reportctl's start-up time).


def _run_db(coro: Any) -> Any:
    from app.core.db import dispose_engine

    async def wrapped() -> Any:
        try:
            return await coro
        finally:
            await dispose_engine()

    return asyncio.run(wrapped())


@keys.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant the key belongs to")],
    scopes: Annotated[
        str, typer.Option(help="Comma-separated: jobs:read,jobs:write,admin")
    ] = "jobs:read,jobs:write",
    name: Annotated[str | None, typer.Option(help="A label for the key")] = None,
) -> None:
    """Create a key and print it once (only its hash is stored)."""
    from app.auth.service import create_api_key
    from app.core.errors import ValidationFailed

    try:
        key, raw = _run_db(create_api_key(tenant, [s.strip() for s in scopes.split(",") if s.strip()], name))
    except ValidationFailed as exc:
        typer.echo(f"error: {exc.detail} {exc.errors}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"created key {key.id} for tenant {key.tenant} with scopes {key.scopes}", err=True)
    typer.echo(raw)


@keys.command("list")
def keys_list(tenant: Annotated[str | None, typer.Option(help="Only this tenant")] = None) -> None:
    """List keys (never their secrets)."""
    from app.auth.service import list_api_keys
    from app.core.tenancy import EVERY_TENANT, TenantScope

    for key in _run_db(list_api_keys(TenantScope.only(tenant) if tenant else EVERY_TENANT)):
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        typer.echo(
            f"{key.id}  {key.prefix}…  tenant={key.tenant}  scopes={key.scopes}  {state}  {key.name or ''}"
        )


@keys.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="Key id or its printed prefix")]) -> None:
    """Revoke a key; API replicas refuse it within API_KEY_CACHE_TTL_S."""
    from app.auth.service import revoke_api_key

    if not _run_db(revoke_api_key(key_id)):
        typer.echo("no active key with that id or prefix", err=True)
        raise typer.Exit(1)
    typer.echo("revoked")
