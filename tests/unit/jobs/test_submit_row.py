"""A submit's row is built with model_construct: it must be readable in a fresh process before any query."""

from __future__ import annotations

import subprocess
import sys

SNIPPET = (
    "from datetime import UTC, datetime\n"
    "from app.jobs.building import JobSpec, submit_row\n"
    "print(submit_row(JobSpec(tenant='t', report_type='x', params={}), datetime.now(UTC)).report_type)\n"
)


def test_a_built_row_is_readable_in_a_fresh_process_before_any_query() -> None:
    done = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "x"
