"""Alert sinks: where dead-letter alerts go (DingTalk robot, or the log when no webhook is set).

`build_sinks(settings)` returns the configured sinks; each implements `AlertSink.send`.
"""

from __future__ import annotations

from app.alerts.base import AlertDeliveryError, AlertMessage, AlertSink
from app.alerts.dingtalk import DingTalkSink
from app.alerts.logsink import LogSink
from app.config import Settings


def build_sinks(settings: Settings) -> list[AlertSink]:
    sinks: list[AlertSink] = []
    if settings.dingtalk_webhook_url is not None:
        secret = settings.dingtalk_secret.get_secret_value() if settings.dingtalk_secret else None
        sinks.append(
            DingTalkSink(
                settings.dingtalk_webhook_url.get_secret_value(), secret, timeout_s=settings.alert_timeout_s
            )
        )
    return sinks or [LogSink()]


__all__ = ["AlertDeliveryError", "AlertMessage", "AlertSink", "DingTalkSink", "LogSink", "build_sinks"]
