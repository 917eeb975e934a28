"""The email sender against a real local SMTP server (aiosmtpd): plain, STARTTLS with AUTH, implicit TLS; what
arrives (subject, text, attachment), how failures read (never with the password), header injection refused."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

import pytest

from app.destinations.senders.base import Attachment, Message, SendError
from app.destinations.senders.email import EmailSender, Security, check_address, check_header_value
from devtools.servers.base import free_port
from tests.utils.fakes.smtp import HOSTNAME, PASSWORD, USERNAME, FakeSMTP

FROM = "Reports <reports@example.com>"
TO = ["alice@example.com", "bob@example.com"]


def report(title: str = "Daily sales 2026-11-26", attachment: Attachment | None = None) -> Message:
    return Message(
        title=title,
        markdown="**3** rows",
        text="3 rows.\nDownload: https://reports.example.com/d/01JDX4Q2ZK",
        link="https://reports.example.com/d/01JDX4Q2ZK",
        attachment=attachment,
    )


def plain(port: int, security: Security = "none", **overrides: object) -> EmailSender:
    options: dict[str, object] = dict(
        host="127.0.0.1",
        port=port,
        security=security,
        username=None,
        password=None,
        sender=FROM,
        recipients=TO,
        timeout_s=5.0,
    )
    options.update(overrides)
    return EmailSender(**options)  # type: ignore[arg-type]


def secure(server: FakeSMTP, password: str = PASSWORD, security: Security = "starttls") -> EmailSender:
    return plain(
        server.port,
        security,
        host=HOSTNAME,
        username=USERNAME,
        password=password,
        tls_context=server.client_tls_context(),
    )


def body_text(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content()).replace("\r\n", "\n")  # as it came over SMTP: CRLF line ends


async def test_a_plain_mail_reaches_every_recipient_with_its_subject_and_text(smtp_server: FakeSMTP) -> None:
    await plain(smtp_server.port).send(report())

    [mail] = smtp_server.received
    assert mail.mail_from == "reports@example.com" and mail.rcpt_tos == TO
    assert mail.message["Subject"] == "Daily sales 2026-11-26"
    assert mail.message["From"] == FROM and mail.message["To"] == ", ".join(TO)
    assert body_text(mail.message) == report().text + "\n"
    assert list(mail.message.iter_attachments()) == [] and not mail.tls and mail.login is None


async def test_an_email_with_a_small_report_carries_it_as_an_attachment(smtp_server: FakeSMTP) -> None:
    data = "区域,销售额\n华东,1200\n".encode()

    await plain(smtp_server.port).send(report(attachment=Attachment("日报 2026-11-26.csv", "text/csv", data)))

    [mail] = smtp_server.received
    [part] = list(mail.message.iter_attachments())
    assert part.get_filename() == "日报 2026-11-26.csv"
    assert part.get_content_type() == "text/csv"
    assert part.get_payload(decode=True) == data
    assert body_text(mail.message) == report().text + "\n"


@pytest.mark.parametrize(
    ("given", "arrives_as"),
    [("text/csv; charset=utf-8", "text/csv"), ("Application/PDF", "application/pdf"), ("report", None)],
)
async def test_an_attachments_content_type_arrives_bare_or_as_octet_stream(
    smtp_server: FakeSMTP, given: str, arrives_as: str | None
) -> None:
    await plain(smtp_server.port).send(report(attachment=Attachment("r.bin", given, b"%PDF-1.7")))

    [part] = list(smtp_server.received[0].message.iter_attachments())
    assert part.get_content_type() == (arrives_as or "application/octet-stream")
    assert part.get_payload(decode=True) == b"%PDF-1.7"


async def test_a_chinese_subject_arrives_encoded_and_decodes_to_the_title(smtp_server: FakeSMTP) -> None:
    title = "销售日报：2026年11月26日（华东区）"

    await plain(smtp_server.port).send(report(title=title))

    [mail] = smtp_server.received
    assert mail.message["Subject"] == title
    assert mail.message["Subject"].defects == ()


async def test_auth_over_starttls_with_a_trusted_certificate_is_accepted(
    secure_smtp_server: FakeSMTP,
) -> None:
    await secure(secure_smtp_server).send(report())

    [mail] = secure_smtp_server.received
    assert mail.tls and mail.login == USERNAME
    assert secure_smtp_server.logins == [(USERNAME, True)]


async def test_a_wrong_password_fails_without_the_password_in_the_error(secure_smtp_server: FakeSMTP) -> None:
    wrong = "Wr0ng-Pa55word-zq81"

    with pytest.raises(SendError) as caught:
        await secure(secure_smtp_server, password=wrong).send(report())

    assert str(caught.value) == "smtp authentication failed (535)"
    assert wrong not in repr(caught.value) and PASSWORD not in repr(caught.value)
    assert caught.value.__cause__ is None
    assert secure_smtp_server.received == []
    assert secure_smtp_server.logins and {ok for _, ok in secure_smtp_server.logins} == {False}


async def test_a_certificate_the_system_does_not_trust_is_refused(secure_smtp_server: FakeSMTP) -> None:
    sender = plain(
        secure_smtp_server.port,
        "starttls",
        host=HOSTNAME,
        username=USERNAME,
        password=PASSWORD,
        tls_context=None,
    )

    with pytest.raises(SendError) as caught:
        await sender.send(report())

    assert PASSWORD not in str(caught.value)
    assert secure_smtp_server.received == [] and secure_smtp_server.logins == []


async def test_starttls_required_but_not_offered_is_a_send_error(smtp_server: FakeSMTP) -> None:
    with pytest.raises(SendError, match="STARTTLS"):
        await plain(smtp_server.port, "starttls").send(report())

    assert smtp_server.received == []


# aiosmtpd cannot tell an implicit-TLS session from a plain one, so AUTH must not require STARTTLS there.
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")
async def test_implicit_tls_is_accepted(tmp_path: Path) -> None:
    server = FakeSMTP(username=USERNAME, password=PASSWORD, implicit_tls=True, ca_directory=tmp_path).start()
    try:
        await secure(server, security="tls").send(report())
    finally:
        server.stop()

    [mail] = server.received
    assert mail.tls and mail.login == USERNAME


async def test_a_server_answering_451_is_a_send_error_and_the_next_mail_goes_through(
    smtp_server: FakeSMTP,
) -> None:
    smtp_server.script = ["451"]
    sender = plain(smtp_server.port)

    with pytest.raises(SendError, match=r"^smtp server answered 451: .*local error in processing"):
        await sender.send(report())
    await sender.send(report())

    assert len(smtp_server.received) == 1


async def test_a_refused_recipient_does_not_stop_the_others(smtp_server: FakeSMTP) -> None:
    smtp_server.refuse = {"bob@example.com"}

    await plain(smtp_server.port).send(report())

    assert [m.rcpt_tos for m in smtp_server.received] == [["alice@example.com"]]


async def test_every_recipient_refused_is_a_send_error(smtp_server: FakeSMTP) -> None:
    smtp_server.refuse = set(TO)

    with pytest.raises(SendError, match=r"^smtp server refused every recipient \(550\)$"):
        await plain(smtp_server.port).send(report())


async def test_an_unreachable_server_is_a_send_error() -> None:
    sender = plain(free_port(), password=PASSWORD, username=USERNAME)

    with pytest.raises(SendError, match=r"^smtp server unreachable") as caught:
        await sender.send(report())

    assert PASSWORD not in str(caught.value)


async def test_a_hung_server_fails_after_the_timeout(smtp_server: FakeSMTP) -> None:
    smtp_server.script = ["hang"]
    smtp_server.hang_s = 5.0

    with pytest.raises(SendError, match=r"^smtp server timed out$"):
        await plain(smtp_server.port, timeout_s=0.5).send(report())


@pytest.mark.parametrize(
    "overrides",
    [
        {"sender": "reports@example.com\r\nBcc: spy@evil.example"},
        {"recipients": ["alice@example.com", "bob@example.com\nBcc: spy@evil.example"]},
        {"recipients": []},
        {"username": USERNAME},
    ],
    ids=["sender-crlf", "recipient-lf", "no-recipient", "username-without-password"],
)
def test_a_misconfigured_sender_is_refused_at_construction(overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        plain(25, **overrides)


async def test_a_title_with_a_line_break_is_refused_and_nothing_is_sent(smtp_server: FakeSMTP) -> None:
    with pytest.raises(ValueError, match="line feed"):
        await plain(smtp_server.port).send(report(title="Daily\nBcc: spy@evil.example"))

    assert smtp_server.received == []


def test_check_header_value_names_the_forbidden_character() -> None:
    assert check_header_value("subject", "销售日报 2026-11-26") is None
    assert check_header_value("subject", "a\rb") == "subject must not contain a carriage return (CR)"
    assert check_header_value("subject", "a\nb") == "subject must not contain a line feed (LF)"
    assert check_header_value("subject", "a\0b") == "subject must not contain a NUL character"


@pytest.mark.parametrize(
    "address", ["alice@example.com", "Alice <alice@example.com>", "张三 <zhang.san@example.com.cn>"]
)
def test_check_address_accepts_one_address_with_or_without_a_name(address: str) -> None:
    assert check_address(address) is None


@pytest.mark.parametrize(
    "address",
    [
        "",
        "alice",
        "alice@",
        "@example.com",
        "alice@localhost",
        "al ice@example.com",
        "alice..b@example.com",
        "alice@example.com, bob@example.com",
        "alice@example.com>",
        "alice@example.com\r\nBcc: spy@evil.example",
    ],
)
def test_check_address_refuses_anything_but_one_sane_address(address: str) -> None:
    assert check_address(address) is not None
