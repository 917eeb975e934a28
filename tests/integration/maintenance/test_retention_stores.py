"""The output stores' batch delete, as retention calls it: every file of the jobs named, none of any other
job's; on S3, one listing across the batch's key range (job by job only where other jobs crowd it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.ids import new_id
from app.outputs import get_output_store, s3
from tests.utils.object_store import MotoS3, moto_serving
from tests.utils.retention import write_outputs


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoS3]:
    yield from moto_serving()


@pytest.fixture
async def bucket(env: Any, moto: MotoS3) -> MotoS3:
    moto.start()
    moto.reset()
    await env.set(**moto.settings())
    return moto


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The listings the S3 store starts (prefix, offset), in order."""
    started: list[dict[str, Any]] = []
    real_list = s3.obstore.list

    def counted(store: Any, prefix: str | None = None, **kwargs: Any) -> Any:
        started.append({"prefix": prefix, "offset": kwargs.get("offset")})
        return real_list(store, prefix, **kwargs)

    monkeypatch.setattr(s3.obstore, "list", counted)
    return started


def interleaved(count: int) -> tuple[list[str], list[str]]:
    """`count` ids to delete and as many to keep, alternating in key order (every kept job's keys lie
    inside the range of the deleted ones)."""
    ids = sorted(new_id() for _ in range(2 * count))
    return ids[0::2], ids[1::2]


def upload_attempts(moto: MotoS3, job_ids: list[str]) -> None:
    """Two attempts' files per job, as a retried job leaves them."""
    client = moto.client()
    for job_id in job_ids:
        for attempt in (1, 2):
            key = f"{moto.prefix}/{job_id}/r0-a{attempt}/report-{job_id}.csv"
            client.put_object(Bucket=moto.bucket, Key=key, Body=b"id\n1\n")


async def test_the_local_store_deletes_the_batch_s_directories_and_leaves_every_other(
    env: Any, tmp_path: Path
) -> None:
    await env.set(OUTPUT_DIR=tmp_path)
    gone, kept = interleaved(50)
    store = get_output_store()
    write_outputs(store.spool_dir, gone + kept)

    await store.delete_jobs([*gone, new_id()])  # a job that has no file is no error

    assert sorted(os.listdir(store.spool_dir)) == kept


async def test_the_object_store_deletes_a_batch_with_one_listing_and_leaves_the_jobs_in_between(
    bucket: MotoS3, listings: list[dict[str, Any]]
) -> None:
    gone, kept = interleaved(60)
    upload_attempts(bucket, gone + kept)

    await get_output_store().delete_jobs(gone)

    assert listings == [{"prefix": None, "offset": gone[0]}]
    assert sorted(bucket.keys()) == sorted(
        f"{job_id}/r0-a{a}/report-{job_id}.csv" for job_id in kept for a in (1, 2)
    )


async def test_where_other_jobs_crowd_the_range_the_rest_of_the_batch_is_listed_job_by_job(
    bucket: MotoS3, listings: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 4 keys and no allowance for other jobs' keys beyond a page's worth: the range listing gives
    up once it read more than that, and every job it did not reach is listed by its own prefix."""
    monkeypatch.setattr(s3, "DELETE_BATCH", 4)
    monkeypatch.setattr(s3, "FOREIGN_KEYS_PER_JOB", 0)
    gone, kept = interleaved(6)
    upload_attempts(bucket, gone + kept)

    await get_output_store().delete_jobs(gone)

    # Each page holds a deleted job's 2 keys and a kept one's 2: 6 of the kept ones' after the third page.
    assert listings[0] == {"prefix": None, "offset": gone[0]}
    assert sorted(entry["prefix"] for entry in listings[1:]) == [f"{job_id}/" for job_id in gone[3:]]
    assert len(bucket.keys()) == 2 * len(kept)
