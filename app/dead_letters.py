"""Dead-letter alerting: turn a committed dead letter into one alert, recorded in MySQL.

Until the alerting issue lands, the alert is a structured log line; the sink interface comes with DingTalk.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from app.db import session_scope
from app.models import utcnow
from app.repository import Repository
from app.states import AlertStatus

log = logging.getLogger("app.alerts")


@dataclass(frozen=True)
class AlertOutcome:
    detail: str
    retry_in_s: float | None = None


async def alert(letter_id: str) -> AlertOutcome:
    async with session_scope() as session:
        repo = Repository(session)
        letter = await repo.get_dead_letter(letter_id)
        if letter is None:
            return AlertOutcome("no such dead letter")
        if letter.alert_status == AlertStatus.SENT:
            return AlertOutcome("already alerted")
        log.error(
            "dead letter",
            extra={
                "dead_letter_id": letter.id,
                "job_id": letter.job_id,
                "tenant": letter.tenant,
                "report_type": letter.report_type,
                "attempts": letter.attempts,
                "error": letter.error,
            },
        )
        await repo.mark_alert(letter.id, AlertStatus.SENT, utcnow())
    return AlertOutcome("alerted (log)")
