"""The SSRF guard of callback URLs: which addresses it refuses, and the addresses it hands the delivery."""

from __future__ import annotations

import ipaddress

import pytest

from app.core.config import Settings
from app.http.ssrf import CallbackRefused, check_url


def settings(*allowed: str) -> Settings:
    return Settings(callback_allowed_hosts=list(allowed))


@pytest.mark.parametrize(
    "url",
    [
        "http://100.100.100.200/latest/meta-data",  # Alibaba Cloud metadata, in shared space 100.64.0.0/10
        "http://100.64.0.1/x",
        "http://[::ffff:127.0.0.1]/x",  # loopback carried in IPv4-mapped IPv6
        "http://[::ffff:169.254.169.254]/latest",
        "http://[64:ff9b::7f00:1]/x",  # NAT64 of 127.0.0.1
        "http://[2002:a00:1::1]/x",  # 6to4 of 10.0.0.1
        "http://0.0.0.0:8080/x",
        "http://224.0.0.1/x",
        "http://198.18.0.1/x",  # benchmarking range
    ],
)
async def test_non_public_addresses_are_refused(url: str) -> None:
    with pytest.raises(CallbackRefused):
        await check_url(url, settings())


async def test_the_approved_addresses_are_returned_for_the_delivery_to_connect_to() -> None:
    assert await check_url("https://8.8.8.8/hook", settings()) == [ipaddress.ip_address("8.8.8.8")]
    assert await check_url("http://127.0.0.1:9/x", settings("127.0.0.0/8")) == [
        ipaddress.ip_address("127.0.0.1")
    ]


async def test_an_invalid_port_is_refused_not_raised() -> None:
    with pytest.raises(CallbackRefused):
        await check_url("http://8.8.8.8:99999/x", settings())
