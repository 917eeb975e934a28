"""A real local SMTP server (aiosmtpd, 127.0.0.1, a free port) that records every mail it accepts, for the
email destination's tests.

Optionally requires AUTH (one username and password) and STARTTLS, or speaks implicit TLS, with a certificate
for "localhost" from a throwaway CA (`client_tls_context()` trusts it); recipients in `refuse` are refused
(550), and `script` answers the next DATA commands with "451", "554" or "hang".
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Self, cast

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from devtools.servers.base import free_port
from tests.utils.tls import ThrowawayCA

USERNAME = "reports@example.com"
PASSWORD = "s3cret-Smtp-Pa55word"
HOSTNAME = "localhost"  # the name the certificate is for: connect to it, it resolves to 127.0.0.1


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    login: str | None
    tls: bool


@dataclass
class FakeSMTP:
    username: str | None = None
    password: str | None = None
    starttls: bool = False  # offer and require STARTTLS
    implicit_tls: bool = False  # TLS from the first byte (port 465 style)
    ca_directory: Path | None = None  # where the throwaway CA writes its files (needed for any TLS)
    refuse: set[str] = field(default_factory=set)
    script: list[str] = field(default_factory=list)  # answers for the next DATA: 451 | 554 | hang
    received: list[Received] = field(default_factory=list)
    logins: list[tuple[str, bool]] = field(default_factory=list)  # (login, succeeded)
    hang_s: float = 30.0

    def start(self) -> Self:
        tls: ssl.SSLContext | None = None
        if self.starttls or self.implicit_tls:
            assert self.ca_directory is not None, "TLS needs a directory for the throwaway CA"
            self.ca = ThrowawayCA(self.ca_directory)
            tls = self.ca.server_context(HOSTNAME)
        options: dict[str, Any] = {}
        if self.username is not None:
            options.update(authenticator=self._authenticate, auth_required=True)
        self.controller = Controller(
            self,
            hostname="127.0.0.1",
            port=free_port(),
            server_hostname=HOSTNAME,
            ready_timeout=10.0,
            ssl_context=tls if self.implicit_tls else None,
            tls_context=tls if self.starttls else None,
            require_starttls=self.starttls,
            auth_require_tls=self.starttls,
            **options,
        )
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    @property
    def port(self) -> int:
        return int(self.controller.port)

    def client_tls_context(self) -> ssl.SSLContext:
        """A client context that trusts this server's certificate (and nothing else)."""
        return ssl.create_default_context(cafile=str(self.ca.ca_file))

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        ok = login == self.username and password == self.password
        self.logins.append((login, ok))
        return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, rcpt_options: list[str]
    ) -> str:
        if address in self.refuse:
            return "550 5.1.1 mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        behaviour = self.script.pop(0) if self.script else "ok"
        if behaviour == "451":
            return "451 4.3.0 Requested action aborted: local error in processing"
        if behaviour == "554":
            return "554 5.7.1 Message rejected as spam"
        if behaviour == "hang":
            await asyncio.sleep(self.hang_s)
        raw = envelope.original_content or envelope.content
        assert isinstance(raw, bytes)
        message = cast(EmailMessage, email.message_from_bytes(raw, policy=email.policy.default))
        login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else None
        self.received.append(
            Received(
                mail_from=str(envelope.mail_from),
                rcpt_tos=list(envelope.rcpt_tos),
                message=message,
                login=login,
                tls=session.ssl is not None or self.implicit_tls,
            )
        )
        return "250 Message accepted for delivery"
