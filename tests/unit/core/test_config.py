"""Settings parsing in app/config.py: backoff lists, production guards, secrets kept out of reprs.

Every Settings() here ignores `.env` (`_env_file=None`); environment changes go through monkeypatch.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from app.core.config import Settings

MYSQL_URL = "mysql+asyncmy://reports:s3cr3t-pw@db.internal:3306/reports"


def make(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Drop the variables other tests may have exported, so only what a test sets counts."""
    for name in ("ENV", "DATABASE_URL", "RETRY_DELAYS_S", "DINGTALK_SECRET", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_retry_delays_default_to_10_30_60_and_four_attempts(clean_env: pytest.MonkeyPatch) -> None:
    settings = make()
    assert settings.retry_delays_s == [10.0, 30.0, 60.0]
    assert settings.default_max_attempts == 4


def test_retry_delays_parse_a_json_list_from_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("RETRY_DELAYS_S", "[0.2, 0.4, 0.6]")
    settings = make()
    assert settings.retry_delays_s == [0.2, 0.4, 0.6]
    assert settings.default_max_attempts == 4


def test_retry_delays_parse_a_comma_list_from_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("RETRY_DELAYS_S", "1, 2.5,3")
    assert make().retry_delays_s == [1.0, 2.5, 3.0]


def test_retry_delays_accept_a_list_given_directly() -> None:
    assert make(retry_delays_s=[5, 6]).retry_delays_s == [5.0, 6.0]


@pytest.mark.parametrize("raw", ["[10, -1, 60]", "10,-1", "-0.5"])
def test_negative_retry_delay_is_rejected(clean_env: pytest.MonkeyPatch, raw: str) -> None:
    clean_env.setenv("RETRY_DELAYS_S", raw)
    with pytest.raises(ValidationError, match="retry delays must be >= 0"):
        make()


def test_negative_retry_delay_given_directly_is_rejected() -> None:
    with pytest.raises(ValidationError):
        make(retry_delays_s=[1, -2])


@pytest.mark.parametrize("raw", ["[1, 2", "a,b", '["x"]'])
def test_unparseable_retry_delays_are_a_validation_error(clean_env: pytest.MonkeyPatch, raw: str) -> None:
    clean_env.setenv("RETRY_DELAYS_S", raw)
    with pytest.raises(ValidationError):
        make()


@pytest.mark.parametrize("placeholder", ["changeme", "CHANGEME", "change-me", ""])
def test_production_refuses_a_placeholder_dingtalk_secret(placeholder: str) -> None:
    with pytest.raises(ValidationError, match="DINGTALK_SECRET"):
        make(env="production", database_url=MYSQL_URL, dingtalk_secret=placeholder)


def test_production_refuses_placeholder_dingtalk_secret_from_the_environment(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("ENV", "production")
    clean_env.setenv("DATABASE_URL", MYSQL_URL)
    clean_env.setenv("DINGTALK_SECRET", "changeme")
    with pytest.raises(ValidationError, match="DINGTALK_SECRET"):
        make()


def test_production_refuses_a_sqlite_database_url() -> None:
    with pytest.raises(ValidationError, match="MySQL"):
        make(env="production", database_url="sqlite+aiosqlite:///./var/reports.db")


def test_production_refuses_the_default_sqlite_database(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ENV", "production")
    with pytest.raises(ValidationError, match="MySQL"):
        make()


def test_production_refuses_a_placeholder_database_password() -> None:
    with pytest.raises(ValidationError, match="placeholder password"):
        make(env="production", database_url="mysql+asyncmy://app:changeme@db/reports")


def test_production_accepts_mysql_and_a_real_secret() -> None:
    settings = make(env="production", database_url=MYSQL_URL, dingtalk_secret="SEC0123456789abcdef")
    assert settings.env == "production"
    assert not settings.is_sqlite


def test_development_tolerates_placeholders_and_sqlite(clean_env: pytest.MonkeyPatch) -> None:
    settings = make(env="development", dingtalk_secret="changeme")
    assert settings.is_sqlite


def test_secrets_are_secretstr() -> None:
    settings = make(
        database_url=MYSQL_URL,
        redis_url="redis://:redis-pw@cache:6379/0",
        dingtalk_webhook_url="https://oapi.dingtalk.com/robot/send?access_token=tok-123",
        dingtalk_secret="SECabcdef",
    )
    for value in (
        settings.database_url,
        settings.redis_url,
        settings.dingtalk_webhook_url,
        settings.dingtalk_secret,
    ):
        assert isinstance(value, SecretStr)
    assert settings.database_url.get_secret_value() == MYSQL_URL
    assert settings.effective_redis_url == "redis://:redis-pw@cache:6379/0"


def test_repr_and_dump_of_settings_do_not_leak_secrets() -> None:
    settings = make(
        database_url=MYSQL_URL,
        redis_url="redis://:redis-pw@cache:6379/0",
        dingtalk_webhook_url="https://oapi.dingtalk.com/robot/send?access_token=tok-123",
        dingtalk_secret="SECabcdef",
    )
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        for secret in ("s3cr3t-pw", "redis-pw", "tok-123", "SECabcdef"):
            assert secret not in text


def test_fractional_times_are_accepted_for_fast_tests(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("STUCK_AFTER_S", "0.5")
    clean_env.setenv("JOB_TIMEOUT_S", "0.25")
    settings = make()
    assert settings.stuck_after_s == 0.5
    assert settings.job_timeout_s == 0.25


def test_max_body_bytes_defaults_to_64k(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAX_BODY_BYTES", raising=False)
    assert make().max_body_bytes == 65536


@pytest.mark.parametrize("ttl", [0.5, 1.9, -1, 604_801])
def test_a_download_link_ttl_that_no_signature_can_carry_is_refused(ttl: float) -> None:
    """A presigned link carries whole seconds, at most S3's 7 days: 0.5 would sign a link already dead."""
    with pytest.raises(ValidationError, match="output_link_ttl_s"):
        make(output_link_ttl_s=ttl)


@pytest.mark.parametrize("ttl", [0, 1, 60, 604_800])
def test_a_download_link_ttl_of_whole_seconds_up_to_seven_days_is_accepted(ttl: int) -> None:
    assert make(output_link_ttl_s=ttl).output_link_ttl_s == ttl
