"""Loading a report-types file: good types become `ReportType`s; every bad input is refused with the file,
the line and the reason (real SQLite as the data source, which plans each query at load)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.config import reset_settings
from app.reports.declared import loader
from app.reports.declared.errors import DeclarationError
from tests.utils.declared import sql_type, sqlite_source

GOOD = sql_type(
    "sales.by_region",
    "SELECT region, SUM(amount) AS total FROM sales WHERE day >= :since GROUP BY region",
    source="local",
    params={"since": {"type": "string", "format": "date"}},
    required=("since",),
    format="xlsx",
    timeout_s=60,
    max_attempts=2,
    priority=7,
    max_concurrency=3,
)


@pytest.fixture
def local_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    url = sqlite_source(tmp_path / "local.db", rows=50)
    monkeypatch.setenv("DATA_SOURCES", f'{{"local": "{url}"}}')
    reset_settings()
    yield tmp_path
    reset_settings()


async def refused(directory: Path, text: str, python_names: set[str] | None = None) -> DeclarationError:
    path = directory / "types.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DeclarationError) as caught:
        await loader.load(path, python_names or set())
    error = caught.value
    assert error.file == str(path)
    assert str(error).startswith(f"{path}:{error.line}: ") if error.line else str(error).startswith(str(path))
    return error


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


async def test_a_good_file_declares_report_types_with_every_common_field(local_source: Path) -> None:
    path = local_source / "types.toml"
    path.write_text(GOOD, encoding="utf-8")
    [rtype] = await loader.load(path, set())
    assert (rtype.name, rtype.kind, rtype.timeout_s, rtype.max_attempts) == ("sales.by_region", "sql", 60, 2)
    assert (rtype.priority, rtype.max_concurrency) == (7, 3)
    assert rtype.params_schema()["required"] == ["since"]


async def test_an_invalid_json_schema_is_refused_at_its_line(local_source: Path) -> None:
    text = GOOD.replace('format = "date"', 'format = "date"\nminLength = -1')
    error = await refused(local_source, text)
    assert (error.type_name, error.field) == ("sales.by_region", "params")
    assert "invalid JSON Schema" in error.reason and error.line == line_of(text, ".params]")


async def test_an_unknown_data_source_is_refused_at_its_line(local_source: Path) -> None:
    text = GOOD.replace('source = "local"', 'source = "warehouse"')
    error = await refused(local_source, text)
    assert error.field == "source" and "unknown data source 'warehouse'" in error.reason
    assert error.line == line_of(text, 'source = "warehouse"')


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT region FROM sales WHERE", "the data source refused it"),  # the source cannot parse it
        ("SELECT nope FROM sales", "no such column: nope"),
        ("SELECT region FROM sales WHERE note = 'unterminated", "unterminated quoted string"),
        ("SELECT (region FROM sales", "unbalanced parentheses"),
    ],
)
async def test_sql_that_does_not_parse_is_refused_with_the_reason(
    local_source: Path, sql: str, reason: str
) -> None:
    text = sql_type("t", sql, source="local")
    error = await refused(local_source, text)
    assert error.field == "sql" and reason in error.reason, error.reason
    assert error.line == line_of(text, 'sql = """')


async def test_sql_naming_a_param_the_schema_lacks_is_refused(local_source: Path) -> None:
    text = sql_type("t", "SELECT * FROM sales WHERE region = :region", source="local")
    error = await refused(local_source, text)
    assert "names parameter :region that the params schema lacks" in error.reason


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM sales",
        "UPDATE sales SET amount = 0",
        "SELECT 1; DROP TABLE sales",
        "SELECT * FROM sales INTO OUTFILE '/tmp/x'",
        "/* SELECT */ INSERT INTO sales (id) VALUES (0)",
    ],
)
async def test_sql_other_than_one_select_is_refused(local_source: Path, sql: str) -> None:
    error = await refused(local_source, sql_type("t", sql, source="local"))
    assert error.field == "sql"


async def test_a_name_shadowing_a_python_type_is_refused(local_source: Path) -> None:
    text = sql_type("demo.csv", "SELECT 1 AS one", source="local")
    error = await refused(local_source, text, python_names={"demo.csv"})
    assert error.field == "name" and "a Python report type has this name" in error.reason
    assert error.line == line_of(text, '[report_types."demo.csv"]')


async def test_an_unknown_kind_is_refused_naming_the_known_ones(local_source: Path) -> None:
    text = GOOD.replace('kind = "sql"', 'kind = "ftp"')
    error = await refused(local_source, text)
    assert error.field == "kind" and "unknown kind 'ftp' (known: http, sql)" in error.reason
    assert error.line == line_of(text, 'kind = "ftp"')


async def test_a_misspelt_field_is_refused_at_its_line(local_source: Path) -> None:
    text = GOOD.replace("timeout_s = 60", "timout_s = 60")
    error = await refused(local_source, text)
    assert error.field == "timout_s" and error.line == line_of(text, "timout_s")


async def test_broken_toml_is_refused_at_the_line_the_parser_names(local_source: Path) -> None:
    text = GOOD + '[report_types."x"]\nkind = "sql\n'
    error = await refused(local_source, text)
    assert "not valid TOML" in error.reason and error.line == len(text.splitlines())


async def test_a_reserved_bind_cannot_be_a_param_but_binds_the_job_s_own_value(local_source: Path) -> None:
    text = sql_type("t", "SELECT :tenant AS t", source="local", params={"tenant": {"type": "string"}})
    assert "reserved" in (await refused(local_source, text)).reason
    path = local_source / "ok.toml"
    path.write_text(sql_type("t", "SELECT :tenant AS t, :scheduled_for AS s", source="local"))
    assert [t.name for t in await loader.load(path, set())] == ["t"]


def test_the_check_command_prints_file_line_reason_and_fails(local_source: Path) -> None:
    bad = local_source / "bad.toml"
    bad.write_text(GOOD.replace('source = "local"', 'source = "nowhere"'), encoding="utf-8")
    good = local_source / "good.toml"
    good.write_text(GOOD, encoding="utf-8")
    run = [sys.executable, "-m", "app.reports.declared", "check"]
    failed = subprocess.run([*run, str(bad)], capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1, failed.stderr
    assert failed.stderr.startswith(
        f"{bad}:{line_of(bad.read_text(), 'nowhere')}: report type 'sales.by_region'"
    )
    passed = subprocess.run([*run, str(good)], capture_output=True, text=True, timeout=120)
    assert passed.returncode == 0 and "ok, 1 report type: sales.by_region (sql)" in passed.stdout


def test_reportctl_types_check_is_the_same_check(local_source: Path) -> None:
    from typer.testing import CliRunner

    from app.cli import cli

    bad = local_source / "bad.toml"
    bad.write_text(GOOD.replace("SUM(amount)", "SUM(nope)"), encoding="utf-8")
    result = CliRunner().invoke(cli, ["types", "check", str(bad)])
    assert result.exit_code == 1
    assert (
        f"{bad}:{line_of(bad.read_text(), 'sql = ')}: report type 'sales.by_region', field 'sql'"
        in result.output
    )
    assert "no such column: nope" in result.output


HTTP_TYPE = """
[report_types."sales.remote"]
kind = "http"
description = "Rendered by the team's own service"
timeout_s = 90
url = "https://reports.internal/sales/{region}"
mode = "async"
secret_env = "SALES_REPORT_SECRET"

[report_types."sales.remote".params]
type = "object"
required = ["region"]
properties.region = { type = "string" }
"""


async def test_an_http_type_is_declared_in_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "types.toml"
    path.write_text(HTTP_TYPE, encoding="utf-8")
    [rtype] = await loader.load(path, set())
    assert (rtype.name, rtype.kind, rtype.timeout_s) == ("sales.remote", "http", 90)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("mode = ", "mdoe = "), "mdoe"),
        (("/sales/{region}", "/sales/{area}"), "url"),
        (("https://reports.internal/sales/{region}", "https://{region}.internal/sales"), "url"),
    ],
)
async def test_a_bad_http_type_is_refused_at_its_line(
    tmp_path: Path, change: tuple[str, str], field: str
) -> None:
    text = HTTP_TYPE.replace(*change)
    error = await refused(tmp_path, text)
    assert error.field == field and error.type_name == "sales.remote", str(error)
    assert error.line is not None
