"""Settings for every process, read from the environment and `.env` (docs/reference/configuration.md is
generated from the fields' descriptions).

Times are seconds and may be fractional so tests can run the whole state machine quickly.
"""

from __future__ import annotations

import json
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.core.backoff import BackoffPolicy
from app.core.config_fields import CoreFields, NotifyFields, RuntimeFields
from app.core.config_http import HttpReportFields
from app.core.states import default_max_attempts

PLACEHOLDER_SECRETS = {"", "changeme", "change-me", "secret", "password", "xxx", "todo", "sec", "example"}
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


# ---- Delivery download links (issue 29): signed, expiring links that need no API key --------------------


class DeliveryLinkFields(BaseSettings):
    """The links a delivered report carries (app/outputs/links.py, served by app/jobs/link_routes.py)."""

    download_link_secret: SecretStr | None = Field(
        None,
        description="HMAC secret that signs the download links sent with delivered reports (`/d/{id}/{file}`,"
        " no API key needed). Unset: a fixed dev secret outside `ENV=production`; in production no link is"
        " made (and none is served) until it is set. Changing it revokes every link given out",
    )
    delivery_link_ttl_s: int = Field(
        7 * 86400,
        gt=0,
        description="How long a delivered download link works (whole seconds); past it the link answers"
        " `410`. The link's host is `PUBLIC_BASE_URL`",
    )

    @model_validator(mode="after")
    def _refuse_placeholder_link_secret(self) -> DeliveryLinkFields:
        env = str(getattr(self, "env", "")).lower()
        secret = self.download_link_secret
        if (
            env == "production"
            and secret is not None
            and secret.get_secret_value().lower() in (PLACEHOLDER_SECRETS)
        ):
            raise ValueError("DOWNLOAD_LINK_SECRET looks like a placeholder; refusing to start in production")
        return self


# ---- end of delivery download links ----------------------------------------------------------------------


# ---- Declared report types (issue 30): report types from a file, SQL reports over read-only sources ------


class DeclaredTypeFields(BaseSettings):
    """Report types declared in a TOML file instead of Python (app/reports/declared)."""

    report_types_file: Path | None = Field(
        None,
        description='TOML file declaring report types without Python (`kind = "sql"`, …). Empty or unset:'
        " none. Every process reads it at start, again when it changes and on `SIGHUP`; a broken file keeps"
        " the types last loaded. See [Reports without Python](how-to/reports-without-python.md)",
    )
    report_types_poll_s: float = Field(
        5.0,
        ge=0,
        description="How often each process looks at `REPORT_TYPES_FILE`'s modification time and size (a"
        " `stat`, no read unless they changed); `0`: only at start and on `SIGHUP`",
    )
    data_sources: Annotated[dict[str, SecretStr], NoDecode] = Field(
        default_factory=dict,
        description='JSON object `{"name": "SQLAlchemy async URL"}`: the read-only databases SQL report types'
        ' name in `source`, e.g. `{"dw": "mysql+asyncmy://ro:pw@dw/sales", "local":'
        ' "sqlite+aiosqlite:///./var/reports.db"}`. Connections are opened read-only (MySQL `SET SESSION'
        " TRANSACTION READ ONLY`, SQLite `mode=ro` and `query_only`); give them a read-only user as well",
    )
    sql_report_max_rows: int = Field(
        10_000_000,
        gt=0,
        description="Most rows any SQL report may return (a type's `max_rows` may only be lower); past it the"
        " job fails permanently instead of writing a truncated file",
    )

    @field_validator("report_types_file", mode="before")
    @classmethod
    def _empty_file_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("data_sources", mode="before")
    @classmethod
    def _parse_sources(cls, value: object) -> object:
        if isinstance(value, str):
            parsed = json.loads(value) if value.strip() else {}
            if not isinstance(parsed, dict):
                raise ValueError("DATA_SOURCES must be a JSON object of name → URL")
            return parsed
        return value


# ---- end of declared report types ------------------------------------------------------------------------


class Settings(
    HttpReportFields, DeclaredTypeFields, DeliveryLinkFields, RuntimeFields, NotifyFields, CoreFields
):
    """Every setting (the fields, by topic, in app/core/config_fields.py: their descriptions are the docs'
    configuration table, links relative to docs/), parsed and checked."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False)

    @field_validator("retry_delays_s", "callback_retry_delays_s", mode="before")
    @classmethod
    def _parse_delays(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            parsed = json.loads(text) if text.startswith("[") else [p for p in text.split(",") if p.strip()]
            return [float(p) for p in parsed]
        return value

    @field_validator("callback_tenant_secrets", "report_type_max_concurrency", mode="before")
    @classmethod
    def _parse_secret_map(cls, value: object) -> object:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    @field_validator("report_modules", "callback_allowed_hosts", mode="before")
    @classmethod
    def _parse_modules(cls, value: object) -> object:
        if isinstance(value, str):
            return [m.strip() for m in value.split(",") if m.strip()]
        return value

    @field_validator("output_storage")
    @classmethod
    def _storage_url(cls, value: str) -> str:
        value = value.strip()
        if value == "local" or re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,62}(/[^?#]*)?", value):
            return value.rstrip("/")
        raise ValueError("OUTPUT_STORAGE must be 'local' or 's3://bucket[/prefix]'")

    @field_validator("report_type_max_concurrency")
    @classmethod
    def _caps_positive(cls, value: dict[str, int]) -> dict[str, int]:
        if any(cap < 1 for cap in value.values()):
            raise ValueError("REPORT_TYPE_MAX_CONCURRENCY caps must be >= 1")
        return value

    @field_validator("retry_delays_s", "callback_retry_delays_s")
    @classmethod
    def _delays_non_negative(cls, value: list[float]) -> list[float]:
        if any(d < 0 for d in value):
            raise ValueError("retry delays must be >= 0")
        return value

    @model_validator(mode="after")
    def _refuse_placeholders_in_production(self) -> Settings:
        if self.env.lower() != "production":
            return self
        if self.dingtalk_secret is not None and self.dingtalk_secret.get_secret_value().lower() in (
            PLACEHOLDER_SECRETS
        ):
            raise ValueError("DINGTALK_SECRET looks like a placeholder; refusing to start in production")
        for name in ("feishu_secret", "alert_webhook_secret", "attempt_token_secret"):
            value: SecretStr | None = getattr(self, name)
            if value is not None and value.get_secret_value().lower() in PLACEHOLDER_SECRETS:
                raise ValueError(f"{name.upper()} looks like a placeholder; refusing to start in production")
        secrets = [self.callback_secret, *self.callback_tenant_secrets.values()]
        if any(s is not None and s.get_secret_value().lower() in PLACEHOLDER_SECRETS for s in secrets):
            raise ValueError("a CALLBACK secret looks like a placeholder; refusing to start in production")
        url = self.database_url.get_secret_value()
        if url.startswith("sqlite"):
            raise ValueError("DATABASE_URL must point at MySQL in production")
        for word in ("changeme", "change-me", ":password@", ":secret@"):
            if word in url:
                raise ValueError("DATABASE_URL has a placeholder password; refusing to start in production")
        return self

    @property
    def default_max_attempts(self) -> int:
        return default_max_attempts(self.retry_delays_s)

    @property
    def attempt_backoff(self) -> BackoffPolicy:
        """Waits between a job's attempts (RETRY_DELAYS_S)."""
        return BackoffPolicy.listed(self.retry_delays_s)

    @property
    def callback_backoff(self) -> BackoffPolicy:
        """Waits between completion-callback tries (CALLBACK_RETRY_DELAYS_S)."""
        return BackoffPolicy.listed(self.callback_retry_delays_s or [60.0])

    @property
    def delivery_backoff(self) -> BackoffPolicy:
        """Waits between a delivery's tries: DELIVERY_RETRY_MIN_S, doubling up to DELIVERY_RETRY_MAX_S."""
        return BackoffPolicy.doubling(self.delivery_retry_min_s, self.delivery_retry_max_s)

    @property
    def alert_backoff(self) -> BackoffPolicy:
        """Waits between alert-delivery tries: 1, 2, 4 … s up to ALERT_RETRY_MAX_S."""
        return BackoffPolicy.doubling(1.0, self.alert_retry_max_s)

    @property
    def heartbeat_interval_s(self) -> float:
        """Often enough that a live attempt is never mistaken for a lost one."""
        return max(0.05, min(self.stuck_after_s / 4, 10.0))

    @property
    def worker_live_for_s(self) -> float:
        """A process whose last announcement is older than this is gone (so within 2 heartbeats of dying)."""
        return 1.5 * self.worker_heartbeat_s

    @cached_property
    def object_store_options(self) -> tuple[tuple[str, object], ...]:
        """The OUTPUT_S3_* and OUTPUT_LINK_TTL_S values as a hashable tuple (the store is cached on it)."""
        secrets = {"output_s3_access_key_id", "output_s3_secret_access_key"}
        names = sorted(n for n in type(self).model_fields if n.startswith(("output_s3_", "output_link_")))
        values = {n: getattr(self, n) for n in names}
        return tuple(
            (n, v.get_secret_value() if n in secrets and v is not None else v) for n, v in values.items()
        )

    @property
    def effective_redis_url(self) -> str:
        return self.redis_url.get_secret_value() if self.redis_url else DEFAULT_REDIS_URL

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.get_secret_value().startswith("sqlite")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def reset_settings() -> None:
    """Forget the cached settings (tests change the environment between apps)."""
    get_settings.cache_clear()
