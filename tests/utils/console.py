"""Signing in to the console the way a browser does (login form, CSRF cookie), for in-process tests."""

from __future__ import annotations

import re

import httpx

CSRF_FIELD = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    match = CSRF_FIELD.search(html)
    assert match, "no CSRF field on the page"
    return match.group(1)


async def sign_in(client: httpx.AsyncClient, raw_key: str) -> str:
    """Sign `client` in with `raw_key`; returns the session's CSRF token (from the overview page)."""
    form = await client.get("/ui/login")
    data = {"csrf": csrf_of(form.text), "api_key": raw_key, "next": "/ui"}
    resp = await client.post("/ui/login", data=data)
    assert resp.status_code == 303, resp.text
    page = await client.get("/ui")
    assert page.status_code == 200, page.text
    return csrf_of(page.text)


async def raw_key(tenant: str = "acme", scopes: str = "jobs:read,jobs:write") -> str:
    from app.auth import service

    _, raw = await service.create_api_key(tenant, scopes.split(","))
    return raw
