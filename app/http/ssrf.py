"""The SSRF guard of outbound URLs (callbacks, webhook destinations): http(s) only, no credentials, and no
host that resolves to a loopback, private, link-local, shared, reserved or metadata address unless
CALLBACK_ALLOWED_HOSTS names it.

`check_url` returns the addresses it approved; a delivery connects to those (`app.http.pinned`), so a DNS
answer that changes after the check (rebinding) is never used.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse

from app.core.config import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# 100.100.100.200 is Alibaba Cloud's metadata service (inside 100.64.0.0/10, refused as not global anyway).
METADATA_IPS = {
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("fd00:ec2::254"),
    ipaddress.ip_address("100.100.100.200"),
}


class CallbackRefused(ValueError):
    """The callback URL points somewhere we will not send requests to."""


class HostUnresolved(CallbackRefused):
    """The host does not resolve (now): a DNS blip may pass, unlike a refused address."""


def _allowed(host: str, addresses: list[IPAddress], allow: list[str]) -> bool:
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


NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, NAT64 (well-known prefix) or 6to4 address leads to."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def _public(address: IPAddress) -> bool:
    """A globally routable unicast address; an IPv6 address carrying an IPv4 one must be public as both."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None and not _public(inner):
            return False
    return (
        address.is_global
        and not address.is_multicast
        and not address.is_reserved
        and not address.is_unspecified
        and address not in METADATA_IPS
    )


def _address(sockaddr_host: str) -> IPAddress:
    return ipaddress.ip_address(sockaddr_host.split("%", 1)[0])  # drop an IPv6 scope (fe80::1%eth0)


async def check_url(
    url: str, settings: Settings, what: str = "callback", allow: list[str] | None = None
) -> list[IPAddress]:
    """Refuse non-HTTP(S) URLs, credentials and hosts resolving to non-public addresses; return the addresses
    the host resolved to, in resolver order and without repeats, for the delivery to connect to. `what` names
    the URL in the refusals ("callback", "destination"); `allow` replaces CALLBACK_ALLOWED_HOSTS."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackRefused(f"{what} URL must be an http(s) URL with a host")
    if parts.username or parts.password:
        raise CallbackRefused(f"{what} URL must not carry credentials")
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise CallbackRefused(f"{what} URL has an invalid port") from exc
    return await check_host(host, port, settings, what, allow)


async def check_host(
    host: str, port: int, settings: Settings, what: str, allow: list[str] | None = None
) -> list[IPAddress]:
    """Refuse a host that resolves to a non-public address (unless `allow`, by default CALLBACK_ALLOWED_HOSTS,
    names it); the addresses it resolved to (an SMTP destination's server is checked this way too)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise HostUnresolved(f"{what} host {host!r} does not resolve") from exc
    addresses = list(dict.fromkeys(_address(str(info[4][0])) for info in infos))
    if not addresses:
        raise HostUnresolved(f"{what} host {host!r} does not resolve")
    if _allowed(host, addresses, settings.callback_allowed_hosts if allow is None else allow):
        return addresses
    for address in addresses:
        if not _public(address):
            raise CallbackRefused(f"{what} host {host!r} resolves to a non-public address ({address})")
    return addresses
