"""Outbound POSTs (callbacks, webhook destinations) pinned to the addresses the SSRF guard approved: the
connection never resolves the host.

The URL's host stays the `Host` header and, over https, the TLS SNI name and the name the certificate is
verified against (httpcore's `sni_hostname` request extension); no redirect is followed, no proxy used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx

from app.http.ssrf import IPAddress


async def post_pinned(
    url: str,
    addresses: Sequence[IPAddress],
    content: bytes,
    headers: Mapping[str, str],
    timeout_s: float,
) -> httpx.Response:
    """POST `content` to `url` over a connection to one of `addresses` (tried in order while a connection
    cannot be made; once one is, its answer or error is final)."""
    if not addresses:
        raise ValueError("post_pinned needs at least one checked address")
    target = httpx.URL(url)
    # As httpx would send them for the URL: host[:port] (punycode, default port omitted), and the ASCII host.
    pinned_headers = {**headers, "Host": target.netloc.decode("ascii")}
    extensions = {"sni_hostname": target.raw_host.decode("ascii")}
    error: httpx.TransportError | None = None
    # Directly, never through HTTP(S)_PROXY from the environment: a tunnelling proxy would be handed the IP as
    # the TLS name. SSL_CERT_FILE / SSL_CERT_DIR still choose the trusted CAs, as for every other client.
    verify = httpx.create_ssl_context(trust_env=True)
    async with httpx.AsyncClient(
        timeout=timeout_s, follow_redirects=False, trust_env=False, verify=verify
    ) as client:
        for address in addresses:
            request = client.build_request(
                "POST",
                target.copy_with(host=str(address)),
                content=content,
                headers=pinned_headers,
                extensions=extensions,
            )
            try:
                return await client.send(request)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent: try the next one
                error = exc
    assert error is not None
    raise error
