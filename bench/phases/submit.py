"""Submit phase: 64 concurrent clients POSTing jobs to the API for a fixed time, against a trivial POST
on the same server (the HTTP ceiling); load from wrk, or bench/loadgen.py when wrk is missing."""

from __future__ import annotations

import asyncio
import json
import math
import re
import sys
from typing import Any

from bench.common import CONCURRENCY, JOB_BODY, SUBMIT_SECONDS, WARMUP_SECONDS, log, run_cmd
from bench.context import ApiServer, Bench
from bench.procs import CpuMeter

WRK_THREADS = 2


async def load(bench: Bench, path: str, seconds: float, api: ApiServer | None = None) -> dict[str, Any]:
    """One load-generator run in its own process: 64 concurrent POSTs of the job body to `path`, on `api`
    (default: the one start_api() started)."""
    if api is None:
        assert bench.api is not None, "start_api() first"
        api_pid, base_url = bench.api.pid, bench.base_url
    else:
        api_pid, base_url = api.proc.pid, api.base_url
    url = f"{base_url}{path}"
    auth = f"Bearer {bench.api_key}"
    cpu = CpuMeter({"api": api_pid, **bench.server_pids()}).start()
    if bench.wrk:
        script = bench.work / "post.lua"
        script.write_text(
            'wrk.method = "POST"\n'
            f"wrk.body = '{JOB_BODY}'\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
            f'wrk.headers["Authorization"] = "{auth}"\n'
        )
        argv = [  # wrk's -d takes whole seconds only ("2.5s" fails)
            bench.wrk, f"-t{WRK_THREADS}", f"-c{CONCURRENCY}", f"-d{math.ceil(seconds)}s", "--latency",
            "-s", str(script), url,
        ]  # fmt: skip
        out = await asyncio.to_thread(run_cmd, argv, None, seconds + 60)
        summary = parse_wrk(out)
    else:
        argv = [
            sys.executable, "-m", "bench.loadgen", url, "--duration", str(seconds), "--concurrency",
            str(CONCURRENCY), "--body", JOB_BODY, "--header", f"Authorization: {auth}",
        ]  # fmt: skip
        out = await asyncio.to_thread(run_cmd, argv, bench.env, seconds + 120)
        summary = json.loads(out.strip().splitlines()[-1])
    summary["cpu_pct"] = cpu.stop()
    return summary


def parse_wrk(out: str) -> dict[str, Any]:
    """Requests, non-2xx, duration and latency percentiles from `wrk --latency` output."""

    def to_ms(value: str, unit: str) -> float:
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]

    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m),", out)
    if not m:
        raise RuntimeError(f"cannot parse wrk output:\n{out}")
    requests = int(m.group(1))
    duration_s = to_ms(m.group(2), m.group(3)) / 1000
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    bad = int(non2xx.group(1)) if non2xx else 0
    percentiles = {
        int(q): to_ms(v, u)
        for q, v, u in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)
    }
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    ok = requests - bad
    return {
        "tool": "wrk",
        "duration_s": duration_s,
        "requests": requests,
        "ok": ok,
        "rps": requests / duration_s,
        "ok_rps": ok / duration_s,
        "p50_ms": percentiles.get(50, math.nan),
        "p90_ms": percentiles.get(90, math.nan),
        "p99_ms": percentiles.get(99, math.nan),
        "socket_errors": [int(x) for x in sock.groups()] if sock else [0, 0, 0, 0],
    }


async def run(bench: Bench) -> None:
    log(f"submit: {CONCURRENCY} concurrent clients, {SUBMIT_SECONDS:g} s each, load generator "
        f"{'wrk' if bench.wrk else 'bench/loadgen.py (wrk missing)'}")  # fmt: skip
    await bench.clean()
    await bench.start_api()
    await load(bench, "/bench/noop", WARMUP_SECONDS)
    await load(bench, "/v1/jobs", WARMUP_SECONDS)
    await bench.clean()
    trivial = await load(bench, "/bench/noop", SUBMIT_SECONDS)
    jobs_before = int(await bench.scalar("SELECT COUNT(*) FROM report_jobs") or 0)
    status = await bench.mysql_status()
    jobs = await load(bench, "/v1/jobs", SUBMIT_SECONDS)
    jobs["jobs_in_mysql"] = int(await bench.scalar("SELECT COUNT(*) FROM report_jobs") or 0) - jobs_before
    jobs["mysql_per_job"] = await bench.per_job_statements(status, max(1, jobs["jobs_in_mysql"]), 0)
    jobs["jobs_in_redis"] = int(await bench.rds.zcard("arq:queue"))
    bench.results["submit"] = {"trivial": trivial, "jobs": jobs}
    log(f"  trivial POST {trivial['ok_rps']:.0f} req/s p99 {trivial['p99_ms']:.1f} ms; "
        f"job POST {jobs['ok_rps']:.0f} accepted/s p99 {jobs['p99_ms']:.1f} ms "
        f"(non-2xx {jobs['requests'] - jobs['ok']})")  # fmt: skip
