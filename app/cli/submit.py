"""`reportctl submit`: one job over the API; or, with --from-file, a JSON-lines file (one POST /v1/jobs/batch
item per non-blank line) sent in batches, one result line printed per input line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TextIO

import httpx
import typer

from app.cli.client import ApiKey, ApiUrl, api_client, parse_param, print_response

DEFAULT_BATCH_SIZE = 500
MAX_BATCH_SIZE = 1000


@dataclass(frozen=True)
class Line:
    number: int
    item: dict[str, Any] | None
    error: str | None = None


def read_lines(stream: TextIO) -> Iterator[Line]:
    """Each non-blank line as a job item, or why it is not one (it is then never sent)."""
    for number, text in enumerate(stream, start=1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            yield Line(number, None, f"not valid JSON: {exc}")
            continue
        if not isinstance(value, dict):
            yield Line(number, None, "not a JSON object")
            continue
        yield Line(number, value)


def _problem_text(problem: dict[str, Any]) -> str:
    """A problem's detail, and its first field errors (their location inside the item)."""
    text = str(problem.get("detail") or problem.get("title") or "")
    fields = []
    for error in (problem.get("errors") or [])[:3]:
        loc = [str(part) for part in error.get("loc", [])]
        if loc[:1] == ["body"]:
            loc = loc[3:] if loc[1:2] == ["jobs"] else loc[1:]
        fields.append(f"{'.'.join(loc) or 'item'}: {error.get('msg', '')}")
    return f"{text} ({'; '.join(fields)})" if fields else text


def _send(client: httpx.Client, pending: list[Line], echo: Callable[[str], None]) -> int:
    """POST the items of `pending` as one batch; prints a line per line of `pending` (malformed ones in
    their place) and returns how many were refused."""
    batch = [line for line in pending if line.item is not None]
    answers: dict[int, tuple[str, str]] = {}
    if batch:
        resp = client.post("/v1/jobs/batch", json={"jobs": [line.item for line in batch]})
        if resp.status_code == 207:
            for line, result in zip(batch, resp.json()["results"], strict=True):
                job, problem = result["job"], result["problem"] or {}
                answers[line.number] = (str(result["status"]), job["id"] if job else _problem_text(problem))
        else:
            try:
                reason = _problem_text(resp.json())
            except ValueError:
                reason = resp.text[:200]
            answers = {line.number: (str(resp.status_code), reason) for line in batch}
    refused = 0
    for line in pending:
        status, text = answers.get(line.number, ("invalid", line.error or ""))
        refused += status not in ("200", "202")
        echo(f"{line.number}\t{status}\t{text}")
    return refused


def submit_lines(
    client: httpx.Client, lines: Iterable[Line], batch_size: int, echo: Callable[[str], None]
) -> int:
    """Send the items `batch_size` at a time, in file order; returns how many lines were refused
    (malformed ones included)."""
    refused = 0
    pending: list[Line] = []
    items = 0
    for line in lines:
        pending.append(line)
        items += line.item is not None
        if items == batch_size:
            refused += _send(client, pending, echo)
            pending, items = [], 0
    if pending:
        refused += _send(client, pending, echo)
    return refused


def submit_file(client: httpx.Client, path: Path, batch_size: int, echo: Callable[[str], None]) -> int:
    with path.open(encoding="utf-8") as stream:
        return submit_lines(client, read_lines(stream), batch_size, echo)


def submit(
    report_type: Annotated[str | None, typer.Argument(help="e.g. demo.csv")] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="k=v (v parsed as JSON if it can be)")
    ] = None,
    run_at: Annotated[str | None, typer.Option(help="ISO 8601 start time")] = None,
    priority: Annotated[
        int | None, typer.Option(min=0, max=9, help="0–9, higher first (default: the type's, else 5)")
    ] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="Idempotency-Key header")] = None,
    deliver_to: Annotated[
        list[str] | None, typer.Option("--deliver-to", help="A destination (name or id) once done; repeat")
    ] = None,
    from_file: Annotated[
        Path | None,
        typer.Option("--from-file", help="JSON lines, one POST /v1/jobs/batch item each", dir_okay=False),
    ] = None,
    batch_size: Annotated[
        int, typer.Option(min=1, max=MAX_BATCH_SIZE, help="Items per batch with --from-file")
    ] = DEFAULT_BATCH_SIZE,
    api_url: ApiUrl = "http://127.0.0.1:8000",
    api_key: ApiKey = "",
) -> None:
    """Submit a job and print it; or, with --from-file, every line's job in batches, printing
    `line<TAB>status<TAB>job id or why not` per line (exit 1 if any line was refused)."""
    if from_file is not None:
        if report_type or param or run_at or idempotency_key or priority is not None:
            raise typer.BadParameter("--from-file takes the jobs from the file alone")
        with api_client(api_url, api_key) as client:
            refused = submit_file(client, from_file, batch_size, typer.echo)
        if refused:
            typer.echo(f"{refused} line(s) refused", err=True)
            raise typer.Exit(1)
        return
    if not report_type:
        raise typer.BadParameter("give a REPORT_TYPE, or --from-file")
    body: dict[str, Any] = {"report_type": report_type, "params": dict(parse_param(p) for p in param or [])}
    if run_at:
        body["run_at"] = run_at
    if priority is not None:
        body["priority"] = priority
    if deliver_to:
        body["deliver_to"] = [{"destination": d} for d in deliver_to]
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    with api_client(api_url, api_key) as client:
        print_response(client.post("/v1/jobs", json=body, headers=headers))
