"""/v1/destinations: a tenant's own destinations, created, listed, read and replaced without their secrets
ever in an answer; bad bodies and other tenants' destinations are clear 4xx that change nothing.

Real MariaDB and Redis; the robots are the suite's fake servers (nothing is sent here).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.utils.destinations import dingtalk_body, make_destination, webhook_body
from tests.utils.keys import make_key
from tests.utils.problems import assert_problem


async def post_job(client: httpx.AsyncClient, auth: dict[str, str], deliver_to: list[Any]) -> httpx.Response:
    body = {"report_type": "demo.csv", "params": {"rows": 1}, "deliver_to": deliver_to}
    return await client.post("/v1/jobs", json=body, headers=auth)


async def listed(client: httpx.AsyncClient, auth: dict[str, str]) -> list[dict[str, Any]]:
    resp = await client.get("/v1/destinations", headers=auth)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def test_a_destination_is_created_listed_and_read_without_its_secrets(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: Any
) -> None:
    body = dingtalk_body(dingtalk)
    made = await make_destination(client, auth, body)
    assert made["kind"] == "dingtalk" and made["name"] == "ops-dingtalk" and made["tenant"] == "acme"
    assert made["secrets_set"] == ["secret", "url"]
    assert made["url_host"] == "127.0.0.1"
    assert made["options"] == {"at_mobiles": ["13800000000"], "at_all": False}
    one = await client.get(f"/v1/destinations/{made['id']}", headers=auth)
    answers = [one.text, (await client.get("/v1/destinations", headers=auth)).text]
    for text in answers:
        assert dingtalk.secret not in text and "access_token" not in text
    assert one.json() == made
    assert [d["id"] for d in await listed(client, auth)] == [made["id"]]


async def test_a_replace_keeps_the_secrets_it_leaves_out_and_a_second_name_is_409(
    client: httpx.AsyncClient, auth: dict[str, str], dingtalk: Any
) -> None:
    made = await make_destination(client, auth, dingtalk_body(dingtalk))
    body = {k: v for k, v in dingtalk_body(dingtalk).items() if k != "secret"} | {"at_all": True}
    resp = await client.put(f"/v1/destinations/{made['id']}", json=body, headers=auth)
    assert resp.status_code == 200, resp.text
    assert resp.json()["secrets_set"] == ["secret", "url"] and resp.json()["options"]["at_all"] is True
    assert_problem(await client.post("/v1/destinations", json=dingtalk_body(dingtalk), headers=auth), 409)
    as_feishu = {"kind": "feishu", "name": "ops-dingtalk", "url": dingtalk.url}
    assert_problem(await client.put(f"/v1/destinations/{made['id']}", json=as_feishu, headers=auth), 409)


BAD_BODIES = [
    {"kind": "pager", "name": "x", "url": "http://127.0.0.1/"},
    {"kind": "dingtalk", "name": "has space", "url": "http://127.0.0.1/"},
    {"kind": "dingtalk", "name": "x", "url": "ftp://127.0.0.1/"},
    {"kind": "webhook", "name": "x", "url": "http://127.0.0.1/", "secret": "short"},
    {"kind": "webhook", "name": "x", "url": "http://169.254.169.254/latest", "secret": "s" * 20},
    {"kind": "webhook", "name": "x", "url": "http://10.1.2.3/hook", "secret": "s" * 20},
    {"kind": "email", "name": "x", "host": "smtp.example.com", "sender": "a@example.com", "recipients": []},
    {
        "kind": "email",
        "name": "x",
        "host": "smtp.example.com",
        "sender": "a@example.com\r\nBcc: x@evil.test",
        "recipients": ["b@example.com"],
    },
    {
        "kind": "email",
        "name": "x",
        "host": "smtp.example.com",
        "sender": "a@example.com",
        "recipients": ["b@example.com\nBcc: x@evil.test"],
    },
    {"kind": "feishu", "name": "x", "url": "http://127.0.0.1/", "extra": 1},
]


@pytest.mark.parametrize("body", BAD_BODIES)
async def test_a_bad_destination_is_422_and_nothing_is_stored(
    client: httpx.AsyncClient, auth: dict[str, str], body: dict[str, Any]
) -> None:
    assert_problem(await client.post("/v1/destinations", json=body, headers=auth), 422)
    assert await listed(client, auth) == []


async def test_another_tenants_destination_is_404_and_deliver_to_cannot_name_it(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    theirs = await make_destination(client, await make_key("globex"), webhook_body(receiver))
    for method in ("get", "delete"):
        assert_problem(
            await client.request(method.upper(), f"/v1/destinations/{theirs['id']}", headers=auth), 404
        )
    for ref in (theirs["id"], theirs["name"], "no-such-destination"):
        resp = await post_job(client, auth, [{"destination": ref}])
        assert_problem(resp, 422)
        assert ref in resp.text
    jobs = await client.get("/v1/jobs", headers=auth)
    assert jobs.json()["items"] == []


async def test_a_title_with_a_line_break_and_recipients_on_a_robot_are_422(
    client: httpx.AsyncClient, auth: dict[str, str], receiver: Any
) -> None:
    await make_destination(client, auth, webhook_body(receiver))
    for item in (
        {"destination": "warehouse-hook", "title": "Sales\r\nX-Injected: 1"},
        {"destination": "warehouse-hook", "recipients": ["b@example.com"]},
    ):
        assert_problem(await post_job(client, auth, [item]), 422)
    assert (await client.get("/v1/jobs", headers=auth)).json()["items"] == []
