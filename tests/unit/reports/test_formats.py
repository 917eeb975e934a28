"""Rows to CSV and XLSX (app/reports/formats.py) and `ctx.rows_writer`: typed values mapped, files read back
with the csv module and openpyxl, rows counted into the job's row count."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from app.reports import formats
from app.reports.base import ReportContext
from tests.utils.declared import csv_rows, xlsx_rows

TYPED = [
    1,
    '=HYPERLINK("http://evil")',
    Decimal("1234.50"),
    date(2026, 11, 27),
    datetime(2026, 11, 27, 8, 30, 5),
    None,
    True,
    2**60,
    time(7, 5),
    timedelta(hours=26, minutes=3),
]
COLUMNS = ["n", "text", "amount", "day", "at", "nothing", "flag", "big", "clock", "took"]


def context(tmp_path: Path, requested_format: str | None = None) -> ReportContext:
    return ReportContext(
        job_id="01JOB",
        tenant="acme",
        attempt=1,
        replay=0,
        attempts_total=1,
        output_root=tmp_path,
        requested_format=requested_format,
    )


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()]


def written(ctx: ReportContext, tmp_path: Path) -> bytes:
    assert ctx.output_info is not None
    return (tmp_path / ctx.output_info.path).read_bytes()


def test_csv_cells_are_iso_dates_plain_decimals_and_empty_nulls() -> None:
    out = io.StringIO(newline="")
    sink = formats.CsvSink(out, COLUMNS)
    sink.write([TYPED])
    rows = csv_rows(out.getvalue().encode())
    assert rows[0] == COLUMNS
    assert rows[1] == [
        "1",
        '=HYPERLINK("http://evil")',
        "1234.50",
        "2026-11-27",
        "2026-11-27 08:30:05",
        "",
        "true",
        str(2**60),
        "07:05:00",
        "26:03:00",
    ]


def test_xlsx_cells_keep_their_types_and_a_formula_like_string_stays_text() -> None:
    out = io.BytesIO()
    sink = formats.XlsxSink(out, COLUMNS)
    sink.write([TYPED])
    sink.finish()
    header, row = xlsx_rows(out.getvalue())
    assert list(header) == COLUMNS
    assert row[0] == 1 and row[1] == '=HYPERLINK("http://evil")'
    assert row[2] == pytest.approx(1234.5) and isinstance(row[2], float)
    assert row[3] == datetime(2026, 11, 27) and row[4] == datetime(2026, 11, 27, 8, 30, 5)
    assert row[5] is None and row[6] is True
    assert row[7] == str(2**60)  # beyond Excel's 15 digits: kept exact, as text


def test_xlsx_goes_on_a_new_sheet_with_its_header_when_one_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "XLSX_SHEET_ROWS", 5)  # header + 4 rows per sheet
    out = io.BytesIO()
    sink = formats.XlsxSink(out, ["n"])
    sink.write([(i,) for i in range(10)])
    sink.finish()
    from openpyxl import load_workbook

    book = load_workbook(out, read_only=True)
    sheets = [[r[0] for r in s.iter_rows(values_only=True)] for s in book.worksheets]
    assert sheets == [["n", 0, 1, 2, 3], ["n", 4, 5, 6, 7], ["n", 8, 9]]


async def test_rows_writer_streams_a_generator_to_csv_and_counts_the_rows(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    async with ctx.rows_writer(["id", "square"], filename="squares") as out:
        assert await out.write_rows((i, i * i) for i in range(5_001)) == 5_001
        await out.write_rows([])
    assert ctx.rows == 5_001 and ctx.output_info is not None
    assert ctx.output_info.filename == "squares.csv" and ctx.output_info.content_type == "text/csv"
    assert ctx.output_info.rows == 5_001
    rows = csv_rows(written(ctx, tmp_path))
    assert rows[0] == ["id", "square"] and len(rows) == 5_002 and rows[-1] == ["5000", "25000000"]


async def test_rows_writer_takes_the_job_s_requested_format_and_async_rows(tmp_path: Path) -> None:
    async def rows() -> AsyncIterator[tuple[int, datetime]]:
        for i in range(3):
            yield i, datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i)

    ctx = context(tmp_path, requested_format="xlsx")
    async with ctx.rows_writer(["n", "at"], filename="days", expected_rows=3) as out:
        await out.write_rows(rows())
    assert ctx.output_info is not None and ctx.output_info.filename == "days.xlsx"
    assert ctx.progress == 1.0 and ctx.rows == 3
    book = xlsx_rows(written(ctx, tmp_path))
    assert book == [("n", "at"), *((i, datetime(2026, 1, 1 + i)) for i in range(3))]


async def test_rows_writer_with_zero_rows_is_an_empty_report_with_its_header(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    async with ctx.rows_writer(["a", "b"], fmt="csv") as out:
        await out.write_rows(iter(()))
    assert ctx.rows == 0 and csv_rows(written(ctx, tmp_path)) == [["a", "b"]]


async def test_a_report_that_fails_inside_rows_writer_leaves_no_file(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    with pytest.raises(RuntimeError):
        async with ctx.rows_writer(["a"], fmt="xlsx") as out:
            await out.write_rows([(1,)])
            raise RuntimeError("boom")
    assert ctx.output_info is None and not files_under(tmp_path)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(formats.UnknownFormat):
        formats.check_format("pdf")
