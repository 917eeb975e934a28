"""Wire shapes of /v1/destinations (one body per kind, told apart by `kind`; secrets write-only) and of a
job's `deliver_to` and deliveries.
"""

from __future__ import annotations

import urllib.parse
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.states import DeliveryStatus
from app.destinations.senders.email import check_address
from app.models import Destination, NotifyRoute, ReportDelivery

NAME_PATTERN = r"^[\w.\-]{1,100}$"
MOBILE = Annotated[str, Field(pattern=r"^\+?[0-9]{5,20}$")]
ADDRESS = Annotated[str, Field(min_length=3, max_length=254)]
ATTACH_MAX_BYTES = 25_000_000
# Per kind: the fields that are secrets (stored, used, never returned): robot URLs carry their access token.
SECRET_FIELDS: dict[str, frozenset[str]] = {
    "dingtalk": frozenset({"url", "secret"}),
    "feishu": frozenset({"url", "secret"}),
    "wecom": frozenset({"url"}),
    "email": frozenset({"password"}),
    "webhook": frozenset({"secret"}),
}


def no_line_breaks(value: str | None) -> str | None:
    """Header injection guard: CR or LF in anything that ends up in a mail header or a title."""
    if value is not None and ("\r" in value or "\n" in value):
        raise ValueError("must not contain line breaks")
    return value


def _address(value: str) -> str:
    """An email address a mail header can carry (no line breaks, one address, well formed)."""
    if (reason := check_address(value)) is not None:
        raise ValueError(reason)
    return value


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="Unique within the tenant; `deliver_to` may use it")


class DingTalkBody(_Body):
    kind: Literal["dingtalk"]
    url: str = Field(max_length=2000, pattern=r"^https?://", description="The robot's webhook (secret)")
    secret: str | None = Field(None, max_length=200, description="The robot's signing secret (secret)")
    at_mobiles: list[MOBILE] = Field(default_factory=list, max_length=20)
    at_all: bool = False


class FeishuBody(_Body):
    kind: Literal["feishu"]
    url: str = Field(max_length=2000, pattern=r"^https?://", description="The bot's webhook (secret)")
    secret: str | None = Field(None, max_length=200, description="The bot's signing secret (secret)")


class WeComBody(_Body):
    kind: Literal["wecom"]
    url: str = Field(max_length=2000, pattern=r"^https?://", description="The robot's webhook with its key")
    mentioned_mobiles: list[MOBILE] = Field(default_factory=list, max_length=20)
    mention_all: bool = False


class EmailBody(_Body):
    kind: Literal["email"]
    host: str = Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9.\-:\[\]]+$")
    port: int = Field(587, ge=1, le=65535)
    security: Literal["none", "starttls", "tls"] = "starttls"
    username: str | None = Field(None, max_length=255)
    password: str | None = Field(None, max_length=255, description="Secret")
    sender: ADDRESS = Field(description="The From address")
    recipients: list[ADDRESS] = Field(min_length=1, max_length=50)
    attach_max_bytes: int = Field(
        5_000_000, ge=0, le=ATTACH_MAX_BYTES, description="Larger files go as a link only; 0: always a link"
    )

    _lines = field_validator("username")(no_line_breaks)
    _sender = field_validator("sender")(lambda value: _address(value))

    @field_validator("recipients")
    @classmethod
    def _recipients(cls, value: list[str]) -> list[str]:
        return [_address(address) for address in value]


class WebhookBody(_Body):
    kind: Literal["webhook"]
    url: str = Field(max_length=2000, pattern=r"^https?://")
    secret: str = Field(min_length=16, max_length=200, description="Signs each POST like callbacks (secret)")


DestinationBody = Annotated[
    DingTalkBody | FeishuBody | WeComBody | EmailBody | WebhookBody, Field(discriminator="kind")
]


class DestinationPublic(BaseModel):
    id: str
    tenant: str
    name: str
    kind: str
    options: dict[str, Any] = Field(description="Every setting but the secrets")
    secrets_set: list[str] = Field(description="Which secrets are stored (their values are never returned)")
    url_host: str | None = Field(None, description="The host a robot's or webhook's URL points to")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: Destination) -> DestinationPublic:
        url = row.secrets.get("url") or row.options.get("url")
        return cls(
            id=row.id,
            tenant=row.tenant,
            name=row.name,
            kind=row.kind,
            options=row.options,
            secrets_set=sorted(k for k, v in row.secrets.items() if v),
            url_host=urllib.parse.urlsplit(url).hostname if url else None,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class DestinationPage(BaseModel):
    items: list[DestinationPublic]
    next_cursor: str | None


class DeliverTo(BaseModel):
    """One destination of a job or a schedule, with this use's own options."""

    model_config = ConfigDict(extra="forbid")

    destination: str = Field(min_length=1, max_length=100, description="A destination's id or name")
    recipients: list[ADDRESS] = Field(
        default_factory=list, max_length=50, description="Email: extra recipients for this use"
    )
    title: str | None = Field(
        None,
        max_length=200,
        description="Message title; `$report_type`, `$tenant`, `$schedule`, `$period`, `$job_id` filled in",
    )
    skip_when_empty: bool = Field(False, description="Send nothing when the report says it wrote no rows")

    _title = field_validator("title")(no_line_breaks)

    @field_validator("recipients")
    @classmethod
    def _recipients(cls, value: list[str]) -> list[str]:
        return [_address(address) for address in value]


def as_requested(stored: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """A stored `deliver_to` (destination ids) as a request would name it again (a schedule's patch)."""
    return [
        {"destination": item["destination_id"], **{k: v for k, v in item.items() if k != "destination_id"}}
        for item in stored or []
    ]


class DeliveryPublic(BaseModel):
    id: str
    destination_id: str
    destination: str
    kind: str
    run: int
    status: DeliveryStatus
    tries: int
    last_error: str | None
    next_attempt_at: datetime | None
    sent_at: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, row: ReportDelivery) -> DeliveryPublic:
        return cls(
            id=row.id,
            destination_id=row.destination_id,
            destination=row.destination_name,
            kind=row.kind,
            run=row.run,
            status=row.status,
            tries=row.tries,
            last_error=row.last_error,
            next_attempt_at=row.next_attempt_at if row.status == DeliveryStatus.PENDING else None,
            sent_at=row.sent_at,
            created_at=row.created_at,
        )


class DeliveryList(BaseModel):
    items: list[DeliveryPublic]


class NotifyRouteCreate(BaseModel):
    """A tenant's standing order: its jobs (of one report type, or all) that die or run slow are told."""

    model_config = ConfigDict(extra="forbid")

    report_type: str | None = Field(None, min_length=1, max_length=100, description="None: every type")
    events: list[Literal["dead", "slow"]] = Field(min_length=1, max_length=2)
    notify_to: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        min_length=1, max_length=10, description="Destination names or ids of the tenant's own"
    )


class NotifyRoutePublic(BaseModel):
    id: str
    tenant: str
    report_type: str | None
    events: list[str]
    notify_to: list[str] = Field(description="Destination ids")
    created_at: datetime

    @classmethod
    def of(cls, row: NotifyRoute) -> NotifyRoutePublic:
        return cls(
            id=row.id,
            tenant=row.tenant,
            report_type=row.report_type,
            events=row.events,
            notify_to=row.destination_ids,
            created_at=row.created_at,
        )


class NotifyRouteList(BaseModel):
    items: list[NotifyRoutePublic]
