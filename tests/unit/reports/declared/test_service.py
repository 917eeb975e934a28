"""REPORT_TYPES_FILE in a running process: a change is picked up by the poll, SIGHUP reloads at once, a
broken file leaves the types in force (registry, status and metric say so)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.core.config import reset_settings
from app.core.metrics import get_metrics, reset_metrics
from app.reports.declared import declarations, start_watching
from app.reports.registry import registry
from tests.utils.declared import sql_type, sqlite_source, write_file


@pytest.fixture
def types_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[float], Path]]:
    url = sqlite_source(tmp_path / "local.db", rows=5)
    path = tmp_path / "types.toml"

    def configure(poll_s: float) -> Path:
        monkeypatch.setenv("DATA_SOURCES", f'{{"local": "{url}"}}')
        monkeypatch.setenv("REPORT_TYPES_FILE", str(path))
        monkeypatch.setenv("REPORT_TYPES_POLL_S", str(poll_s))
        reset_settings()
        reset_metrics()
        return path

    yield configure
    declarations.forget()
    reset_settings()


def one(name: str) -> str:
    return sql_type(name, "SELECT region FROM sales", source="local")


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def loads(result: str) -> float:
    value = get_metrics().registry.get_sample_value("reports_declaration_loads_total", {"result": result})
    return value or 0.0


async def test_a_broken_file_keeps_the_types_in_force_and_says_why(
    types_file: Callable[[float], Path],
) -> None:
    path = write_file(types_file(0), one("a") + one("b"))
    assert declarations.load_now() is True
    assert {t.name for t in registry.declared()} == {"a", "b"} and registry.get("a") is not None
    write_file(path, one("a") + one("b").replace("SELECT region", "SELECT nope"))
    assert declarations.load_now() is False
    assert {t.name for t in registry.declared()} == {"a", "b"}  # nothing taken away
    error = declarations.status.error
    assert error is not None and (error.type_name, error.field) == ("b", "sql") and error.line is not None
    assert "no such column: nope" in error.reason
    assert declarations.status.types == ["a", "b"] and (loads("ok"), loads("error")) == (1.0, 1.0)
    write_file(path, one("c"))  # fixed (and "a", "b" dropped): the new set replaces the old one whole
    assert declarations.load_now() is True
    assert [t.name for t in registry.declared()] == ["c"] and registry.get("a") is None
    assert declarations.status.error is None


async def test_an_unchanged_file_is_not_read_again(types_file: Callable[[float], Path]) -> None:
    write_file(types_file(0), one("a"))
    assert declarations.load_now() is True
    assert declarations.load_now() is None
    assert declarations.load_now(force=True) is True


async def test_the_poll_picks_up_a_changed_file(types_file: Callable[[float], Path]) -> None:
    path = write_file(types_file(0.05), one("a"))
    declarations.load_now()
    watch = start_watching(sighup=False)
    try:
        write_file(path, one("a") + one("b"))
        await until(lambda: registry.get("b") is not None)
    finally:
        await watch.stop()


async def test_sighup_reloads_at_once_without_polling(types_file: Callable[[float], Path]) -> None:
    path = write_file(types_file(0), one("a"))
    declarations.load_now()
    watch = start_watching()
    try:
        assert watch.sighup, "the handler must be installed before this test may send SIGHUP"
        write_file(path, one("z"))
        await asyncio.sleep(0.1)
        assert registry.get("z") is None  # no poll: nothing happens on its own
        os.kill(os.getpid(), signal.SIGHUP)
        await until(lambda: registry.get("z") is not None)
    finally:
        await watch.stop()
