"""The settings' fields by topic, each with the description the docs' configuration table is generated
from (docs/reference/configuration.md); `app.core.config.Settings` puts them together and checks them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, NoDecode


class CoreFields(BaseSettings):
    """Where the data lives and how jobs retry, expire and are kept; where outputs go."""

    env: str = Field(
        "development",
        description="`production` refuses to start with a SQLite `DATABASE_URL`, a placeholder password in it"
        " (`changeme`, `change-me`, `:password@`, `:secret@`) or a placeholder `DINGTALK_SECRET`,"
        " `FEISHU_SECRET` or `ALERT_WEBHOOK_SECRET`",
    )
    database_url: SecretStr = Field(
        SecretStr("sqlite+aiosqlite:///./var/reports.db"),
        description="`mysql+asyncmy://user:pass@host/db` in production",
    )
    redis_url: SecretStr | None = Field(
        None,
        description="`redis://host:6379/0`. Unset: `make run` starts an embedded server; every other process"
        " falls back to `redis://127.0.0.1:6379/0`",
    )
    retry_delays_s: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: [10.0, 30.0, 60.0],
        description="Backoff between attempts: JSON list or comma-separated numbers. The default"
        " `max_attempts` is its length + 1 (4); past the end of the list the last delay repeats",
    )
    job_timeout_s: float = Field(
        300.0, gt=0, description="Default per-attempt time limit (a report type may set its own)"
    )
    stuck_after_s: float = Field(
        360.0,
        gt=0,
        description="A running job with no heartbeat for this long is declared lost (`LostWorker`). Workers"
        " heartbeat every `STUCK_AFTER_S / 4`, at most every 10 s",
    )
    scan_interval_s: float = Field(
        60.0,
        gt=0,
        description="How often the scheduler runs its tick (stuck scan, re-enqueue, alert re-publish, archive"
        " and purge, job retention)",
    )
    schedule_misfire_grace_s: float = Field(
        60.0,
        ge=0,
        description="A schedule fire at most this late (and at most half the schedule's period, but never"
        " less than 1 s) still runs as on time; later fires count as missed and follow the schedule's"
        " `missed_runs` policy",
    )
    dead_letter_ttl_s: float = Field(604800.0, gt=0, description="How long a dead letter stays unarchived")
    dead_letter_retention_s: float = Field(
        90 * 86400.0, gt=0, description="How long an archived dead letter is kept before it is deleted"
    )
    job_retention_s: float = Field(
        259200.0,
        gt=0,
        description="How long finished jobs, their attempts and output files are kept after `finished_at` (a"
        " dead job stays while it has a dead letter)",
    )
    output_dir: Path = Field(
        Path("./var/outputs"),
        description="Where report files are written. With `OUTPUT_STORAGE=local` the API serves them from"
        " there, so API and workers must share it; with an object store it is only each worker's local"
        " scratch space (a report is spooled there, uploaded, then removed)",
    )
    output_storage: str = Field(
        "local",
        description="`local` (files in `OUTPUT_DIR`) or `s3://bucket/prefix`: files in an S3-compatible store"
        " (AWS S3, MinIO, Aliyun OSS, Tencent COS), so workers on many machines need no shared disk. See"
        " [Report files in object storage](how-to/object-storage.md)",
    )
    output_s3_endpoint_url: str | None = Field(
        None,
        description="The store's endpoint (`http://minio:9000`, `https://oss-cn-hangzhou.aliyuncs.com`)."
        " Unset: `AWS_ENDPOINT_URL`, else AWS S3",
    )
    output_s3_region: str | None = Field(None, description="Unset: `AWS_REGION` / `AWS_DEFAULT_REGION`")
    output_s3_access_key_id: SecretStr | None = Field(
        None,
        description="The store's access key id. Unset: the standard `AWS_ACCESS_KEY_ID` /"
        " `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` (or the instance's role)",
    )
    output_s3_secret_access_key: SecretStr | None = Field(
        None,
        description="The secret of `OUTPUT_S3_ACCESS_KEY_ID`. Unset: the standard `AWS_ACCESS_KEY_ID` /"
        " `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` (or the instance's role)",
    )
    output_s3_path_style: bool | None = Field(
        None,
        description="`true`: path-style URLs (`endpoint/bucket/key`, MinIO); `false`: virtual-hosted"
        " (`bucket.endpoint/key`, AWS, OSS). Unset: path-style exactly when an endpoint is set",
    )
    output_s3_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Connect timeout of the store's client and how long one request is retried before the"
        " store counts as down",
    )
    # Whole seconds up to S3's 7 days: a signature carries whole seconds (0.5 would sign a link already dead).
    output_link_ttl_s: int = Field(
        60,
        ge=0,
        le=604_800,
        description="With an object store: `GET /v1/jobs/{id}/output` answers `307` to a presigned link valid"
        " this long (whole seconds, at most 604,800 = S3's 7 days). `0`: the API streams the object itself"
        " (when clients cannot reach the store)",
    )


class NotifyFields(BaseSettings):
    """Who hears about dead jobs (alerts) and finished ones (completion callbacks)."""

    dingtalk_webhook_url: SecretStr | None = Field(
        None,
        description="DingTalk robot webhook. With none of `DINGTALK_WEBHOOK_URL`, `FEISHU_WEBHOOK_URL`,"
        " `ALERT_WEBHOOK_URL` set (empty counts as unset), alerts are only logged",
    )
    dingtalk_secret: SecretStr | None = Field(
        None, description="The robot's signing secret (`SEC…`). Unset: requests are not signed"
    )
    feishu_webhook_url: SecretStr | None = Field(
        None,
        description="Feishu/Lark custom-bot webhook (`https://open.feishu.cn/open-apis/bot/v2/hook/…`);"
        " alerts go there as well as to every other configured sink",
    )
    feishu_secret: SecretStr | None = Field(
        None, description="The bot's signature-verification secret. Unset: requests are not signed"
    )
    alert_webhook_url: SecretStr | None = Field(
        None,
        description="Generic JSON webhook receiving alerts (`POST {title, markdown, job_ids, sent_at}`)",
    )
    alert_webhook_secret: SecretStr | None = Field(
        None,
        description="HMAC secret of the alert webhook's `X-Report-Signature` (same scheme as completion"
        " callbacks). Unset: no signature header",
    )
    alert_max_per_minute: int = Field(
        20,
        gt=0,
        description="Alert messages allowed per `ALERT_RATE_WINDOW_S`, for each sink separately (DingTalk"
        " allows 20 a minute per robot)",
    )
    alert_rate_window_s: float = Field(
        60.0, gt=0, description="The window of the `ALERT_MAX_PER_MINUTE` budget"
    )
    alert_coalesce_s: float = Field(
        1.0,
        ge=0,
        description="Pending alerts wait this long (from the oldest) so a burst goes out as one digest",
    )
    alert_timeout_s: float = Field(
        5.0, gt=0, description="HTTP timeout of one call to a sink (DingTalk, Feishu, webhook)"
    )
    alert_retry_max_s: float = Field(
        300.0, gt=0, description="Cap of the delivery retry backoff (1, 2, 4, 8 … s)"
    )
    public_base_url: str = Field(
        "http://127.0.0.1:8000",
        description="The API's address as others reach it: the replay `curl` lines of alerts, delivered"
        " download links, and the callback URLs an asynchronous HTTP report's service reports back to",
    )
    callback_secret: SecretStr | None = Field(
        None,
        description="HMAC secret that signs completion callbacks. Unset: a fixed dev secret outside"
        " `ENV=production`; in production a `callback_url` is refused (422) until a secret is set",
    )
    callback_tenant_secrets: Annotated[dict[str, SecretStr], NoDecode] = Field(
        default_factory=dict,
        description='JSON object `{"tenant": "secret"}`: per-tenant secrets, used instead of'
        " `CALLBACK_SECRET`",
    )
    callback_retry_delays_s: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: [60.0 * (2 * n + 1) for n in range(9)],
        description="Waits between callback tries (1, 3, 5 … minutes); the last repeats",
    )
    callback_max_attempts: int = Field(
        10, gt=0, description="Tries before a callback is given up (`callback.status = failed`)"
    )
    callback_timeout_s: float = Field(
        10.0, gt=0, description="HTTP timeout of one callback POST (no redirects are followed)"
    )
    callback_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Hosts, IPs or CIDRs allowed as callback targets even though they are loopback/private"
        " (SSRF guard), e.g. `127.0.0.1,10.0.0.0/8`",
    )
    # Report deliveries to destinations (app.destinations): robots, email, webhooks.
    delivery_max_attempts: int = Field(
        10, gt=0, description="Tries before a report's delivery to a destination is given up (`failed`)"
    )
    delivery_retry_min_s: float = Field(
        10.0, gt=0, description="Wait after a delivery's first failed try; doubles up to DELIVERY_RETRY_MAX_S"
    )
    delivery_retry_max_s: float = Field(600.0, gt=0, description="Longest wait between two delivery tries")
    slow_run_factor: float = Field(
        3.0, gt=1, description="A schedule's job is slow (owners told) past this times its type's recent p95"
    )
    slow_run_floor_s: float = Field(60.0, ge=0, description="… and past this many seconds")
    delivery_timeout_s: float = Field(
        10.0, gt=0, description="Timeout of one send (an HTTP call to a robot or webhook, an SMTP session)"
    )
    notice_coalesce_s: float = Field(
        10.0,
        ge=0,
        description="Owners' notices to one destination gather this long (from the first) and go out as one"
        " digest",
    )


class RuntimeFields(BaseSettings):
    """Report types, request limits, workers, caps, the console, metrics and logs."""

    enable_demo_reports: bool = Field(
        False, description="Registers `demo.csv`, `demo.sleep`, `demo.flaky` (`make run` turns it on)"
    )
    report_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated modules that register report types, e.g. `myreports.sales,myreports.hr`",
    )
    max_body_bytes: int = Field(65536, gt=0, description="Largest accepted request body (413 above)")
    max_params_depth: int = Field(
        8,
        gt=0,
        description="Deepest nesting accepted in `params` (422 above), checked before the type's schema",
    )
    max_params_string_chars: int = Field(
        10_000, gt=0, description="Longest string accepted anywhere in `params`"
    )
    max_params_items: int = Field(
        2_000, gt=0, description="Most values (all levels counted) accepted in `params`"
    )
    submit_rate_limit_per_minute: int = Field(
        0,
        ge=0,
        description="Submits per tenant per calendar minute (`0`: off), counted in Redis; over it"
        " `POST /v1/jobs` is 429 with `Retry-After`. Idempotent repeats don't count; if Redis is unreachable"
        " submits are allowed",
    )
    idempotency_ttl_s: float = Field(
        86400.0,
        gt=0,
        description="Least lifetime of an `Idempotency-Key`: a job holding one is not purged before this,"
        " even if `JOB_RETENTION_S` is shorter",
    )
    api_key_cache_ttl_s: float = Field(
        2.0,
        ge=0,
        description="The API caches key lookups this long, so a revoked key is refused within this many"
        " seconds; `0` disables",
    )
    worker_max_jobs: int = Field(10, gt=0, description="Concurrent jobs per report-worker process")
    worker_poll_delay_s: float = Field(
        0.5,
        gt=0,
        description="Fallback poll of an idle report worker. Workers are woken at once by a Redis message"
        " when a job is enqueued, and by a timer when a deferred job (retry backoff, `run_at`) comes due, so"
        " pickup takes milliseconds regardless",
    )
    worker_group_commit_max_jobs: int = Field(
        64,
        ge=1,
        le=1000,
        description="Most attempt starts (or successes) of one worker process that share one transaction"
        " ([group commit](discussions/architecture.md#group-commit)); `1` turns it off",
    )
    worker_shutdown_grace_s: float = Field(
        30.0,
        ge=0,
        description="On SIGTERM a report worker stops taking jobs and lets running attempts finish for this"
        " long (whole seconds); the rest are handed back to `pending` without using up an attempt",
    )
    api_group_commit_max_jobs: int = Field(
        64,
        ge=1,
        le=1000,
        description="Most concurrent single submits (`POST /v1/jobs`) of one API process that share one"
        " transaction and one enqueue ([group commit](discussions/architecture.md#group-commit)); `1` turns"
        " it off",
    )
    report_type_max_concurrency: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description='JSON object `{"report type": cap}`: at most that many jobs of the type running at once,'
        " counted across every worker on every machine (≥ 1). Overrides the type's declared"
        " `max_concurrency`; `PATCH /v1/report-types/{name}` (or `reportctl types set-cap`) overrides both."
        " See [Fair share](how-to/fair-share.md)",
    )
    tenant_max_running: int = Field(
        0,
        ge=0,
        description="At most this many jobs of one tenant running at once, across every worker (`0`: no cap);"
        " a tenant's own cap (`PATCH /v1/tenants/{tenant}`, `reportctl tenants set-cap`) overrides it",
    )
    queue_name: str = Field("arq:queue", description="Redis key of the main queue")
    dead_letter_queue_name: str = Field("arq:dead-letters", description="Redis key of the failed channel")
    db_pool_size: int = Field(
        10,
        gt=0,
        description="MySQL connection pool per process (plus as many overflow connections); not used for"
        " SQLite",
    )
    api_workers: int = Field(
        1,
        ge=0,
        description="API processes started by `python -m app.serve [uvicorn options]` (what `make run`,"
        " compose and the image run; `make run` and compose set `0`); `0` = one per core the process may use."
        " Migrations and bootstrap run once before (compose's `migrate`, `make run`'s launcher), never per"
        " process. Plain `uvicorn app.main:app` ignores it (one process unless `--workers`). With several"
        " processes their counters and histograms are kept in a temporary directory (prometheus-client's"
        " multiprocess mode, `PROMETHEUS_MULTIPROC_DIR`), so every `/metrics` answer, whichever process"
        " serves it, adds up all of them (the `process_*`/`python_*` series are left out there)",
    )
    log_level: str = Field("INFO", description="Log level of every process")
    console_secret: SecretStr | None = Field(
        None,
        description="Signs the console's session cookies. Set it (the same value everywhere) when more than"
        " one API process serves `/ui`: unset, each process signs with its own random secret, so a session"
        " opened on one is refused by the others and every restart signs everyone out",
    )
    console_session_ttl_s: float = Field(
        8 * 3600.0,
        gt=0,
        description="How long a console sign-in lasts (the cookie's `Max-Age` and the signature's age limit)",
    )
    console_refresh_s: float = Field(
        3.0, gt=0, description="How often each console page re-renders its live parts in place"
    )
    metrics_enabled: bool = Field(
        True,
        description="Count job metrics at all (`false`: `/metrics` has only the process metrics and the state"
        " gauges)",
    )
    metrics_tenant_label: bool = Field(
        True, description="Label job metrics by `tenant` (turn off with many tenants)"
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Port on which a worker, dead-letter consumer or scheduler serves its Prometheus metrics"
        " (`0`: off; `make run` gives each a free one); recorded in its worker-registry row",
    )
    metrics_cache_s: float = Field(
        5.0,
        ge=0,
        description="How long the API reuses its state gauges (MySQL/Redis reads) between scrapes",
    )
    worker_heartbeat_s: float = Field(
        5.0,
        gt=0,
        description="How often a worker, dead-letter consumer or scheduler refreshes its worker-registry row;"
        " one silent for 1.5 × this is listed as `gone` (so within 2 heartbeats of dying)",
    )
    log_json: bool = Field(
        True,
        description="JSON log lines on stderr (uvicorn's and arq's included); `false` (what `make run` sets)"
        " for one readable line per record, `extra` fields as `key=value`",
    )
