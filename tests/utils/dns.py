"""A DNS answer that changes between lookups (rebinding, as a hostile server with TTL 0 does), for one name.

Installed as the running event loop's resolver, which both our SSRF guard and httpx's connections ask; every
other name is resolved as usual.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest


class RebindingResolver:
    """`name` resolves to `first` for its first `first_times` lookups, then to `then`; counts the lookups."""

    def __init__(self, name: str, first: str, then: str, first_times: int) -> None:
        self.name = name
        self.first = first
        self.then = then
        self.first_times = first_times
        self.lookups: list[str] = []  # the address each lookup of `name` was answered
        self._real: Any = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> RebindingResolver:
        loop = asyncio.get_running_loop()
        self._real = loop.getaddrinfo
        monkeypatch.setattr(loop, "getaddrinfo", self.getaddrinfo)
        return self

    async def getaddrinfo(
        self, host: Any, port: Any, *, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> list[tuple[Any, ...]]:
        name = host.decode() if isinstance(host, bytes) else host
        if name != self.name:
            return list(await self._real(host, port, family=family, type=type, proto=proto, flags=flags))
        address = self.first if len(self.lookups) < self.first_times else self.then
        self.lookups.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port or 0)))]
