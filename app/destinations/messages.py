"""What a delivery says and who says it: the message of a finished report (title template, the facts, a
key-free signed download link, the file itself for email when small enough) and the sender of each kind.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from string import Template
from typing import Any
from zoneinfo import ZoneInfo

from app.core.config import Settings
from app.destinations.senders.base import Attachment, Message, Sender, SendError
from app.destinations.senders.email import EmailSender
from app.destinations.senders.robots import DingTalkSender, FeishuSender, WebhookSender
from app.destinations.senders.wecom import WeComSender
from app.models import Destination, ReportDelivery, ReportJob, Schedule
from app.outputs import get_output_store
from app.outputs.links import LinkSecretMissing, public_link

DEFAULT_TITLE = "$report_type is ready"


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def period_of(job: ReportJob, schedule: Schedule | None) -> str:
    """The fire's nominal time in the schedule's own zone, e.g. `2026-11-26 08:00 Asia/Shanghai`."""
    if job.scheduled_for is None:
        return ""
    zone = schedule.timezone if schedule is not None else "UTC"
    return f"{job.scheduled_for.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} {zone}"


def facts(job: ReportJob, schedule: Schedule | None) -> list[tuple[str, str]]:
    out = [("Report", job.report_type), ("Tenant", job.tenant)]
    if schedule is not None:
        out.append(("Schedule", schedule.name))
    if period := period_of(job, schedule):
        out.append(("Period", period))
    if job.output_filename:
        out.append(("File", f"{job.output_filename} ({human_size(job.output_size)})"))
    if job.output_rows is not None:
        out.append(("Rows", f"{job.output_rows:,}"))
    if job.finished_at is not None:
        out.append(("Finished", f"{job.finished_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"))
    return out


async def _attachment(job: ReportJob, limit_bytes: int) -> Attachment | None:
    """The file itself when it is at most `limit_bytes` and the store hands its bytes over."""
    if not job.output_path or job.output_size is None or job.output_size > limit_bytes:
        return None
    stored = await get_output_store().fetch(job.output_path)
    if stored is None:
        return None
    if stored.path is not None:
        data = stored.path.read_bytes()
    elif stored.chunks is not None:
        data = b"".join([chunk async for chunk in stored.chunks])
    else:
        return None
    content_type = job.output_content_type or "application/octet-stream"
    return Attachment(job.output_filename or "report.bin", content_type, data)


async def render(
    job: ReportJob, schedule: Schedule | None, row: ReportDelivery, target: Destination, settings: Settings
) -> Message:
    values = {
        "report_type": job.report_type,
        "tenant": job.tenant,
        "schedule": schedule.name if schedule is not None else "",
        "period": period_of(job, schedule),
        "job_id": job.id,
    }
    title = Template(row.overrides.get("title") or DEFAULT_TITLE).safe_substitute(values)
    link = expires = None
    if job.output_path and job.output_filename:
        now_s = int(time.time())
        try:
            link = public_link(job.id, job.output_filename, settings, now_s)
        except LinkSecretMissing as exc:
            raise SendError("no download link: DOWNLOAD_LINK_SECRET is not set") from exc
        expires = datetime.fromtimestamp(now_s + settings.delivery_link_ttl_s, UTC)
    lines = facts(job, schedule)
    markdown = f"### {title}\n\n" + "\n".join(f"- **{k}**: {v}" for k, v in lines)
    text = f"{title}\n\n" + "\n".join(f"{k}: {v}" for k, v in lines)
    if link is not None and expires is not None:
        until = f"{expires:%Y-%m-%d %H:%M} UTC"
        markdown += f"\n\n[Download]({link}) (the link works until {until})"
        text += f"\n\nDownload: {link}\nThe link works until {until}; no API key needed."
    attachment = None
    if target.kind == "email":
        attachment = await _attachment(job, int(target.options.get("attach_max_bytes", 0)))
        if attachment is not None:
            text += f"\n\nThe file is attached ({attachment.filename})."
    document: dict[str, Any] = {
        "job_id": job.id,
        "report_type": job.report_type,
        "tenant": job.tenant,
        "schedule_id": job.schedule_id,
        "scheduled_for": job.scheduled_for.isoformat() if job.scheduled_for else None,
        "output": {
            "filename": job.output_filename,
            "content_type": job.output_content_type,
            "size_bytes": job.output_size,
            "rows": job.output_rows,
        },
        "link_expires_at": expires.isoformat() if expires else None,
    }
    return Message(title, markdown, text, link=link, attachment=attachment, document=document)


def notice_message(row: ReportDelivery) -> Message:
    """An owners' notice as staged: its title and its facts."""
    title = str(row.facts.get("title", row.event))
    lines = [(str(k), str(v)) for k, v in row.facts.get("lines", [])]
    markdown = f"### {title}\n\n" + "\n".join(f"- **{k}**: {v}" for k, v in lines)
    text = f"{title}\n\n" + "\n".join(f"{k}: {v}" for k, v in lines)
    document = {"notice": row.event, "subject": row.subject, "job_id": row.job_id, "facts": dict(lines)}
    return Message(title, markdown, text, document={**document, "schedule_id": row.schedule_id})


def build_sender(target: Destination, settings: Settings, key: str, overrides: dict[str, Any]) -> Sender:
    """The sender of the destination's kind; email adds this use's extra recipients (`overrides`), the
    webhook's `Idempotency-Key` is `key` (the delivery's or the digest's id)."""
    opts, secrets = target.options, target.secrets
    if target.kind == "dingtalk":
        mobiles, at_all = opts.get("at_mobiles", []), opts.get("at_all", False)
        return DingTalkSender(secrets["url"], secrets.get("secret"), mobiles, at_all, settings)
    if target.kind == "feishu":
        return FeishuSender(secrets["url"], secrets.get("secret"), settings)
    if target.kind == "wecom":
        return WeComSender(
            secrets["url"],
            mentioned_mobiles=opts.get("mentioned_mobiles", []),
            mention_all=opts.get("mention_all", False),
            timeout_s=settings.delivery_timeout_s,
            settings=settings,
        )
    if target.kind == "email":
        return _email(target, overrides, settings)
    return WebhookSender(opts["url"], secrets["secret"], key, settings)


def _email(target: Destination, overrides: dict[str, Any], settings: Settings) -> Sender:
    opts, secrets = target.options, target.secrets
    try:
        return EmailSender(
            host=opts["host"],
            port=opts["port"],
            security=opts["security"],
            username=opts.get("username"),
            password=secrets.get("password"),
            sender=opts["sender"],
            recipients=list(dict.fromkeys([*opts["recipients"], *overrides.get("recipients", [])])),
            timeout_s=settings.delivery_timeout_s,
        )
    except ValueError as exc:  # a setting the sender refuses (a user without a password): never sendable
        raise SendError(f"email: {exc}") from exc
