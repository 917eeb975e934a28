"""Report files in object storage with real processes: workers on "different machines" (each its own local
working directory) hand their files to the API through the bucket, and a 200 MB report goes through the
worker and the API without either process growing by 50 MB."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.utils.object_store import MotoS3, moto_serving
from tests.utils.stack import Stack, wait_until

RSS_GROWTH_LIMIT_BYTES = 50 * 1024 * 1024
BIG_REPORT_MB = 200


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    yield from moto_serving()


@pytest.fixture
def s3_stack(stack: Stack, moto: MotoS3) -> Stack:
    moto.start()
    moto.reset()
    stack.overrides.update(moto.settings(OUTPUT_LINK_TTL_S="0", OUTPUT_S3_TIMEOUT_S="10"))
    return stack


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class PeakRss:
    """Samples the RSS of some processes every 20 ms in a thread and keeps each one's peak."""

    def __init__(self, pids: list[int]) -> None:
        self.peak = {pid: rss_bytes(pid) for pid in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            for pid in self.peak:
                self.peak[pid] = max(self.peak[pid], rss_bytes(pid))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def job_status(client: httpx.Client, job_id: str) -> str:
    return str(client.get(f"/v1/jobs/{job_id}").json()["status"])


def sync_client(stack: Stack, timeout_s: float = 60) -> httpx.Client:
    return httpx.Client(
        base_url=stack.api_url,
        headers={"Authorization": f"Bearer {stack.api_key}"},
        timeout=timeout_s,
        trust_env=False,
    )


def test_jobs_done_by_two_workers_with_their_own_working_directories_are_downloadable_through_the_api(
    s3_stack: Stack, moto: MotoS3, tmp_path: Path
) -> None:
    dirs = [tmp_path / "machine-a", tmp_path / "machine-b"]
    workers = [s3_stack.start_worker(OUTPUT_DIR=str(d), WORKER_MAX_JOBS="1") for d in dirs]
    s3_stack.start_api(OUTPUT_DIR=str(tmp_path / "api-machine"))
    with sync_client(s3_stack) as client:
        body = {"report_type": "demo.sleep", "params": {"seconds": 0.3}}
        ids = [client.post("/v1/jobs", json=body).json()["id"] for _ in range(8)]
        wait_until(lambda: all(job_status(client, i) == "done" for i in ids), 60, "jobs done", [*workers])
        by_worker = {a["worker"] for i in ids for a in client.get(f"/v1/jobs/{i}/attempts").json()}
        assert {w.rsplit(":", 1)[1] for w in by_worker} == {str(w.pid) for w in workers}
        for job_id in ids:
            resp = client.get(f"/v1/jobs/{job_id}/output")
            assert resp.status_code == 200 and resp.text == "slept 0.3 s\n"
            assert resp.headers["content-disposition"] == 'attachment; filename="sleep.txt"'
    assert sorted(k.split("/")[0] for k in moto.keys("")) == sorted(ids)
    # Nothing stays on the workers' disks, and the API never needed one.
    assert [p for d in dirs for p in d.rglob("*") if p.is_file()] == []
    assert not (tmp_path / "api-machine").exists() or not any((tmp_path / "api-machine").rglob("*.txt"))


@pytest.mark.timeout(420)
def test_a_200_mb_report_grows_neither_the_worker_nor_the_api_by_50_mb(s3_stack: Stack, moto: MotoS3) -> None:
    extra = {"REPORT_MODULES": "tests.utils.big_report", "JOB_TIMEOUT_S": "300"}
    worker = s3_stack.start_worker(**extra)
    api = s3_stack.start_api(**extra)
    with sync_client(s3_stack, timeout_s=120) as client:
        # Warm up both processes (imports, the store's client, the first upload and download).
        warm = client.post("/v1/jobs", json={"report_type": "test.big_csv", "params": {"megabytes": 1}})
        warm_id = warm.json()["id"]
        wait_until(lambda: job_status(client, warm_id) == "done", 60, "warm-up job done", [worker])
        assert len(client.get(f"/v1/jobs/{warm_id}/output").content) >= 1024 * 1024
        base = {pid: rss_bytes(pid) for pid in (worker.pid, api.pid)}
        with PeakRss([worker.pid, api.pid]) as rss:
            job = client.post(
                "/v1/jobs", json={"report_type": "test.big_csv", "params": {"megabytes": BIG_REPORT_MB}}
            ).json()
            wait_until(lambda: job_status(client, job["id"]) == "done", 300, "200 MB job done", [worker])
            received = 0
            started = time.monotonic()
            with client.stream("GET", f"/v1/jobs/{job['id']}/output") as resp:
                assert resp.status_code == 200
                for chunk in resp.iter_bytes():
                    received += len(chunk)
            download_s = time.monotonic() - started
        size = client.get(f"/v1/jobs/{job['id']}").json()["output"]["size"]
    assert received == size >= BIG_REPORT_MB * 1024 * 1024
    growth = {name: rss.peak[pid] - base[pid] for name, pid in (("worker", worker.pid), ("api", api.pid))}
    print(f"RSS growth: worker {growth['worker'] / 2**20:.1f} MB, api {growth['api'] / 2**20:.1f} MB; "
          f"download {download_s:.1f} s")  # fmt: skip
    assert growth["worker"] < RSS_GROWTH_LIMIT_BYTES, growth
    assert growth["api"] < RSS_GROWTH_LIMIT_BYTES, growth
