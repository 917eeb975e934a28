"""Settings for every process, read from the environment and `.env` (see the README's table).

Times are seconds and may be fractional so tests can run the whole state machine quickly.
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.core.backoff import BackoffPolicy
from app.core.states import default_max_attempts

PLACEHOLDER_SECRETS = {"", "changeme", "change-me", "secret", "password", "xxx", "todo", "sec", "example"}
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False)

    env: str = "development"
    database_url: SecretStr = SecretStr("sqlite+aiosqlite:///./var/reports.db")
    redis_url: SecretStr | None = None
    retry_delays_s: Annotated[list[float], NoDecode] = Field(default_factory=lambda: [10.0, 30.0, 60.0])
    job_timeout_s: float = Field(300.0, gt=0)
    stuck_after_s: float = Field(360.0, gt=0)
    scan_interval_s: float = Field(60.0, gt=0)
    # A schedule's latest fire that is at most this late still runs as on time; older ones are "missed".
    schedule_misfire_grace_s: float = Field(60.0, ge=0)
    dead_letter_ttl_s: float = Field(604800.0, gt=0)
    dead_letter_retention_s: float = Field(90 * 86400.0, gt=0)
    job_retention_s: float = Field(259200.0, gt=0)
    output_dir: Path = Path("./var/outputs")
    # "local" keeps report files in OUTPUT_DIR; "s3://bucket/prefix" puts them in an S3-compatible store, and
    # OUTPUT_DIR is then only each process's own scratch space (a report is spooled there, then uploaded).
    output_storage: str = "local"
    output_s3_endpoint_url: str | None = None  # unset: AWS_ENDPOINT_URL, else AWS itself
    output_s3_region: str | None = None  # unset: AWS_REGION / AWS_DEFAULT_REGION
    output_s3_access_key_id: SecretStr | None = None  # unset: AWS_ACCESS_KEY_ID (or the instance's role)
    output_s3_secret_access_key: SecretStr | None = None
    output_s3_path_style: bool | None = None  # unset: path-style exactly when an endpoint is set (MinIO)
    output_s3_timeout_s: float = Field(30.0, gt=0)  # connect timeout, and how long one request is retried
    # > 0: a download answers 307 to a presigned link valid this long; 0: the API streams the object itself.
    # Whole seconds up to S3's 7 days: a signature carries whole seconds (0.5 would sign a link already dead).
    output_link_ttl_s: int = Field(60, ge=0, le=604_800)
    dingtalk_webhook_url: SecretStr | None = None
    dingtalk_secret: SecretStr | None = None
    feishu_webhook_url: SecretStr | None = None
    feishu_secret: SecretStr | None = None
    alert_webhook_url: SecretStr | None = None
    alert_webhook_secret: SecretStr | None = None
    alert_max_per_minute: int = Field(20, gt=0)
    alert_rate_window_s: float = Field(60.0, gt=0)
    alert_coalesce_s: float = Field(1.0, ge=0)
    alert_timeout_s: float = Field(5.0, gt=0)
    alert_retry_max_s: float = Field(300.0, gt=0)
    public_base_url: str = "http://127.0.0.1:8000"
    callback_secret: SecretStr | None = None
    callback_tenant_secrets: Annotated[dict[str, SecretStr], NoDecode] = Field(default_factory=dict)
    callback_retry_delays_s: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: [60.0 * (2 * n + 1) for n in range(9)]
    )
    callback_max_attempts: int = Field(10, gt=0)
    callback_timeout_s: float = Field(10.0, gt=0)
    callback_allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    enable_demo_reports: bool = False
    report_modules: Annotated[list[str], NoDecode] = Field(default_factory=list)
    max_body_bytes: int = Field(65536, gt=0)
    max_params_depth: int = Field(8, gt=0)
    max_params_string_chars: int = Field(10_000, gt=0)
    max_params_items: int = Field(2_000, gt=0)
    submit_rate_limit_per_minute: int = Field(0, ge=0)
    idempotency_ttl_s: float = Field(86400.0, gt=0)
    api_key_cache_ttl_s: float = Field(2.0, ge=0)
    worker_max_jobs: int = Field(10, gt=0)
    worker_poll_delay_s: float = Field(0.5, gt=0)
    # Concurrent attempts of one worker process that start (or succeed) together share one transaction;
    # 1 turns group commit off.
    worker_group_commit_max_jobs: int = Field(64, ge=1, le=1000)
    worker_shutdown_grace_s: float = Field(30.0, ge=0)
    # Concurrent single submits of one API process share one transaction and one enqueue; 1 turns it off.
    api_group_commit_max_jobs: int = Field(64, ge=1, le=1000)
    # Fair share (app.fairshare): running jobs allowed per report type (JSON {"type": n}, over what the type
    # declares; `reportctl types set-cap` overrides both) and per tenant (0: no cap; per-tenant overrides
    # with `reportctl tenants set-cap`).
    report_type_max_concurrency: Annotated[dict[str, int], NoDecode] = Field(default_factory=dict)
    tenant_max_running: int = Field(0, ge=0)
    queue_name: str = "arq:queue"
    dead_letter_queue_name: str = "arq:dead-letters"
    db_pool_size: int = Field(10, gt=0)
    api_workers: int = Field(1, ge=0)  # uvicorn processes of `python -m app.serve`; 0 = one per core
    log_level: str = "INFO"
    console_secret: SecretStr | None = None
    console_session_ttl_s: float = Field(8 * 3600.0, gt=0)
    console_refresh_s: float = Field(3.0, gt=0)
    metrics_enabled: bool = True
    metrics_tenant_label: bool = True
    metrics_port: int = Field(0, ge=0, le=65535)
    metrics_cache_s: float = Field(5.0, ge=0)
    worker_heartbeat_s: float = Field(5.0, gt=0)
    log_json: bool = True

    @field_validator("retry_delays_s", "callback_retry_delays_s", mode="before")
    @classmethod
    def _parse_delays(cls, value: object) -> object:
        if isinstance(value, str):
            import json

            text = value.strip()
            parsed = json.loads(text) if text.startswith("[") else [p for p in text.split(",") if p.strip()]
            return [float(p) for p in parsed]
        return value

    @field_validator("callback_tenant_secrets", "report_type_max_concurrency", mode="before")
    @classmethod
    def _parse_secret_map(cls, value: object) -> object:
        if isinstance(value, str):
            import json

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
        for name in ("feishu_secret", "alert_webhook_secret"):
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
