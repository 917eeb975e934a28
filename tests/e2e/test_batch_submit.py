"""Bulk submit with real processes: a batch's jobs all run to `done` on a real worker, and
`reportctl submit --from-file` sends a JSON-lines file in batches and reports every line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.utils.stack import PYTHON, ROOT, Stack, wait_until

pytestmark = pytest.mark.timeout(240)


async def test_every_job_of_a_batch_runs_to_done_on_a_real_worker(stack: Stack) -> None:
    stack.start_api()
    stack.start_worker()
    items = [{"report_type": "demo.csv", "params": {"rows": n + 1}} for n in range(300)]
    items[7] = {"report_type": "demo.nope", "params": {}}
    async with stack.client() as client:
        resp = await client.post("/v1/jobs/batch", json={"jobs": items})
    assert resp.status_code == 207, resp.text
    answer = resp.json()
    assert (answer["created"], answer["rejected"]) == (299, 1)
    assert answer["results"][7]["status"] == 422
    wait_until(lambda: stack.status_counts() == {"done": 299}, 120, "every batch job done", stack.procs)
    rows = stack.sql("SELECT COUNT(*) FROM job_attempts WHERE outcome = 'succeeded'")
    assert int(rows[0][0]) == 299, "each job ran exactly once"


def test_reportctl_submits_a_jsonl_file_in_batches_and_reports_each_line(
    stack: Stack, tmp_path: Path
) -> None:
    stack.start_api()
    stack.start_worker()
    lines = [
        json.dumps({"report_type": "demo.csv", "params": {"rows": 2}, "idempotency_key": "line-1"}),
        "{not json",
        json.dumps({"report_type": "demo.csv", "params": {"rows": 0}}),
        "",
        json.dumps({"report_type": "demo.csv", "params": {"rows": 3}}),
        json.dumps({"report_type": "demo.csv", "params": {"rows": 2}, "idempotency_key": "line-1"}),
        json.dumps(["not", "an", "object"]),
    ]
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")

    def reportctl() -> subprocess.CompletedProcess[str]:
        argv = [PYTHON, "-m", "app.cli", "submit", "--from-file", str(path), "--batch-size", "2"]
        env = stack.env(REPORTCTL_API_URL=stack.api_url, REPORTCTL_API_KEY=stack.api_key)
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    done = reportctl()
    assert done.returncode == 1, done.stdout + done.stderr
    out = [line.split("\t") for line in done.stdout.splitlines()]
    assert [(row[0], row[1]) for row in out] == [
        ("1", "202"),
        ("2", "invalid"),
        ("3", "422"),
        ("5", "202"),
        ("6", "200"),
        ("7", "invalid"),
    ]
    assert out[4][2] == out[0][2], "the repeated key answers the first line's job"
    assert "params.rows" in out[2][2]
    assert "3 line(s) refused" in done.stderr
    job_ids = {out[0][2], out[3][2]}
    wait_until(lambda: stack.status_counts() == {"done": 2}, 60, "the file's jobs done", stack.procs)
    assert {row[0] for row in stack.sql("SELECT id FROM report_jobs")} == job_ids
