"""Outbound requests (callbacks, webhook destinations, HTTP report types) pinned to the addresses the SSRF
guard approved: the connection never resolves the host.

The URL's host stays the `Host` header and, over https, the TLS SNI name and the name the certificate is
verified against (httpcore's `sni_hostname` request extension); no redirect is followed, no proxy used.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import httpx

from app.http.ssrf import IPAddress


def _client(timeout: httpx.Timeout | float) -> httpx.AsyncClient:
    # Directly, never through HTTP(S)_PROXY from the environment: a tunnelling proxy would be handed the IP as
    # the TLS name. SSL_CERT_FILE / SSL_CERT_DIR still choose the trusted CAs, as for every other client.
    verify = httpx.create_ssl_context(trust_env=True)
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False, verify=verify)


def _pinned_requests(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    addresses: Sequence[IPAddress],
    content: bytes | None,
    headers: Mapping[str, str],
) -> list[httpx.Request]:
    """One request per approved address, each to the address with the URL's host as `Host` and SNI name."""
    if not addresses:
        raise ValueError("a pinned request needs at least one checked address")
    target = httpx.URL(url)
    # As httpx would send them for the URL: host[:port] (punycode, default port omitted), and the ASCII host.
    pinned_headers = {**headers, "Host": target.netloc.decode("ascii")}
    extensions = {"sni_hostname": target.raw_host.decode("ascii")}
    return [
        client.build_request(
            method,
            target.copy_with(host=str(address)),
            content=content,
            headers=pinned_headers,
            extensions=extensions,
        )
        for address in addresses
    ]


async def post_pinned(
    url: str,
    addresses: Sequence[IPAddress],
    content: bytes,
    headers: Mapping[str, str],
    timeout_s: float,
) -> httpx.Response:
    """POST `content` to `url` over a connection to one of `addresses` (tried in order while a connection
    cannot be made; once one is, its answer or error is final)."""
    async with stream_pinned("POST", url, addresses, content, headers, timeout_s) as response:
        await response.aread()
        return response


@asynccontextmanager
async def stream_pinned(
    method: str,
    url: str,
    addresses: Sequence[IPAddress],
    content: bytes | None,
    headers: Mapping[str, str],
    timeout_s: float,
) -> AsyncIterator[httpx.Response]:
    """Send a request as `post_pinned` does and yield the answer with its body not yet read (iterate
    `aiter_bytes()`); `timeout_s` bounds connecting and each read, not the whole download."""
    async with _client(timeout_s) as client:
        error: httpx.TransportError | None = None
        for request in _pinned_requests(client, method, url, addresses, content, headers):
            try:
                response = await client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent: try the next one
                error = exc
                continue
            try:
                yield response
            finally:
                await response.aclose()
            return
        assert error is not None
        raise error
