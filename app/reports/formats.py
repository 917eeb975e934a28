"""Rows to a report file, streamed: CSV written as it comes, XLSX with xlsxwriter's constant-memory mode.
One definition for Python report authors (`ctx.rows_writer`) and the declared SQL kind; rows are counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import itertools
import math
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import IO, Any

FORMATS: dict[str, tuple[str, str]] = {  # format → (content type, file extension)
    "csv": ("text/csv", "csv"),
    "xlsx": ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
}
DEFAULT_FORMAT = "csv"
CHUNK_ROWS = 2_000  # rows handed to a writer thread at a time (the event loop keeps heartbeating meanwhile)
XLSX_SHEET_ROWS = 1_048_576  # Excel's rows per sheet, header included: past it the rows go on a new sheet
EXACT_INT = 2**53  # larger integers go to XLSX as text: Excel keeps 15 significant digits
_PLAIN = (str, int, float, type(None))


class UnknownFormat(ValueError):
    """A format other than csv or xlsx was asked for."""


def check_format(fmt: str) -> str:
    value = fmt.strip().lower()
    if value not in FORMATS:
        raise UnknownFormat(f"unknown output format {fmt!r} (known: {', '.join(FORMATS)})")
    return value


def file_name(stem: str, fmt: str) -> str:
    """`stem.ext` for the format (a stem that already ends in it is kept)."""
    ext = FORMATS[fmt][1]
    return stem if stem.lower().endswith(f".{ext}") else f"{stem}.{ext}"


def _duration_text(value: timedelta) -> str:
    seconds = value.total_seconds()
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    whole = f"{sign}{int(hours)}:{int(minutes):02d}:{int(secs):02d}"
    fraction = secs - int(secs)
    return f"{whole}.{round(fraction * 1e6):06d}" if fraction else whole


def csv_cell(value: Any) -> Any:
    """A value as CSV text: ISO 8601 dates and times (a space before the time, as spreadsheets read it),
    decimals in plain notation, booleans as true/false, durations as H:MM:SS, bytes as hex."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, timedelta):
        return _duration_text(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value if isinstance(value, _PLAIN) else str(value)


class RowSink:
    """Where rows go, synchronously (called from a worker thread): `write` a chunk, then `finish` once."""

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Complete the file (XLSX: assemble the workbook); the caller then commits it."""


class CsvSink(RowSink):
    def __init__(self, fh: IO[str], columns: Sequence[str]) -> None:
        self._writer = csv.writer(fh)
        self._writer.writerow(list(columns))

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        self._writer.writerows(_csv_row(row) for row in rows)


def _csv_row(row: Sequence[Any]) -> Sequence[Any]:
    """Most rows hold only text, numbers and nulls, which the csv module writes as they are."""
    return row if all(type(v) in _PLAIN for v in row) else [csv_cell(v) for v in row]


class XlsxSink(RowSink):
    """xlsxwriter in constant-memory mode: each row is flushed to a temporary file as soon as the next one
    starts, so memory stays flat whatever the row count. Strings are never read as formulas or links."""

    def __init__(self, fh: IO[bytes], columns: Sequence[str]) -> None:
        import xlsxwriter  # only XLSX reports load it

        self._book = xlsxwriter.Workbook(
            fh,
            {
                "constant_memory": True,
                "strings_to_formulas": False,  # a cell "=HYPERLINK(…)" from the data stays text
                "strings_to_urls": False,
                "strings_to_numbers": False,
                "remove_timezone": True,  # Excel has no time zones: an aware value keeps its wall time
            },
        )
        self._columns = list(columns)
        self._header = self._book.add_format({"bold": True})
        self._datetime = self._book.add_format({"num_format": "yyyy-mm-dd hh:mm:ss"})
        self._date = self._book.add_format({"num_format": "yyyy-mm-dd"})
        self._time = self._book.add_format({"num_format": "hh:mm:ss"})
        self._duration = self._book.add_format({"num_format": "[h]:mm:ss"})
        self._sheets = 0
        self._new_sheet()
        self._cell: dict[type, Callable[[int, int, Any], Any]] = {
            str: self._string,
            int: self._int,
            float: self._float,
            bool: lambda r, c, v: self._sheet.write_boolean(r, c, v),
            Decimal: self._decimal,
            datetime: lambda r, c, v: self._sheet.write_datetime(r, c, v, self._datetime),
            date: lambda r, c, v: self._sheet.write_datetime(r, c, v, self._date),
            time: lambda r, c, v: self._sheet.write_datetime(r, c, v, self._time),
            timedelta: lambda r, c, v: self._sheet.write_number(
                r, c, v.total_seconds() / 86400, self._duration
            ),
        }

    def _new_sheet(self) -> None:
        self._sheets += 1
        self._sheet = self._book.add_worksheet(f"Sheet{self._sheets}")
        self._sheet.write_row(0, 0, self._columns, self._header)
        self._sheet.freeze_panes(1, 0)
        self._row = 1

    def _string(self, r: int, c: int, v: str) -> None:
        self._sheet.write_string(r, c, v)

    def _int(self, r: int, c: int, v: int) -> None:
        if -EXACT_INT < v < EXACT_INT:
            self._sheet.write_number(r, c, v)
        else:
            self._sheet.write_string(r, c, str(v))

    def _float(self, r: int, c: int, v: float) -> None:
        if math.isfinite(v):
            self._sheet.write_number(r, c, v)
        else:
            self._sheet.write_string(r, c, str(v))

    def _decimal(self, r: int, c: int, v: Decimal) -> None:
        if v.is_finite():
            self._sheet.write_number(r, c, float(v))
        else:
            self._sheet.write_string(r, c, str(v))

    def _other(self, r: int, c: int, v: Any) -> None:
        if v is None:
            return
        for kind, write in self._cell.items():  # subclasses (a driver's own str or datetime)
            if isinstance(v, kind):
                write(r, c, v)
                return
        self._sheet.write_string(
            r, c, csv_cell(v) if isinstance(v, bytes | bytearray | memoryview) else str(v)
        )

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        cell, other = self._cell, self._other
        for row in rows:
            if self._row >= XLSX_SHEET_ROWS:
                self._new_sheet()
            r = self._row
            for c, value in enumerate(row):
                cell.get(type(value), other)(r, c, value)
            self._row = r + 1

    def finish(self) -> None:
        self._book.close()


def open_sink(fmt: str, fh: IO[Any], columns: Sequence[str]) -> RowSink:
    """The sink of a format on the file `ctx.output` opened (text for CSV, binary for XLSX)."""
    return XlsxSink(fh, columns) if check_format(fmt) == "xlsx" else CsvSink(fh, columns)


class RowsWriter:
    """What `ctx.rows_writer` yields: `await out.write_rows(rows)` as often as needed, rows counted in
    `out.rows`; with `expected_rows`, progress is the share written so far."""

    def __init__(
        self,
        sink: RowSink,
        expected_rows: int | None = None,
        on_progress: Callable[[float], None] | None = None,
    ) -> None:
        self._sink = sink
        self.rows = 0
        self.expected_rows = expected_rows
        self._on_progress = on_progress

    @staticmethod
    async def _in_thread(work: Callable[..., None], *args: Any) -> None:
        """`work` in a thread; if the report is cancelled meanwhile (its time is up, a cancel), the thread is
        let finish with the file before the cancel goes on and the file is closed and removed."""
        task = asyncio.ensure_future(asyncio.to_thread(work, *args))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await task
            raise

    async def _write(self, chunk: list[Sequence[Any]]) -> None:
        if not chunk:
            return
        await self._in_thread(self._sink.write, chunk)
        self.rows += len(chunk)
        if self.expected_rows and self._on_progress is not None:
            self._on_progress(min(1.0, self.rows / self.expected_rows))

    async def write_rows(self, rows: Iterable[Sequence[Any]] | AsyncIterable[Sequence[Any]]) -> int:
        """Write rows (any iterable or async iterable of sequences, in column order) in chunks, each in a
        thread so the heartbeat keeps going; returns how many this call wrote."""
        before = self.rows
        if isinstance(rows, AsyncIterable):
            chunk: list[Sequence[Any]] = []
            async for row in rows:
                chunk.append(row)
                if len(chunk) >= CHUNK_ROWS:
                    await self._write(chunk)
                    chunk = []
            await self._write(chunk)
        else:
            iterator = iter(rows)
            while chunk := list(itertools.islice(iterator, CHUNK_ROWS)):
                await self._write(chunk)
        return self.rows - before

    async def write_chunk(self, rows: Sequence[Sequence[Any]]) -> None:
        """Write one ready chunk as it is (the SQL kind hands over its fetched partitions)."""
        await self._write(list(rows))

    async def finish(self) -> None:
        await self._in_thread(self._sink.finish)
