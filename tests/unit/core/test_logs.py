"""Logging set-up: arq's two per-job INFO lines are not even built below DEBUG (one structured line per
terminal transition replaces them), its warnings still get through, and no line carries colour codes."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from app.core.config import get_settings
from app.core.logs import setup_logging


@pytest.fixture
def restored() -> Iterator[None]:
    root, arq_worker = logging.getLogger(), logging.getLogger("arq.worker")
    saved = (root.handlers[:], root.level, arq_worker.level)
    yield
    root.handlers[:], root.level = saved[0], saved[1]
    arq_worker.setLevel(saved[2])
    get_settings.cache_clear()


def test_arq_per_job_lines_are_not_built_below_debug(monkeypatch: pytest.MonkeyPatch, restored: None) -> None:
    monkeypatch.setenv("LOG_LEVEL", "INFO")
    get_settings.cache_clear()
    setup_logging("worker")
    arq_worker = logging.getLogger("arq.worker")
    assert not arq_worker.isEnabledFor(logging.INFO)
    assert arq_worker.isEnabledFor(logging.WARNING)
    assert logging.getLogger("app.attempts.service").isEnabledFor(logging.INFO)


def test_debug_shows_arq_per_job_lines(monkeypatch: pytest.MonkeyPatch, restored: None) -> None:
    monkeypatch.setenv("LOG_LEVEL", "DEBUG")
    get_settings.cache_clear()
    setup_logging("worker")
    assert logging.getLogger("arq.worker").isEnabledFor(logging.INFO)


@pytest.mark.parametrize("access_log", [True, False])
def test_uvicorns_access_log_goes_through_ours_unless_no_access_log_turned_it_off(
    access_log: bool, restored: None
) -> None:
    import uvicorn

    access = logging.getLogger("uvicorn.access")
    saved = (access.handlers[:], access.propagate)
    try:
        uvicorn.Config("app.main:app", access_log=access_log).configure_logging()
        setup_logging("api")
        assert access.handlers == []
        assert access.propagate is access_log  # through the root's JSON handler, or nowhere
        assert access.hasHandlers() is access_log  # what uvicorn checks before building each line
    finally:
        access.handlers[:], access.propagate = saved


@pytest.mark.parametrize("log_json", ["true", "false"])
def test_a_uvicorn_record_with_color_message_renders_without_escape_codes(
    log_json: str, monkeypatch: pytest.MonkeyPatch, restored: None
) -> None:
    monkeypatch.setenv("LOG_JSON", log_json)
    get_settings.cache_clear()
    setup_logging("api")
    # What uvicorn.Server logs when it starts: the plain message, and the coloured one as an extra.
    record = logging.getLogger("uvicorn.error").makeRecord(
        "uvicorn.error",
        logging.INFO,
        "server.py",
        103,
        "Started server process [%d]",
        (4242,),
        None,
        extra={"color_message": "Started server process [\x1b[36m%d\x1b[0m]", "job_id": "01J"},
    )
    line = logging.getLogger().handlers[0].format(record)
    assert "\x1b" not in line
    assert "color_message" not in line
    assert "Started server process [4242]" in line
    assert "job_id" in line  # other extras still show
