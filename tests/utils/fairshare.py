"""Fair-share admin calls through the API: one request, its status checked, its document returned."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from tests.utils.jobs import Headers


async def admin_call(
    client: httpx.AsyncClient,
    headers: Headers,
    method: str,
    path: str,
    body: Mapping[str, Any] | None = None,
    expect: int = 200,
) -> Any:
    resp = await client.request(method, path, json=body, headers=headers)
    assert resp.status_code == expect, resp.text
    return resp.json()


async def pause_type(client: httpx.AsyncClient, headers: Headers, name: str) -> Any:
    return await admin_call(client, headers, "POST", f"/v1/report-types/{name}/pause")


async def resume_type(client: httpx.AsyncClient, headers: Headers, name: str) -> Any:
    return await admin_call(client, headers, "POST", f"/v1/report-types/{name}/resume")


async def pause_tenant(client: httpx.AsyncClient, headers: Headers, tenant: str) -> Any:
    return await admin_call(client, headers, "POST", f"/v1/tenants/{tenant}/pause")


async def resume_tenant(client: httpx.AsyncClient, headers: Headers, tenant: str) -> Any:
    return await admin_call(client, headers, "POST", f"/v1/tenants/{tenant}/resume")
