"""Output files (app/outputs and ReportContext.output): safe names, confined paths, atomic writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.outputs.base import safe_filename
from app.outputs.local import AtomicFile, attempt_dir, resolve_output
from app.reports.base import ReportContext

SAFE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# ---- safe_filename --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("../../etc/passwd", "passwd"),
        ("/etc/passwd", "passwd"),
        ("a/b\\c", "c"),
        ("..\\..\\windows\\system32\\cmd.exe", "cmd.exe"),
        ("report 2024 (final).csv", "report_2024_final.csv"),
        ("a\x00b.txt", "a_b.txt"),
        ("résumé.pdf", "r_sum.pdf"),
        (".hidden", "hidden"),
        ("plain-name_1.csv", "plain-name_1.csv"),
    ],
)
def test_safe_filename_strips_path_components_and_odd_characters(raw: str, expected: str) -> None:
    assert safe_filename(raw) == expected


@pytest.mark.parametrize("raw", ["報告.csv", "📊 data.json", "ﬁle\u202e.txt"])
def test_safe_filename_turns_unicode_into_a_plain_ascii_name(raw: str) -> None:
    name = safe_filename(raw)
    assert SAFE.match(name), name
    assert name.isascii()


@pytest.mark.parametrize("raw", ["", ".", "..", "../", "/", "...", "___", "日本"])
def test_safe_filename_of_nothing_usable_is_the_default(raw: str) -> None:
    assert safe_filename(raw) == "report.bin"
    assert safe_filename(raw, default="out.csv") == "out.csv"


def test_safe_filename_is_capped_at_200_characters() -> None:
    name = safe_filename("x" * 5000 + ".csv")
    assert len(name) <= 200
    assert SAFE.match(name)


# ---- resolve_output -------------------------------------------------------------------------------


def test_resolve_output_returns_the_absolute_path_of_a_stored_file(tmp_path: Path) -> None:
    target = tmp_path / "JOB" / "r0-a1" / "out.csv"
    target.parent.mkdir(parents=True)
    target.write_text("id\n")
    assert resolve_output(tmp_path, "JOB/r0-a1/out.csv") == target.resolve()


def test_resolve_output_returns_none_for_a_missing_file(tmp_path: Path) -> None:
    assert resolve_output(tmp_path, "JOB/r0-a1/missing.csv") is None


def test_resolve_output_returns_none_for_a_directory(tmp_path: Path) -> None:
    (tmp_path / "JOB").mkdir()
    assert resolve_output(tmp_path, "JOB") is None
    assert resolve_output(tmp_path, "") is None
    assert resolve_output(tmp_path, ".") is None


@pytest.mark.parametrize("escape", ["../secret.txt", "JOB/../../secret.txt", "/ABS/secret.txt"])
def test_resolve_output_refuses_paths_escaping_the_root(tmp_path: Path, escape: str) -> None:
    root = tmp_path / "outputs"
    (root / "JOB").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve")
    relative = escape.replace("/ABS", str(tmp_path))
    assert (root / relative).resolve() == secret.resolve()  # the file really exists out there
    assert resolve_output(root, relative) is None


def test_resolve_output_refuses_a_symlink_pointing_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "outputs"
    root.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve")
    (root / "link.txt").symlink_to(secret)
    assert resolve_output(root, "link.txt") is None


def test_resolve_output_refuses_a_sibling_directory_sharing_the_root_prefix(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    sibling = tmp_path / "out-evil"
    sibling.mkdir()
    (sibling / "x.txt").write_text("nope")
    assert resolve_output(root, "../out-evil/x.txt") is None


# ---- AtomicFile -----------------------------------------------------------------------------------


def test_atomic_file_is_invisible_until_commit_then_complete(tmp_path: Path) -> None:
    final = tmp_path / "JOB" / "r0-a1" / "report.csv"
    atomic = AtomicFile(final)
    fh = atomic.open()
    fh.write("id,name\n")
    fh.write("1,a\n")
    assert not final.exists()
    size = atomic.commit()
    assert final.read_text() == "id,name\n1,a\n"
    assert size == final.stat().st_size == len(b"id,name\n1,a\n")
    assert files_under(tmp_path) == [final]


def test_atomic_file_aborted_leaves_no_file_under_the_final_name_nor_a_temp(tmp_path: Path) -> None:
    final = tmp_path / "JOB" / "report.bin"
    atomic = AtomicFile(final, binary=True)
    fh = atomic.open()
    fh.write(b"\x00" * 4096)
    atomic.abort()
    assert not final.exists()
    assert files_under(tmp_path) == []


def test_atomic_file_abort_keeps_a_previous_complete_file(tmp_path: Path) -> None:
    final = tmp_path / "report.txt"
    final.write_text("previous complete report\n")
    atomic = AtomicFile(final)
    atomic.open().write("half of a new")
    atomic.abort()
    assert final.read_text() == "previous complete report\n"
    assert files_under(tmp_path) == [final]


def test_atomic_file_commit_replaces_an_existing_file_whole(tmp_path: Path) -> None:
    final = tmp_path / "report.txt"
    final.write_text("old\n")
    atomic = AtomicFile(final)
    atomic.open().write("new content\n")
    atomic.commit()
    assert final.read_text() == "new content\n"
    assert files_under(tmp_path) == [final]


def test_atomic_file_temp_lives_next_to_the_final_file_and_is_hidden(tmp_path: Path) -> None:
    final = tmp_path / "d" / "report.txt"
    atomic = AtomicFile(final)
    assert atomic.tmp_path.parent == final.parent
    assert atomic.tmp_path.name.startswith(".")
    assert atomic.tmp_path != final


# ---- ReportContext.output -------------------------------------------------------------------------


def make_ctx(root: Path) -> ReportContext:
    return ReportContext(
        job_id="01JD3Z7Q8J5Q0V6W2XKX4N9M1B",
        tenant="acme",
        attempt=2,
        replay=1,
        attempts_total=2,
        output_root=root,
    )


def test_report_context_output_writes_the_file_and_records_it(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    with ctx.output("../../escape me.csv", "text/csv") as fh:
        fh.write("id\n1\n")
    final = attempt_dir(tmp_path, ctx.job_id, 1, 2) / "escape_me.csv"
    assert final.read_text() == "id\n1\n"
    assert files_under(tmp_path) == [final]
    info = ctx.output_info
    assert info is not None
    assert info.filename == "escape_me.csv"
    assert info.content_type == "text/csv"
    assert info.size == len(b"id\n1\n")
    assert info.path == f"{ctx.job_id}/r1-a2/escape_me.csv"
    assert resolve_output(tmp_path, info.path) == final.resolve()


def test_report_context_output_binary_mode_writes_bytes(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    with ctx.output("data.bin", "application/octet-stream", binary=True) as fh:
        fh.write(b"\x00\x01\x02")
    assert ctx.output_info is not None and ctx.output_info.size == 3


def test_report_context_output_failing_block_leaves_no_final_nor_temp_file(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    with pytest.raises(RuntimeError, match="boom"), ctx.output("report.csv", "text/csv") as fh:
        fh.write("id\n" + "1\n" * 10_000)
        raise RuntimeError("boom")
    assert files_under(tmp_path) == []
    assert ctx.output_info is None


def test_report_context_output_cancelled_block_leaves_nothing(tmp_path: Path) -> None:
    """A timeout or cancellation (BaseException) aborts the file too."""
    import asyncio

    ctx = make_ctx(tmp_path)
    with pytest.raises(asyncio.CancelledError), ctx.output("report.csv", "text/csv") as fh:
        fh.write("partial")
        raise asyncio.CancelledError
    assert files_under(tmp_path) == []
    assert ctx.output_info is None
