"""Email destination over SMTP (aiosmtplib): a report as a plain-text mail, the file attached when the message
carries it; SMTP failures become `SendError` with a short reason and never the password.

Security is "none" (plain, never upgraded), "starttls" (required: a server without STARTTLS is a failure) or
"tls" (implicit TLS, usually port 465); certificates are checked against the system's roots unless a
`tls_context` is given (the tests trust their own CA that way). A header value with a line break (the
subject, the From address, a recipient, an attachment's file name) is refused with `ValueError`: at
construction for the addresses, when the mail is built for the rest; `check_header_value` and
`check_address` say why, for the destinations API's 422s. A mail that some recipients refused but others took
counts as sent: a retry would repeat it to those who have it, and the refused addresses need fixing instead.
"""

from __future__ import annotations

import re
import ssl
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formatdate, getaddresses, make_msgid
from typing import Literal

import aiosmtplib

from app.destinations.senders.base import Message, SendError

Security = Literal["none", "starttls", "tls"]

_FORBIDDEN = {"\r": "a carriage return (CR)", "\n": "a line feed (LF)", "\0": "a NUL character"}
_ATOM = r"[^\s@<>()\[\],;:\"\\.]+"
_ADDR_SPEC = re.compile(rf"^{_ATOM}(?:\.{_ATOM})*@{_ATOM}(?:\.{_ATOM})+$")
ADDRESS_MAX_CHARS = 254


def check_header_value(name: str, value: str) -> str | None:
    """Why `value` cannot go into the mail header `name` (a line break would start a forged header), or
    None."""
    for char, what in _FORBIDDEN.items():
        if char in value:
            return f"{name} must not contain {what}"
    return None


def check_address(addr: str) -> str | None:
    """Why `addr` is not one sane email address ("a@example.com" or "Name <a@example.com>"), or None."""
    reason = check_header_value("an email address", addr)
    if reason is not None:
        return reason
    if ":" in addr or ";" in addr:  # group syntax ("Bcc: x@evil.test;") would smuggle in more addresses
        return "must be exactly one email address (no group syntax)"
    pairs = getaddresses([addr])
    if len(pairs) != 1 or not pairs[0][1]:
        return "must be exactly one email address"
    display_name, spec = pairs[0]
    if len(spec) > ADDRESS_MAX_CHARS or not _ADDR_SPEC.match(spec):
        return "is not a valid email address (expected local@domain.tld)"
    try:
        Address(display_name=display_name, addr_spec=spec)
    except (ValueError, IndexError, HeaderParseError):
        return "is not a valid email address"
    return None


def _address_spec(addr: str) -> str:
    return getaddresses([addr])[0][1]


def _refuse_header(name: str, value: str) -> None:
    reason = check_header_value(name, value)
    if reason is not None:
        raise ValueError(reason)


def build_mail(message: Message, sender: str, recipients: list[str]) -> EmailMessage:
    """The mail for `message`: subject = title, text body, the attachment if any. `ValueError` on a header
    value with a line break."""
    _refuse_header("the subject", message.title)
    mail = EmailMessage()
    mail["Subject"] = message.title
    mail["From"] = sender
    mail["To"] = ", ".join(recipients)
    mail["Date"] = formatdate(usegmt=True)
    mail["Message-ID"] = make_msgid(domain=_address_spec(sender).rpartition("@")[2])
    mail.set_content(message.text)
    if message.attachment is not None:
        attachment = message.attachment
        _refuse_header("the attachment's file name", attachment.filename)
        bare_type = attachment.content_type.split(";")[0].strip().lower()  # parameters (charset) dropped
        maintype, _, subtype = bare_type.partition("/")
        if not re.fullmatch(r"[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+", bare_type):
            maintype, subtype = "application", "octet-stream"
        mail.add_attachment(attachment.data, maintype=maintype, subtype=subtype, filename=attachment.filename)
    return mail


def _reason(exc: aiosmtplib.SMTPException) -> str:
    """A short, secret-free description of an SMTP failure."""
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
        return f"smtp authentication failed ({exc.code})"
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        codes = sorted({str(r.code) for r in exc.recipients})
        return f"smtp server refused every recipient ({', '.join(codes)})"
    if isinstance(exc, aiosmtplib.SMTPTimeoutError):
        return "smtp server timed out"
    if isinstance(exc, aiosmtplib.SMTPConnectError):
        cause = exc.__cause__
        return "smtp server unreachable" + (f": {type(cause).__name__}" if cause is not None else "")
    if isinstance(exc, aiosmtplib.SMTPServerDisconnected):
        return "smtp server disconnected"
    if isinstance(exc, aiosmtplib.SMTPNotSupported):
        return f"smtp server lacks a needed extension: {str(exc.message)[:200]}"
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return f"smtp server answered {exc.code}: {str(exc.message)[:200]}"
    return f"smtp failed: {str(exc.message)[:200]}"


class EmailSender:
    kind = "email"

    def __init__(
        self,
        host: str,
        port: int,
        security: Security,
        username: str | None,
        password: str | None,
        sender: str,
        recipients: list[str],
        timeout_s: float = 10.0,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        if security not in ("none", "starttls", "tls"):
            raise ValueError("security must be none, starttls or tls")
        if bool(username) != bool(password):
            raise ValueError("username and password go together")
        if not recipients:
            raise ValueError("at least one recipient is needed")
        for label, addr in (("the sender", sender), *(("a recipient", r) for r in recipients)):
            reason = check_address(addr)
            if reason is not None:
                raise ValueError(f"{label} {reason}")
        self._host, self._port, self._security = host, port, security
        self._username, self._password = username or None, password or None
        self._sender, self._recipients = sender, list(recipients)
        self._timeout_s = timeout_s
        self._tls_context = tls_context

    def _safe(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    async def send(self, message: Message) -> None:
        """Accepted by the server for at least one recipient, or `SendError`. `ValueError` when the message
        cannot become a mail (a line break in its title): retrying will not help."""
        mail = build_mail(message, self._sender, self._recipients)
        try:
            await aiosmtplib.send(
                mail,
                sender=_address_spec(self._sender),
                recipients=[_address_spec(r) for r in self._recipients],
                hostname=self._host,
                port=self._port,
                username=self._username,
                password=self._password,
                use_tls=self._security == "tls",
                start_tls=self._security == "starttls",
                tls_context=self._tls_context,
                timeout=self._timeout_s,
            )
        except aiosmtplib.SMTPException as exc:
            raise SendError(self._safe(_reason(exc))) from None
        except ssl.SSLError as exc:
            raise SendError(f"smtp tls failed: {type(exc).__name__}") from None
        except OSError as exc:
            raise SendError(f"smtp server unreachable: {type(exc).__name__}") from None
