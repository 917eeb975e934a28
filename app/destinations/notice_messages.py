"""What a notice digest says: one notice reads as its own message; several are one message naming each with
all its facts, split into as many as a robot's size limit needs (never cut), one for email and webhooks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from app.destinations.messages import notice_message
from app.destinations.senders.base import Message
from app.destinations.senders.wecom import MARKDOWN_MAX_BYTES, cut_utf8
from app.models import ReportDelivery

# What one message may hold, in UTF-8 bytes of its markdown with its title as the sender heads it: WeCom's
# markdown limit, DingTalk's (about 20 kB) and a Feishu card's (about 30 kB) with room for the mentions.
# Email and the webhook carry a digest whole.
MESSAGE_MAX_BYTES = {"wecom": MARKDOWN_MAX_BYTES, "dingtalk": 15_000, "feishu": 15_000}
VALUE_MAX_CHARS = 500  # a fact longer than this is shortened, so that any one notice fits any message


def _entry(row: ReportDelivery) -> tuple[str, list[tuple[str, str]]]:
    title = str(row.facts.get("title", row.event))
    lines = [(str(k), str(v)) for k, v in row.facts.get("lines", [])]
    return title, [(k, v if len(v) <= VALUE_MAX_CHARS else v[: VALUE_MAX_CHARS - 1] + "…") for k, v in lines]


def _title(rows: Sequence[ReportDelivery], part: int, parts: int) -> str:
    kinds = ", ".join(f"{n} {event}" for event, n in sorted(Counter(r.event for r in rows).items()))
    title = f"{len(rows)} owner notices ({kinds})"
    return f"{title}, part {part} of {parts}" if parts > 1 else title


def _document(row: ReportDelivery) -> dict[str, Any]:
    title, lines = _entry(row)
    return {
        "notice": row.event,
        "subject": row.subject,
        "job_id": row.job_id,
        "schedule_id": row.schedule_id,
        "title": title,
        "facts": dict(lines),
    }


def _message(rows: Sequence[ReportDelivery], title: str, digest_id: str) -> Message:
    blocks = [_entry(row) for row in rows]
    markdown = f"### {title}\n\n" + "\n\n".join(
        f"**{one}**\n" + "\n".join(f"- **{k}**: {v}" for k, v in lines) for one, lines in blocks
    )
    text = f"{title}\n\n" + "\n\n".join(
        one + "\n" + "\n".join(f"{k}: {v}" for k, v in lines) for one, lines in blocks
    )
    document = {"notice": "digest", "digest_id": digest_id, "notices": [_document(r) for r in rows]}
    return Message(title, markdown, text, document=document)


def _size(message: Message) -> int:
    """The bytes a robot gets: the title as a heading over the markdown (as the WeCom sender posts it)."""
    return len(f"## {message.title}\n\n{message.markdown}".encode())


def digest_messages(rows: Sequence[ReportDelivery], kind: str, digest_id: str) -> list[Message]:
    return [message for message, _ in digest_parts(rows, kind, digest_id)]


def digest_parts(
    rows: Sequence[ReportDelivery], kind: str, digest_id: str
) -> list[tuple[Message, list[str]]]:
    """The messages of a digest's notices (oldest first), each with the ids of the notices it carries, the
    same for every try of it: one notice as its own message; else every notice with all its facts, packed
    in order into messages within the kind's limit (each notice whole in one of them)."""
    if len(rows) == 1:
        return [(notice_message(rows[0]), [rows[0].id])]
    limit = MESSAGE_MAX_BYTES.get(kind)
    if limit is None:
        return [(_message(rows, _title(rows, 1, 1), digest_id), [row.id for row in rows])]
    # Packed under the longest title any part can have (every notice's kinds and counts, the largest part
    # numbers), which a message carries twice: the sender's heading and the markdown's own.
    worst = _title(rows, len(rows), len(rows))
    groups: list[list[ReportDelivery]] = [[]]
    for row in rows:
        candidate = [*groups[-1], row]
        if groups[-1] and _size(_message(candidate, worst, digest_id)) > limit:
            groups.append([row])
        else:
            groups[-1] = candidate
    return [
        (_fitted(_message(g, _title(g, i, len(groups)), digest_id), limit), [row.id for row in g])
        for i, g in enumerate(groups, 1)
    ]


def _fitted(message: Message, limit: int) -> Message:
    """A message of one notice still over the limit (a notice of many long facts) is cut, as a single
    notice's message is; never one of several notices (they are packed to fit under the worst title)."""
    if _size(message) <= limit:
        return message
    head = len(f"## {message.title}\n\n".encode())
    markdown = cut_utf8(message.markdown, limit - head - 4) + "\n…"
    return Message(message.title, markdown, message.text, document=message.document)
