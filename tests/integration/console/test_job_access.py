"""Who may do what on the console's job and dead-letter pages: scopes and tenants exactly as in the API, a
CSRF token on every POST, and every string a user controls rendered as text."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field

from app.reports.base import PermanentError, ReportContext
from app.reports.registry import registry
from tests.utils.console import raw_key, sign_in
from tests.utils.console_pages import flash_after, post_actions, row_ids, text_of
from tests.utils.dead_letters import kill_permanently, letters
from tests.utils.jobs import get_job, submit_id
from tests.utils.keys import bearer, make_key
from tests.utils.problems import BOGUS_ID
from tests.utils.workers import drain

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'


class LookupParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: str = Field(min_length=1, max_length=500)


async def lookup(ctx: ReportContext, params: LookupParams) -> None:
    raise PermanentError(f"customer {params.customer} not found")


@pytest.fixture
def lookup_report() -> Iterator[str]:
    """`test.lookup`: dies quoting its free-text param in its error (the way a tenant's text reaches one)."""
    registry.report_type("test.lookup", params=LookupParams)(lookup)
    yield "test.lookup"
    registry._types.pop("test.lookup", None)


def in_an_hour() -> dict[str, str]:
    return {"run_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}


async def test_a_read_only_key_sees_no_action_and_its_posts_are_403(
    client: httpx.AsyncClient, env: Any
) -> None:
    writer = await make_key("acme")
    [dead] = await kill_permanently(client, writer)
    waiting = await submit_id(client, writer, "demo.csv", rows=1, job=in_an_hour())
    [letter] = await letters(client, writer)
    csrf = await sign_in(client, await raw_key("acme", "jobs:read"))

    for path in ("/ui/jobs", f"/ui/jobs/{dead}", f"/ui/jobs/{waiting}", "/ui/dead-letters"):
        page = await client.get(path)
        assert page.status_code == 200, path
        assert post_actions(page.text) == ["/ui/logout"], path  # sign-out is the only form that posts
        assert 'name="ids"' not in page.text and "data-select-all" not in page.text, path
    assert row_ids((await client.get("/ui/jobs")).text) == [waiting, dead]

    for path, data in (
        (f"/ui/jobs/{waiting}/cancel", {}),
        (f"/ui/jobs/{dead}/replay", {}),
        ("/ui/jobs/bulk", {"action": "cancel", "ids": [waiting]}),
        ("/ui/dead-letters/replay", {"ids": [dead]}),
        (f"/ui/dead-letters/{letter['id']}/resolve", {"reason": "x"}),
    ):
        refused = await client.post(path, data={"csrf": csrf, **data})
        assert refused.status_code == 403, path
        assert "This key lacks the `jobs:write` scope." in text_of(refused.text, "problem")
    assert (await get_job(client, writer, waiting))["status"] == "scheduled"
    assert (await get_job(client, writer, dead))["replay_count"] == 0
    assert (await letters(client, writer))[0]["resolved_at"] is None


async def test_a_post_without_the_csrf_token_is_403_and_changes_nothing(
    client: httpx.AsyncClient, env: Any
) -> None:
    key = await raw_key("ops", "admin")
    [dead] = await kill_permanently(client, bearer(key))
    waiting = await submit_id(client, bearer(key), "demo.csv", rows=1, job=in_an_hour())
    [letter] = await letters(client, bearer(key))
    await sign_in(client, key)
    for path, data in (
        (f"/ui/jobs/{waiting}/cancel", {}),
        (f"/ui/jobs/{dead}/replay", {}),
        ("/ui/jobs/bulk", {"action": "cancel", "ids": [waiting]}),
        ("/ui/jobs/replay-matching", {"status": "dead"}),
        ("/ui/dead-letters/replay", {"ids": [dead]}),
        ("/ui/dead-letters/replay-confirm", {"report_type": "demo.flaky"}),
        (f"/ui/dead-letters/{letter['id']}/resolve", {"reason": "x"}),
    ):
        for token in ({}, {"csrf": "forged"}):
            refused = await client.post(path, data={**token, **data})
            assert refused.status_code == 403, (path, token)
            assert "security token" in text_of(refused.text, "problem")
    assert (await get_job(client, bearer(key), waiting))["status"] == "scheduled"
    assert (await get_job(client, bearer(key), dead))["replay_count"] == 0


async def test_another_tenants_job_answers_404_like_a_missing_one(
    client: httpx.AsyncClient, env: Any
) -> None:
    acme = await make_key("acme")
    [dead] = await kill_permanently(client, acme)
    done = await submit_id(client, acme, "demo.csv", rows=1)
    await drain()
    csrf = await sign_in(client, await raw_key("globex"))
    for job_id in (dead, done, BOGUS_ID, "not-a-job"):
        for path in (f"/ui/jobs/{job_id}", f"/ui/jobs/{job_id}/output"):
            page = await client.get(path)
            assert page.status_code == 404, path
            assert text_of(page.text, "problem") == f"Not found No job {job_id!r}. Back to the overview"
        for action in ("cancel", "replay"):
            refused = await client.post(f"/ui/jobs/{job_id}/{action}", data={"csrf": csrf})
            assert refused.status_code == 404 and "demo." not in refused.text
    assert row_ids((await client.get("/ui/jobs")).text) == []
    assert row_ids((await client.get(f"/ui/jobs?q={dead[:20]}")).text) == []
    assert row_ids((await client.get("/ui/dead-letters")).text, "letter-row") == []
    assert (await get_job(client, acme, dead))["replay_count"] == 0


async def test_script_in_params_errors_keys_and_reasons_is_rendered_as_text(
    client: httpx.AsyncClient, env: Any, lookup_report: str
) -> None:
    key = await raw_key("acme")
    auth = bearer(key)
    payload = SCRIPT + IMG
    job_id = await submit_id(client, auth, lookup_report, customer=payload, job={"ordering_key": payload})
    await drain()
    job = await get_job(client, auth, job_id)
    assert job["status"] == "dead" and payload in job["last_error"]["message"]
    [letter] = await letters(client, auth)
    csrf = await sign_in(client, key)

    pages = {}
    for path in ("/ui/jobs", f"/ui/jobs/{job_id}", "/ui/dead-letters", "/ui/alerts", "/ui"):
        pages[path] = (await client.get(path)).text
    pages["filtered"] = (await client.get("/ui/jobs", params={"ordering_key": payload})).text
    assert row_ids(pages["filtered"]) == [job_id]
    resolved = await client.post(
        f"/ui/dead-letters/{letter['id']}/resolve", data={"csrf": csrf, "reason": payload}
    )
    pages["flash"], _ = await flash_after(client, resolved)
    pages["resolved"] = (await client.get("/ui/dead-letters?archived=1")).text
    pages["404"] = (await client.get(f"/ui/jobs/{IMG}")).text
    pages["bad filter"] = (await client.get("/ui/jobs", params={"status": SCRIPT})).text

    for name, page in pages.items():
        assert "<script>alert" not in page and "<img src=x" not in page, name
    for name in (f"/ui/jobs/{job_id}", "/ui/dead-letters", "resolved", "bad filter"):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[name], name
    assert "No job &#39;&#34;&gt;&lt;img src=x onerror=alert(1)&gt;&#39;." in pages["404"]
    job_page = pages[f"/ui/jobs/{job_id}"]
    assert text_of(job_page, "last-error") == f"PermanentError: customer {payload} not found"
    assert text_of(job_page, "params") == '{ "customer": "' + SCRIPT + IMG.replace('"', '\\"') + '" }'
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in pages["/ui/jobs"]  # the ordering key column
    assert text_of(pages["resolved"], "letter-state").endswith(f": {payload}")
