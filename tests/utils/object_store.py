"""A real S3-protocol server for the suite: moto's standalone server as a child process on a free port,
stopped and started again on the same port to play an outage (its objects live in memory, so a restart
brings back an empty store: the bucket is created again)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import httpx

from devtools.servers import free_port

ACCESS_KEY_ID = "test-access-key"
SECRET_ACCESS_KEY = "test-secret-key"
REGION = "us-east-1"
BUCKET = "reports"
PREFIX = "outputs/test"


class MotoS3:
    def __init__(self, bucket: str = BUCKET, prefix: str = PREFIX) -> None:
        self.port = free_port()
        self.bucket = bucket
        self.prefix = prefix
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settings(self, **extra: Any) -> dict[str, str]:
        """The OUTPUT_* settings that point the app at this server."""
        values = {
            "OUTPUT_STORAGE": f"s3://{self.bucket}/{self.prefix}",
            "OUTPUT_S3_ENDPOINT_URL": self.endpoint,
            "OUTPUT_S3_REGION": REGION,
            "OUTPUT_S3_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "OUTPUT_S3_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "OUTPUT_S3_TIMEOUT_S": "1",
        }
        values.update({k: str(v) for k, v in extra.items()})
        return values

    def start(self) -> MotoS3:
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{self.endpoint}/moto-api/", timeout=0.5, trust_env=False)
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto server on port {self.port} did not start")
            time.sleep(0.1)
        self.client().create_bucket(Bucket=self.bucket)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )

    def keys(self, job_id: str = "") -> list[str]:
        """Every object key under the prefix (of one job when given), relative to the prefix."""
        prefix = f"{self.prefix}/{job_id}"
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [obj["Key"][len(self.prefix) + 1 :] for page in pages for obj in page.get("Contents", [])]

    def reset(self) -> None:
        """Empty the bucket (between tests sharing the server)."""
        client = self.client()
        for key in self.keys():
            client.delete_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")


def moto_serving() -> Iterator[MotoS3]:
    """A module's moto server, started once and stopped at the end (`yield from` it in a fixture)."""
    server = MotoS3()
    try:
        yield server.start()
    finally:
        server.stop()
