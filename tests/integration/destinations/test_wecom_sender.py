"""The WeCom group-robot sender against a real local robot that checks the key, the shape and the rate:
what it posts, how each failure reads (never with the key), and the spacing that keeps a robot at 20/min."""

from __future__ import annotations

import asyncio
from itertools import pairwise

import pytest

from app.core.config import Settings
from app.destinations.senders.base import Message, SendError
from app.destinations.senders.wecom import MIN_INTERVAL_S, WeComSender
from devtools.servers.base import free_port
from tests.utils.fakes.wecom import FakeWeCom

LINK = "https://reports.example.com/d/01JDX4Q2ZK7Y8M3N5P6R9S0T1V"


def report(markdown: str = f"**3** rows\n\n[Download]({LINK})", title: str = "日报 2026-11-26") -> Message:
    return Message(title=title, markdown=markdown, text="3 rows", link=LINK)


async def test_a_report_reaches_the_robot_as_one_markdown_message(wecom: FakeWeCom) -> None:
    await WeComSender(wecom.url).send(report())

    assert [r.body for r in wecom.accepted] == [
        {
            "msgtype": "markdown",
            "markdown": {"content": f"## 日报 2026-11-26\n\n**3** rows\n\n[Download]({LINK})"},
        }
    ]


async def test_a_long_report_is_cut_to_4096_bytes_with_an_ellipsis_and_keeps_its_link(
    wecom: FakeWeCom,
) -> None:
    rows = "\n".join(f"| 第{i}行 | 销售额 {i * 1000} 元 |" for i in range(2000))

    await WeComSender(wecom.url).send(report(markdown=f"{rows}\n\n[Download]({LINK})"))

    [received] = wecom.accepted
    assert len(received.content.encode()) <= 4096
    assert received.content.startswith("## 日报 2026-11-26\n\n| 第0行 |")
    assert "\n…\n" in received.content
    assert received.content.endswith(f"[Download]({LINK})")
    assert "| 第1999行 |" not in received.content


async def test_mentions_follow_as_a_text_message_with_the_mobiles_and_all(wecom: FakeWeCom) -> None:
    sender = WeComSender(wecom.url, mentioned_mobiles=["13800001111"], mention_all=True)

    await sender.send(report())

    assert [r.msgtype for r in wecom.accepted] == ["markdown", "text"]
    assert wecom.accepted[1].content == "日报 2026-11-26"
    assert wecom.accepted[1].mentioned_mobiles == ["13800001111", "@all"]


async def test_a_wrong_key_fails_with_errcode_93000_and_no_key_in_the_error(wecom: FakeWeCom) -> None:
    wrong_key = "0b6f2c1e-wrong-key-4e8a-9d7c"

    with pytest.raises(SendError) as caught:
        await WeComSender(wecom.url_with_key(wrong_key)).send(report())

    assert str(caught.value).startswith("wecom errcode 93000: invalid webhook url")
    assert wrong_key not in str(caught.value) and wecom.key not in str(caught.value)
    assert caught.value.__cause__ is None and wecom.accepted == []


async def test_an_unreachable_robot_fails_with_the_kind_of_error_only() -> None:
    url = f"http://127.0.0.1:{free_port()}/cgi-bin/webhook/send?key=secret-key-never-shown"

    with pytest.raises(SendError) as caught:
        await WeComSender(url).send(report())

    assert str(caught.value) == "wecom unreachable: ConnectError"


async def test_a_hung_robot_fails_after_the_timeout(wecom: FakeWeCom) -> None:
    wecom.script = ["hang"]
    wecom.hang_s = 5.0

    with pytest.raises(SendError, match=r"^wecom unreachable: ReadTimeout$"):
        await WeComSender(wecom.url, timeout_s=0.5).send(report())


async def test_an_http_500_fails_and_the_next_send_is_accepted(wecom: FakeWeCom) -> None:
    wecom.script = ["http500"]
    sender = WeComSender(wecom.url)

    with pytest.raises(SendError, match=r"^wecom answered HTTP 500$"):
        await sender.send(report())
    await sender.send(report())

    assert [r.reason for r in wecom.received] == ["http500", ""]
    assert len(wecom.accepted) == 1


async def test_an_error_code_fails_with_the_code_and_the_robots_message(wecom: FakeWeCom) -> None:
    wecom.script = ["errcode"]

    with pytest.raises(SendError, match=r"^wecom errcode -1: system error$"):
        await WeComSender(wecom.url).send(report())


async def test_the_robots_rate_limit_answer_is_a_send_error(wecom: FakeWeCom) -> None:
    wecom.limit_per_minute = 0

    with pytest.raises(SendError, match=r"^wecom errcode 45009: api freq out of limit$"):
        await WeComSender(wecom.url).send(report())


async def test_messages_to_one_robot_are_spaced_to_stay_within_20_a_minute(wecom: FakeWeCom) -> None:
    senders = [WeComSender(wecom.url) for _ in range(3)]  # one robot, three destinations: one budget

    await asyncio.gather(*(s.send(report(title=f"report {i}")) for i, s in enumerate(senders)))

    times = [r.at for r in wecom.accepted]
    assert len(times) == 3
    assert all(b - a >= MIN_INTERVAL_S - 0.1 for a, b in pairwise(times))


async def test_two_robots_do_not_wait_for_each_other() -> None:
    first, second = FakeWeCom().start(), FakeWeCom().start()
    try:
        started = asyncio.get_running_loop().time()
        await asyncio.gather(WeComSender(first.url).send(report()), WeComSender(second.url).send(report()))
        assert asyncio.get_running_loop().time() - started < MIN_INTERVAL_S
    finally:
        first.stop()
        second.stop()
    assert len(first.accepted) == len(second.accepted) == 1


async def test_with_settings_the_post_passes_the_ssrf_guard_to_the_approved_address(wecom: FakeWeCom) -> None:
    await WeComSender(wecom.url, settings=Settings(callback_allowed_hosts=["127.0.0.1"])).send(report())

    assert len(wecom.accepted) == 1


async def test_with_settings_a_loopback_robot_is_refused_without_the_key_in_the_error(
    wecom: FakeWeCom,
) -> None:
    with pytest.raises(SendError, match="non-public address") as caught:
        await WeComSender(wecom.url, settings=Settings(callback_allowed_hosts=[])).send(report())

    assert wecom.key not in str(caught.value) and wecom.received == []
