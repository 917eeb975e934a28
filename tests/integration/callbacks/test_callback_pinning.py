"""DNS rebinding on completion callbacks: the POST goes to the address the SSRF guard approved, never to what
the name resolves to afterwards; `Host`, TLS SNI and the certificate check stay the URL's; no redirect is
followed.

The resolver answers `rebind.test` like a hostile DNS server with TTL 0: an approved address to the submit and
delivery checks, 127.0.0.1 to whoever asks next. Receivers are real local HTTP(S) servers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.utils.dns import RebindingResolver
from tests.utils.fakes.receiver import Receiver
from tests.utils.jobs import submit
from tests.utils.tls import ThrowawayCA
from tests.utils.workers import drain, drain_alerts

HOST = "rebind.test"
#: TEST-NET-3 stands for a public server: never routed, so no test packet leaves the machine. Python counts
#: documentation ranges as non-public, so CALLBACK_ALLOWED_HOSTS lets the guard approve it like a public one.
PUBLIC_LOOKING = "203.0.113.7"
#: Another loopback address, approved through CALLBACK_ALLOWED_HOSTS, where a receiver can prove delivery.
APPROVED = "127.0.0.2"


@pytest.fixture
def started() -> Iterator[list[Receiver]]:
    receivers: list[Receiver] = []
    yield receivers
    for receiver in receivers:
        receiver.stop()


@pytest.fixture
async def ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ThrowawayCA]:
    authority = ThrowawayCA(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(authority.ca_file))  # the trust store httpx reads
    yield authority


def rebinding(monkeypatch: pytest.MonkeyPatch, first: str, checks: int = 2) -> RebindingResolver:
    """`HOST` answers `first` to `checks` lookups (submit and delivery), then 127.0.0.1."""
    return RebindingResolver(HOST, first, "127.0.0.1", checks).install(monkeypatch)


async def deliver_one(client: httpx.AsyncClient, auth: dict[str, str], url: str) -> dict[str, Any]:
    """Submit a job with `url` as its callback, run it, run the callback consumer; the job document after."""
    job = await submit(client, auth, "demo.csv", job={"callback_url": url}, rows=1)
    await drain()
    await drain_alerts()
    resp = await client.get(f"/v1/jobs/{job['id']}", headers=auth)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def test_dns_rebinding_to_loopback_after_the_check_never_reaches_the_loopback_receiver(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    env: Any,
    started: list[Receiver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await env.set(CALLBACK_ALLOWED_HOSTS="203.0.113.0/24", CALLBACK_MAX_ATTEMPTS=1)
    loopback = Receiver().start("127.0.0.1")
    started.append(loopback)
    resolver = rebinding(monkeypatch, PUBLIC_LOOKING)
    job = await deliver_one(client, auth, f"http://{HOST}:{loopback.port}{loopback.url_path}")
    assert loopback.received == [], "the callback must never connect to the rebound 127.0.0.1"
    assert resolver.lookups == [PUBLIC_LOOKING, PUBLIC_LOOKING], "only the two checks resolve the name"
    assert job["callback"]["status"] == "failed"
    assert job["callback"]["last_error"].startswith(("ConnectError", "ConnectTimeout")), job["callback"]


async def test_dns_rebinding_delivers_to_the_checked_address_with_the_urls_host_header(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    env: Any,
    started: list[Receiver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await env.set(CALLBACK_ALLOWED_HOSTS=APPROVED)
    approved = Receiver().start(APPROVED)
    loopback = Receiver().start("127.0.0.1", approved.port)  # same port: only the address tells them apart
    started += [approved, loopback]
    rebinding(monkeypatch, APPROVED)
    job = await deliver_one(client, auth, f"http://{HOST}:{approved.port}{approved.url_path}")
    assert loopback.received == [], "the callback must never connect to the rebound 127.0.0.1"
    [delivery] = approved.received
    assert delivery.signature_ok and delivery.body["id"] == job["id"]
    assert delivery.headers["host"] == f"{HOST}:{approved.port}"
    assert job["callback"] == {"status": "delivered", "attempts": 1, "last_error": None}


async def test_pinned_https_callback_sends_the_urls_name_as_sni_and_verifies_its_certificate(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    env: Any,
    started: list[Receiver],
    ca: ThrowawayCA,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await env.set(CALLBACK_ALLOWED_HOSTS=APPROVED)
    receiver = Receiver().start(APPROVED, tls=ca.server_context(HOST))
    started.append(receiver)
    rebinding(monkeypatch, APPROVED)
    job = await deliver_one(client, auth, f"https://{HOST}:{receiver.port}{receiver.url_path}")
    assert job["callback"] == {"status": "delivered", "attempts": 1, "last_error": None}
    assert ca.sni_seen == [HOST]
    [delivery] = receiver.received
    assert delivery.signature_ok and delivery.headers["host"] == f"{HOST}:{receiver.port}"


async def test_pinned_https_callback_refuses_a_certificate_for_another_name(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    env: Any,
    started: list[Receiver],
    ca: ThrowawayCA,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await env.set(CALLBACK_ALLOWED_HOSTS=APPROVED, CALLBACK_MAX_ATTEMPTS=1)
    receiver = Receiver().start(APPROVED, tls=ca.server_context("someone-else.test"))
    started.append(receiver)
    rebinding(monkeypatch, APPROVED)
    job = await deliver_one(client, auth, f"https://{HOST}:{receiver.port}{receiver.url_path}")
    assert receiver.received == []
    assert job["callback"]["status"] == "failed"
    assert "CERTIFICATE_VERIFY_FAILED" in job["callback"]["last_error"], job["callback"]


async def test_a_redirect_answer_is_not_followed_and_counts_as_a_failed_try(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    env: Any,
    started: list[Receiver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await env.set(CALLBACK_ALLOWED_HOSTS=APPROVED, CALLBACK_MAX_ATTEMPTS=1)
    elsewhere = Receiver().start(APPROVED)
    receiver = Receiver(script=["redirect"], redirect_to=elsewhere.url).start(APPROVED)
    started += [elsewhere, receiver]
    rebinding(monkeypatch, APPROVED, checks=10)
    job = await deliver_one(client, auth, f"http://{HOST}:{receiver.port}{receiver.url_path}")
    assert [d.answered for d in receiver.received] == [307]
    assert elsewhere.received == []
    assert job["callback"] == {"status": "failed", "attempts": 1, "last_error": "HTTP 307"}


async def test_callbacks_ignore_an_http_proxy_from_the_environment(
    client: httpx.AsyncClient,
    auth: dict[str, str],
    env: Any,
    started: list[Receiver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await env.set(CALLBACK_ALLOWED_HOSTS=APPROVED)
    proxy = Receiver().start("127.0.0.1")
    receiver = Receiver().start(APPROVED)
    started += [proxy, receiver]
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
    rebinding(monkeypatch, APPROVED)
    job = await deliver_one(client, auth, f"http://{HOST}:{receiver.port}{receiver.url_path}")
    assert proxy.received == [], "a proxy would reach whatever it resolves the name to"
    assert [d.answered for d in receiver.received] == [200]
    assert job["callback"]["status"] == "delivered"
