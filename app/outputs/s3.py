"""Report files in an S3-compatible bucket (AWS S3, MinIO, Aliyun OSS, Tencent COS) through obstore:
multipart uploads streamed from the local spool file, downloads streamed or handed over as presigned links.

Every failure of the store but "no such object" becomes OutputStoreUnavailable (retryable / 503).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import obstore
from obstore.store import S3Store

from app.outputs.base import (
    OutputStore,
    OutputStoreUnavailable,
    StoredOutput,
    content_disposition,
    written_up_to,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Multipart part size and parts in flight: what an upload holds in memory is about their product.
PART_SIZE_BYTES = 5 * 1024 * 1024  # the S3 minimum
PARTS_IN_FLIGHT = 2
#: Chunks a streamed download hands to the HTTP response.
STREAM_CHUNK_BYTES = 1024 * 1024
DELETE_BATCH = 1000  # keys a DeleteObjects call takes, and a listing's page
#: A range listing may read this many keys of other jobs per job asked for (plus a page) before the rest are
#: listed job by job (one call each), PREFIX_LISTINGS at a time.
FOREIGN_KEYS_PER_JOB = 2
PREFIX_LISTINGS = 16


def s3_config(options: dict[str, Any]) -> dict[str, Any]:
    """obstore's S3 settings from ours; whatever is unset, obstore reads from the AWS_* environment."""
    endpoint = options.get("output_s3_endpoint_url")
    config: dict[str, Any] = {}
    if endpoint:
        config["endpoint"] = endpoint
    if options.get("output_s3_region"):
        config["region"] = options["output_s3_region"]
    if options.get("output_s3_access_key_id"):
        config["access_key_id"] = options["output_s3_access_key_id"]
    if options.get("output_s3_secret_access_key"):
        config["secret_access_key"] = options["output_s3_secret_access_key"]
    path_style = options.get("output_s3_path_style")
    if path_style is None:
        path_style = bool(endpoint)  # MinIO and most self-hosted stores; AWS and OSS want virtual hosts
    config["virtual_hosted_style_request"] = not path_style
    return config


class S3OutputStore(OutputStore):
    def __init__(self, url: str, spool_dir: Path, options: dict[str, Any]) -> None:
        super().__init__(spool_dir)
        timeout = timedelta(seconds=float(options.get("output_s3_timeout_s", 30.0)))
        endpoint = str(options.get("output_s3_endpoint_url") or "")
        self.link_ttl_s = float(options.get("output_link_ttl_s", 60.0))
        self._store = S3Store.from_url(
            url,
            config=s3_config(options),  # type: ignore[arg-type]
            client_options={"connect_timeout": timeout, "allow_http": endpoint.startswith("http://")},
            retry_config={"max_retries": 3, "retry_timeout": timeout},
        )

    async def save(self, key: str, spooled: Path, content_type: str, filename: str) -> None:
        # obstore reads the file itself part by part (multipart above one part), never the whole file.
        await _guard(
            obstore.put_async(
                self._store,
                key,
                spooled,
                attributes={
                    "Content-Type": content_type,
                    "Content-Disposition": content_disposition(filename),
                },
                chunk_size=PART_SIZE_BYTES,
                max_concurrency=PARTS_IN_FLIGHT,
            ),
            f"upload {key}",
        )

    async def fetch(self, key: str) -> StoredOutput | None:
        if self.link_ttl_s > 0:
            meta = await _guard(obstore.head_async(self._store, key), f"head {key}", missing_ok=True)
            if meta is None:
                return None
            link = await _guard(
                obstore.sign_async(self._store, "GET", key, timedelta(seconds=self.link_ttl_s)),
                f"sign {key}",
            )
            return StoredOutput(size=int(meta["size"]), link=link)
        result = await _guard(obstore.get_async(self._store, key), f"get {key}", missing_ok=True)
        if result is None:
            return None
        stream = result.stream(min_chunk_size=STREAM_CHUNK_BYTES)
        return StoredOutput(size=int(result.meta["size"]), chunks=_bytes(stream))

    async def delete_jobs(self, job_ids: Sequence[str], replays: Mapping[str, int] | None = None) -> None:
        """One listing across the jobs' key range (keys list in order, each job's under its id), then
        DeleteObjects of up to 1000 keys a call: a few calls for thousands of jobs. Where other jobs' keys
        crowd the range, the rest are listed job by job, a few at a time."""
        ids = sorted(set(job_ids))
        if not ids:
            return

        async def delete_all() -> None:
            keys, rest = await self._keys_in_range(ids)
            listings = asyncio.Semaphore(PREFIX_LISTINGS)
            for listed in await asyncio.gather(*(self._keys_of(job_id, listings) for job_id in rest)):
                keys.extend(listed)
            keys = [key for key in keys if written_up_to(key, replays)]
            if keys:
                # DeleteObjects, DELETE_BATCH keys a call (a job listed both ways is named once).
                await obstore.delete_async(self._store, list(dict.fromkeys(keys)))

        await _guard(delete_all(), f"delete the files of {len(ids)} jobs")

    async def _keys_in_range(self, ids: list[str]) -> tuple[list[str], list[str]]:
        """The keys of `ids` (sorted) found listing from the first to the last, and the ids this listing
        did not cover: those past the point where it had read too many other jobs' keys, or all of them if
        the store does not list in key order."""
        wanted, keys, previous, foreign = set(ids), list[str](), "", 0
        allowance = FOREIGN_KEYS_PER_JOB * len(ids) + DELETE_BATCH
        async for page in obstore.list(self._store, offset=ids[0], chunk_size=DELETE_BATCH):
            for item in page:
                path = item["path"]
                owner = path.split("/", 1)[0]
                if path < previous:
                    return keys, ids  # not in key order: nothing says the range was covered
                if owner > ids[-1]:
                    return keys, []
                previous = path
                if owner in wanted:
                    keys.append(path)
                else:
                    foreign += 1
            if foreign > allowance:
                return keys, [job_id for job_id in ids if job_id >= previous.split("/", 1)[0]]
        return keys, []

    async def _keys_of(self, job_id: str, listings: asyncio.Semaphore) -> list[str]:
        async with listings:
            return [
                item["path"]
                async for page in obstore.list(self._store, prefix=f"{job_id}/", chunk_size=DELETE_BATCH)
                for item in page
            ]


async def _bytes(stream: Any) -> AsyncIterator[bytes]:
    """The object's chunks as bytes; a store gone mid-stream ends the response early (the client sees a
    short body, as with any dropped connection)."""
    async for chunk in stream:
        yield bytes(chunk)


async def _guard(work: Awaitable[T], what: str, missing_ok: bool = False) -> T | None:
    try:
        return await work
    except FileNotFoundError:
        if missing_ok:
            return None
        raise OutputStoreUnavailable(f"object store: {what}: not found") from None
    except (obstore.exceptions.BaseError, OSError, TimeoutError) as exc:
        log.warning("object store unavailable", extra={"operation": what, "error": str(exc)[:300]})
        raise OutputStoreUnavailable(f"The object store is unreachable ({what}); try again shortly.") from exc
