"""Renders dead letters as DingTalk-flavoured markdown: one letter in full, or a digest naming every job.

Every message carries the exact command and curl that replay what it names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.dead_letters.sinks.base import AlertMessage
from app.models import DeadLetter

ERROR_CHARS = 300
# DingTalk rejects markdown bodies over ~20 kB; stay well below.
MAX_MESSAGE_BYTES = 15_000


def _when(letter: DeadLetter) -> str:
    return letter.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _error(letter: DeadLetter) -> str:
    err = letter.error or {}
    text = f"{err.get('type', 'Error')}: {err.get('message', '')}".replace("\n", " ").replace("`", "'")
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


# job id → (ordering key, how many later jobs of that key wait for it)
Waiting = Mapping[str, tuple[str, int]]


def _waiting_line(letter: DeadLetter, waiting: Waiting) -> list[str]:
    key, count = waiting.get(letter.job_id, ("", 0))
    if not count:
        return []
    return [
        f"- **blocking**: {count} later job(s) with ordering key `{key}` wait until this one is replayed "
        "(or until they are cancelled)"
    ]


def render_one(letter: DeadLetter, base_url: str, waiting: Waiting | None = None) -> AlertMessage:
    text = "\n".join(
        [
            f"### Report job dead: {letter.report_type}",
            f"- **job**: `{letter.job_id}`",
            f"- **report type**: {letter.report_type}",
            f"- **tenant**: {letter.tenant}",
            f"- **attempts**: {letter.attempts}",
            f"- **last error**: `{_error(letter)}`",
            f"- **time**: {_when(letter)}",
            *_waiting_line(letter, waiting or {}),
            "",
            "Replay after fixing the cause:",
            "",
            f"`reportctl replay {letter.job_id}`",
            "",
            f'`curl -X POST -H "Authorization: Bearer $REPORTS_API_KEY" '
            f"{base_url}/v1/jobs/{letter.job_id}/replay`",
        ]
    )
    return AlertMessage(title=f"Report job dead: {letter.job_id}", markdown=text, job_ids=(letter.job_id,))


def render_digest(
    letters: Sequence[DeadLetter], base_url: str, waiting: Waiting | None = None
) -> list[AlertMessage]:
    """One or more digest messages that together name every job, each under MAX_MESSAGE_BYTES."""
    head = f"### {len(letters)} report jobs dead"
    tail = [
        "",
        "Replay one: `reportctl replay <job id>`; all of one type since a time:",
        "",
        f"`curl -X POST -H \"Authorization: Bearer $REPORTS_ADMIN_KEY\" -H 'Content-Type: application/json' "
        f'-d \'{{"report_type": "<type>", "since": "{_when(letters[0])[:10]}T00:00:00Z"}}\' '
        f"{base_url}/v1/dead-letters/replay`",
    ]
    messages: list[AlertMessage] = []
    lines: list[str] = []
    ids: list[str] = []
    budget = MAX_MESSAGE_BYTES - len("\n".join([head, *tail]).encode()) - 100
    for letter in letters:
        line = (
            f"- `{letter.job_id}` {letter.report_type} · tenant {letter.tenant} · "
            f"{letter.attempts} attempts · {_when(letter)} · `{_error(letter)[:120]}`"
        )
        if (waiting or {}).get(letter.job_id, ("", 0))[1]:
            key, count = (waiting or {})[letter.job_id]
            line += f" · blocks {count} job(s) of key `{key}`"
        if lines and len("\n".join([*lines, line]).encode()) > budget:
            messages.append(_digest(head, lines, tail, ids))
            lines, ids = [], []
        lines.append(line)
        ids.append(letter.job_id)
    if lines:
        messages.append(_digest(head, lines, tail, ids))
    return messages


def _digest(head: str, lines: list[str], tail: list[str], ids: list[str]) -> AlertMessage:
    return AlertMessage(
        title=f"{len(ids)} report jobs dead",
        markdown="\n".join([head, "", *lines, *tail]),
        job_ids=tuple(ids),
    )
