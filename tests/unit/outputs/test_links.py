"""Signed download links (app/outputs/links.py): a link verifies until its expiry, any changed part is
refused as tampered, an expired one as expired; the absolute link and the settings behind it."""

from __future__ import annotations

import string
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from app.core.config import Settings
from app.outputs.links import (
    DEV_LINK_SECRET,
    LinkExpired,
    LinkSecretMissing,
    LinkTampered,
    link_secret,
    public_link,
    redact_signature,
    sign_link,
    verify_link,
)

SECRET = "unit-test-link-secret"
JOB_ID = "01JD3Z7Q8J5Q0V6W2XKX4N9M1B"
FILENAME = f"demo-{JOB_ID}.csv"
NOW_S = 1_800_000_000
EXP_S = NOW_S + 3600
LINK_CHARS = string.ascii_letters + string.digits + "-_.=+/ "


def parts(link: str) -> dict[str, str]:
    """A link's job id, file name, exp and sig, as the route receives them."""
    url = urlsplit(link)
    _, prefix, job_id, filename = url.path.split("/")
    assert prefix == "d"
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    return {
        "job_id": unquote(job_id),
        "filename": unquote(filename),
        "exp": query["exp"],
        "sig": query["sig"],
    }


def check(part: dict[str, str], secret: str | None = SECRET, now_s: float = NOW_S) -> None:
    verify_link(part["job_id"], part["filename"], part["exp"], part["sig"], secret, now_s)


def test_a_signed_link_verifies_until_its_expiry_and_names_the_job_and_file() -> None:
    link = sign_link(JOB_ID, FILENAME, EXP_S, SECRET)
    assert link.startswith(f"/d/{JOB_ID}/{FILENAME}?exp={EXP_S}&sig=")
    part = parts(link)
    assert len(part["sig"]) == 43 and "=" not in part["sig"]
    check(part)
    check(part, now_s=EXP_S - 0.001)


def test_a_link_is_expired_from_its_expiry_second_on() -> None:
    part = parts(sign_link(JOB_ID, FILENAME, EXP_S, SECRET))
    for now_s in (EXP_S, EXP_S + 1, EXP_S + 10**6):
        with pytest.raises(LinkExpired):
            check(part, now_s=now_s)


def test_a_changed_expiry_is_tampered_not_expired_even_when_it_lies_in_the_past() -> None:
    part = parts(sign_link(JOB_ID, FILENAME, EXP_S, SECRET))
    for exp in (str(EXP_S + 86400), str(NOW_S - 1), f"0{EXP_S}", f"+{EXP_S}", f" {EXP_S}", "", "x"):
        with pytest.raises(LinkTampered):
            check({**part, "exp": exp})


@pytest.mark.parametrize("missing", ["exp", "sig"])
def test_a_link_without_its_expiry_or_signature_is_tampered(missing: str) -> None:
    part: dict[str, Any] = parts(sign_link(JOB_ID, FILENAME, EXP_S, SECRET))
    part[missing] = None
    with pytest.raises(LinkTampered):
        check(part)


def test_a_link_signed_with_another_secret_or_checked_without_one_is_tampered() -> None:
    part = parts(sign_link(JOB_ID, FILENAME, EXP_S, "another-secret"))
    with pytest.raises(LinkTampered):
        check(part)
    with pytest.raises(LinkTampered):
        check(parts(sign_link(JOB_ID, FILENAME, EXP_S, SECRET)), secret=None)


def test_a_signature_with_non_ascii_characters_is_tampered_not_an_error() -> None:
    part = parts(sign_link(JOB_ID, FILENAME, EXP_S, SECRET))
    with pytest.raises(LinkTampered):
        check({**part, "sig": "é" + part["sig"][1:]})
    with pytest.raises(LinkTampered):
        check({**part, "filename": "é.csv"})


def test_a_job_id_or_file_name_with_a_line_break_is_neither_signed_nor_accepted() -> None:
    """The line breaks separate the signed parts: no part may carry one, so none can move across them."""
    for job_id, filename in ((JOB_ID, "a\nb.csv"), (f"{JOB_ID}\na", "b.csv")):
        with pytest.raises(ValueError):
            sign_link(job_id, filename, EXP_S, SECRET)
    part = parts(sign_link(JOB_ID, "b.csv", EXP_S, SECRET))
    with pytest.raises(LinkTampered):
        check({**part, "job_id": f"{JOB_ID}\nb.csv", "filename": ""})


@st.composite
def one_char_changes(draw: st.DrawFn) -> tuple[str, str]:
    """Which part of a link to change, and that part changed in one character (replaced, added, dropped)."""
    link = sign_link(JOB_ID, FILENAME, EXP_S, SECRET)
    name = draw(st.sampled_from(["job_id", "filename", "exp", "sig"]))
    value = parts(link)[name]
    kind = draw(st.sampled_from(["replace", "insert", "delete"]))
    at = draw(st.integers(0, len(value) - (0 if kind == "insert" else 1)))
    if kind == "delete":
        return name, value[:at] + value[at + 1 :]
    char = draw(st.sampled_from(LINK_CHARS).filter(lambda c: kind == "insert" or c != value[at]))
    if kind == "insert":
        return name, value[:at] + char + value[at:]
    return name, value[:at] + char + value[at + 1 :]


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(one_char_changes())
def test_any_one_char_change_of_job_id_filename_exp_or_sig_is_refused(change: tuple[str, str]) -> None:
    name, value = change
    part = parts(sign_link(JOB_ID, FILENAME, EXP_S, SECRET))
    assert part[name] != value
    with pytest.raises(LinkTampered):
        check({**part, name: value})


@given(
    job_id=st.text(LINK_CHARS, min_size=1, max_size=40),
    filename=st.text(LINK_CHARS, min_size=1, max_size=60),
    ttl_s=st.integers(1, 10**8),
)
@settings(max_examples=100, deadline=None, database=None)
def test_any_job_id_and_file_name_survive_the_url_and_verify(job_id: str, filename: str, ttl_s: int) -> None:
    check(parts(sign_link(job_id, filename, NOW_S + ttl_s, SECRET)))


def test_public_link_is_absolute_under_public_base_url_and_lives_delivery_link_ttl_s() -> None:
    config = Settings(public_base_url="https://reports.example.com/", download_link_secret=SECRET)
    link = public_link(JOB_ID, FILENAME, config, NOW_S + 0.9)
    assert link.startswith(f"https://reports.example.com/d/{JOB_ID}/{FILENAME}?exp={NOW_S + 7 * 86400}&sig=")
    check(parts(link))
    shorter = public_link(JOB_ID, FILENAME, config, NOW_S, ttl_s=60)
    assert parts(shorter)["exp"] == str(NOW_S + 60)
    with pytest.raises(ValueError):
        public_link(JOB_ID, FILENAME, config, NOW_S, ttl_s=0)


def test_without_a_secret_links_use_the_dev_secret_outside_production_and_none_in_production() -> None:
    assert link_secret(Settings(env="development")) == DEV_LINK_SECRET
    production = Settings(env="production", database_url="mysql+asyncmy://u:strong@db/reports")
    assert link_secret(production) is None
    with pytest.raises(LinkSecretMissing):
        public_link(JOB_ID, FILENAME, production, NOW_S)


def test_delivery_link_ttl_s_must_be_positive_and_a_placeholder_secret_is_refused_in_production() -> None:
    with pytest.raises(ValidationError):
        Settings(delivery_link_ttl_s=0)
    with pytest.raises(ValidationError, match="DOWNLOAD_LINK_SECRET"):
        Settings(
            env="production",
            database_url="mysql+asyncmy://u:strong@db/reports",
            download_link_secret="changeme",
        )


def test_redact_signature_hides_every_sig_in_a_logged_request_line() -> None:
    line = f'127.0.0.1 - "GET /d/{JOB_ID}/{FILENAME}?exp={EXP_S}&sig=abc-_DEF HTTP/1.1" 200'
    assert (
        redact_signature(line) == f'127.0.0.1 - "GET /d/{JOB_ID}/{FILENAME}?exp={EXP_S}&sig=*** HTTP/1.1" 200'
    )
    assert redact_signature("/d/a/b?sig=x&exp=1") == "/d/a/b?sig=***&exp=1"
