"""The alert-sink interface: one rendered message in, delivered or `AlertDeliveryError` out.

DingTalk is one implementation; Feishu and generic webhooks plug in the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class AlertMessage:
    title: str
    markdown: str
    job_ids: tuple[str, ...]


class AlertDeliveryError(Exception):
    """The sink did not accept the message; the dispatcher retries it later with backoff."""


class AlertSink(Protocol):
    name: str

    async def send(self, message: AlertMessage) -> None: ...
