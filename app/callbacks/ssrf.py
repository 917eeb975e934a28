"""The SSRF guard of callback URLs: http(s) only, no credentials, and no host that resolves to a loopback,
private, link-local, reserved or metadata address unless CALLBACK_ALLOWED_HOSTS names it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse

from app.core.config import Settings

METADATA_IPS = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class CallbackRefused(ValueError):
    """The callback URL points somewhere we will not send requests to."""


def _allowed(
    host: str, addresses: list[ipaddress.IPv4Address | ipaddress.IPv6Address], allow: list[str]
) -> bool:
    for entry in allow:
        if entry.lower() == host.lower():
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if addresses and all(a in network for a in addresses):
            return True
    return False


async def check_url(url: str, settings: Settings) -> None:
    """Refuse non-HTTP(S) URLs and hosts resolving to loopback, private, link-local or metadata addresses."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackRefused("callback_url must be an http(s) URL with a host")
    if parts.username or parts.password:
        raise CallbackRefused("callback_url must not carry credentials")
    host = parts.hostname
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CallbackRefused(f"callback host {host!r} does not resolve") from exc
    addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    if _allowed(host, addresses, settings.callback_allowed_hosts):
        return
    for address in addresses:
        if (
            address.is_loopback
            or address.is_private
            or address.is_link_local
            or address.is_reserved
            or address.is_multicast
            or address.is_unspecified
            or address in METADATA_IPS
        ):
            raise CallbackRefused(f"callback host {host!r} resolves to a non-public address ({address})")
