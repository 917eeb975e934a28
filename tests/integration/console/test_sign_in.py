"""Console sign-in: an API key opens a signed HttpOnly SameSite=Strict session; every form carries a CSRF
token; pages answer with a strict Content-Security-Policy."""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.console import csrf_of, raw_key, sign_in


async def test_pages_send_the_visitor_to_the_login_form(client: httpx.AsyncClient) -> None:
    resp = await client.get("/ui/workers?x=1")
    assert resp.status_code == 303
    assert resp.headers["location"] == "/ui/login?next=/ui/workers%3Fx%3D1"
    root = await client.get("/")
    assert root.headers["location"] == "/ui"


async def test_a_good_key_opens_a_strict_session_cookie(client: httpx.AsyncClient, env: Any) -> None:
    form = await client.get("/ui/login")
    assert "script-src 'self'" in form.headers["content-security-policy"]
    assert "unsafe-inline" not in form.headers["content-security-policy"]
    resp = await client.post(
        "/ui/login", data={"csrf": csrf_of(form.text), "api_key": await raw_key(), "next": "/ui/alerts"}
    )
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/alerts"
    cookie = next(c for c in resp.headers.get_list("set-cookie") if c.startswith("ro_session="))
    assert (
        "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie and "Max-Age=" in cookie
    )
    assert "Secure" not in cookie  # only when ENV=production
    page = await client.get("/ui")
    assert page.status_code == 200 and "Open dead letters" in page.text


async def test_production_cookies_are_secure(client: httpx.AsyncClient, env: Any) -> None:
    await env.set(ENV="production", DATABASE_URL=env_db_url())
    form = await client.get("/ui/login")
    assert "Secure" in form.headers["set-cookie"]


async def test_a_bad_key_or_a_missing_token_is_refused(client: httpx.AsyncClient, env: Any) -> None:
    form = await client.get("/ui/login")
    wrong = await client.post("/ui/login", data={"csrf": csrf_of(form.text), "api_key": "ro_nope"})
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
    forged = await client.post("/ui/login", data={"csrf": "forged", "api_key": await raw_key()})
    assert forged.status_code == 403 and "ro_session" not in forged.headers.get("set-cookie", "")


async def test_logout_needs_the_token_and_ends_the_session(client: httpx.AsyncClient, env: Any) -> None:
    csrf = await sign_in(client, await raw_key())
    assert (await client.post("/ui/logout", data={})).status_code == 403
    out = await client.post("/ui/logout", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert (await client.get("/ui")).status_code == 303


async def test_a_revoked_key_ends_its_console_session(client: httpx.AsyncClient, env: Any) -> None:
    from app.auth.service import revoke_api_key

    key = await raw_key()
    await sign_in(client, key)
    assert await revoke_api_key(key[:12])
    assert (await client.get("/ui")).status_code == 303


def env_db_url() -> str:
    import os

    return os.environ["DATABASE_URL"]


async def test_an_unknown_console_page_is_a_readable_404(client: httpx.AsyncClient, env: Any) -> None:
    await sign_in(client, await raw_key())
    resp = await client.get("/ui/jobs/01J/extra/part")
    assert resp.status_code == 404
    assert resp.headers["content-type"].startswith("text/html") and "no such console page" in resp.text
