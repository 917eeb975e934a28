"""The console's destination pages without a browser: the list shows no secret, a form with a bad value is a
readable 422 page that stores nothing, a job's page lists its deliveries, and a destination that gave up
shows on the alerts page (the browser test drives the same pages in Chromium).
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.utils.console import raw_key, sign_in
from tests.utils.destinations import dingtalk_body, make_destination, run_and_deliver
from tests.utils.keys import bearer


async def test_a_destination_that_gave_up_shows_on_the_alerts_page_and_the_jobs_page(
    client: httpx.AsyncClient, env: Any, dingtalk: Any
) -> None:
    await env.set(DELIVERY_MAX_ATTEMPTS="1")
    key = await raw_key()
    auth = bearer(key)
    await make_destination(client, auth, dingtalk_body(dingtalk))
    dingtalk.script = ["http500"]
    body = {"report_type": "demo.csv", "params": {"rows": 1}, "deliver_to": [{"destination": "ops-dingtalk"}]}
    job_id = (await client.post("/v1/jobs", json=body, headers=auth)).json()["id"]
    await run_and_deliver()

    await sign_in(client, key)
    listing = await client.get("/ui/destinations")
    assert listing.status_code == 200 and "ops-dingtalk" in listing.text
    assert dingtalk.secret not in listing.text and "access_token" not in listing.text
    alerts = await client.get("/ui/alerts")
    assert 'data-testid="failing-destinations"' in alerts.text and "ops-dingtalk" in alerts.text
    assert "HTTP 500" in alerts.text
    job_page = await client.get(f"/ui/jobs/{job_id}")
    assert 'data-testid="delivery"' in job_page.text and "failed" in job_page.text


async def test_a_bad_form_is_a_readable_422_page_and_nothing_is_stored(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key()
    csrf = await sign_in(client, key)
    form = {"csrf": csrf, "kind": "webhook", "name": "hook", "url": "http://10.0.0.7/x", "secret": "s" * 20}
    resp = await client.post("/ui/destinations", data=form)
    assert resp.status_code == 422 and "non-public" in resp.text
    form = {"csrf": csrf, "kind": "email", "name": "mail", "host": "127.0.0.1", "sender": "a@example.com",
            "recipients": "b@example.com\r\nBcc: x@evil.test"}  # fmt: skip
    assert (await client.post("/ui/destinations", data=form)).status_code == 422
    assert (await client.get("/v1/destinations", headers=bearer(key))).json()["items"] == []
