"""Settings of HTTP report types (`kind = "http"`): which private hosts they may call, the attempt tokens
their services report back with, and how large an uploaded report may be.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode


class HttpReportFields(BaseSettings):
    """HTTP report types (docs/how-to/http-reports.md)."""

    http_report_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Hosts, IPs or CIDRs an HTTP report type may call even though they are loopback/private"
        " (the SSRF guard), e.g. `reports.internal,10.0.0.0/8`. Kept apart from `CALLBACK_ALLOWED_HOSTS`:"
        " report URLs come from the operator's declarations, callback URLs from tenants. See"
        " [HTTP reports](how-to/http-reports.md)",
    )
    attempt_token_secret: SecretStr | None = Field(
        None,
        description="Signs the per-attempt tokens an asynchronous HTTP report's service reports back with"
        " (`/v1/attempt-callbacks/{token}/…`). Unset: a fixed dev secret outside `ENV=production`; in"
        " production asynchronous HTTP reports fail (permanently) until it is set. Give every API process and"
        " worker the same value; changing it revokes every token handed out",
    )
    attempt_upload_max_bytes: int = Field(
        512 * 1024 * 1024,
        gt=0,
        description="Largest report file an asynchronous HTTP report's service may upload to"
        " `/v1/attempt-callbacks/{token}/complete` (413 above)",
    )

    @field_validator("http_report_allowed_hosts", mode="before")
    @classmethod
    def _parse_hosts(cls, value: object) -> object:
        if isinstance(value, str):
            return [h.strip() for h in value.split(",") if h.strip()]
        return value
