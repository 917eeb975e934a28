"""What every sender takes and how it fails: a rendered message (title, markdown, plain text, a link, maybe
the file itself) in, accepted or `SendError` out; the delivery outbox retries a failure with backoff.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Attachment:
    filename: str
    content_type: str
    data: bytes


@dataclass(frozen=True)
class Message:
    """One report (or notice) as a destination shows it. `markdown` for the robots, `text` for email
    bodies; `link` the key-free download link (already inside both), `attachment` the file for email when
    it is small enough."""

    title: str
    markdown: str
    text: str
    link: str | None = None
    attachment: Attachment | None = None
    document: dict[str, Any] | None = None  # the report's facts as data, for the webhook


class SendError(Exception):
    """The destination did not accept the message (unreachable, refused, an error code): retried later.
    The text is safe to store and show: it never contains a secret."""


class Sender(Protocol):
    async def send(self, message: Message) -> None: ...
