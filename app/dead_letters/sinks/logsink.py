"""The fallback sink when no webhook is configured: the alert becomes one structured ERROR log line."""

from __future__ import annotations

import logging

from app.dead_letters.sinks.base import AlertMessage

log = logging.getLogger("app.alerts")


class LogSink:
    name = "log"

    async def send(self, message: AlertMessage) -> None:
        log.error(
            "dead-letter alert: %s",
            message.title,
            extra={"job_ids": list(message.job_ids), "alert_markdown": message.markdown},
        )
