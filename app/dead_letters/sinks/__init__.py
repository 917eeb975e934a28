"""Alert sinks: where dead-letter alerts go (DingTalk, Feishu, a generic JSON webhook, or the log).

`build_sinks(settings)` returns every configured sink; each implements `AlertSink.send`. The dispatcher
delivers each alert to every sink with its own retries and budget; the log sink is used only when no
webhook sink is configured.
"""

from __future__ import annotations

from pydantic import SecretStr

from app.core.config import Settings
from app.dead_letters.sinks.base import AlertDeliveryError, AlertMessage, AlertSink
from app.dead_letters.sinks.dingtalk import DingTalkSink
from app.dead_letters.sinks.feishu import FeishuSink
from app.dead_letters.sinks.logsink import LogSink
from app.dead_letters.sinks.webhook import WebhookSink


def _value(secret: SecretStr | None) -> str | None:
    """A setting's value, or None when unset or empty."""
    value = secret.get_secret_value() if secret is not None else ""
    return value if value.strip() else None


def build_sinks(settings: Settings) -> list[AlertSink]:
    sinks: list[AlertSink] = []
    timeout_s = settings.alert_timeout_s
    if url := _value(settings.dingtalk_webhook_url):
        sinks.append(DingTalkSink(url, _value(settings.dingtalk_secret), timeout_s=timeout_s))
    if url := _value(settings.feishu_webhook_url):
        sinks.append(FeishuSink(url, _value(settings.feishu_secret), timeout_s=timeout_s))
    if url := _value(settings.alert_webhook_url):
        sinks.append(WebhookSink(url, _value(settings.alert_webhook_secret), timeout_s=timeout_s))
    return sinks or [LogSink()]


__all__ = [
    "AlertDeliveryError",
    "AlertMessage",
    "AlertSink",
    "DingTalkSink",
    "FeishuSink",
    "LogSink",
    "WebhookSink",
    "build_sinks",
]
