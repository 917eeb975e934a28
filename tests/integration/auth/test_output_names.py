"""Output files named from hostile params: the name shown and sent in Content-Disposition is sanitised, the
file stays under the job's own directory of OUTPUT_DIR, and another tenant gets 404, never its bytes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from app.core.config import get_settings
from app.core.db import session_scope
from app.core.tenancy import EVERY_TENANT
from app.jobs.repository import JobRepository
from app.reports.base import ReportContext
from tests.utils.jobs import submit_id
from tests.utils.keys import make_key
from tests.utils.problems import assert_problem
from tests.utils.workers import drain

SAFE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")


class NamedParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=500)


async def named_output(ctx: ReportContext, params: NamedParams) -> None:
    """Writes a file under a name taken from the (tenant-supplied) params."""
    with ctx.output(params.name, "text/plain") as fh:
        fh.write(f"report of {ctx.job_id}\n")


def output_root() -> Path:
    return Path(get_settings().output_dir).resolve()


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def stored_file(root: Path, relative: str) -> Path:
    path = (root / relative).resolve()
    assert path.is_file(), relative
    return path


HOSTILE_NAMES = [
    "../../etc/passwd\r\nX-Injected: 1.csv",
    "/etc/passwd",
    "..\\..\\windows\\win.ini",
    "a.csv\"; filename*=UTF-8''evil.sh",
    "..",
    "%2e%2e%2f%2e%2e%2fetc%2fshadow",
    "\u202etxt.exe",
    "nul\x00byte.txt",
    "报告.csv",
]


async def test_output_filename_from_hostile_params_is_sanitised_and_the_file_stays_under_output_dir(
    client: httpx.AsyncClient, auth: dict[str, str], report_type: Any
) -> None:
    report_type("test.named", NamedParams, named_output)
    root = output_root()
    files_before = files_under(root)
    jobs = {name: await submit_id(client, auth, "test.named", name=name) for name in HOSTILE_NAMES}
    await drain()
    other = await make_key("globex", "jobs:read")
    for name, job_id in jobs.items():
        job = (await client.get(f"/v1/jobs/{job_id}", headers=auth)).json()
        assert job["status"] == "done", (name, job)
        shown = job["output"]["filename"]
        assert SAFE_NAME.match(shown) and ".." not in shown, (name, shown)

        resp = await client.get(f"/v1/jobs/{job_id}/output", headers=auth)
        assert resp.status_code == 200, (name, resp.text)
        assert resp.text == f"report of {job_id}\n"
        raw_headers = resp.headers.raw
        assert "x-injected" not in {k.decode().lower() for k, _ in raw_headers}, name
        [disposition] = [v for k, v in raw_headers if k.lower() == b"content-disposition"]
        assert not re.search(rb"[\r\n\x00/\\]", disposition), (name, disposition)
        match = re.fullmatch(rb'attachment; filename="([^"]+)"', disposition)
        assert match is not None, (name, disposition)
        assert match.group(1).decode() == shown

        async with session_scope() as session:
            stored = await JobRepository(session).get_job(job_id, EVERY_TENANT)
        assert stored is not None and stored.output_path
        path = stored_file(root, stored.output_path)
        assert root in path.parents and path.parent.parent == root / job_id, (name, stored.output_path)
        # Another tenant gets 404 for a finished job's file too, never its bytes.
        theirs = await client.get(f"/v1/jobs/{job_id}/output", headers=other)
        assert_problem(theirs, 404)
        assert job_id + "\n" not in theirs.text
    # Nothing was written anywhere but under the jobs' own directories.
    new_files = files_under(root) - files_before
    assert {p.relative_to(root).parts[0] for p in new_files} == set(jobs.values())
