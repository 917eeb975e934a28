"""Report outputs: where finished files live (local disk or an S3-compatible bucket) and how a download
hands them over. `get_output_store()` is the store OUTPUT_STORAGE names.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from app.core.config import Settings, get_settings
from app.outputs.base import OutputStore
from app.outputs.local import LocalOutputStore


@lru_cache(maxsize=4)
def _store_for(storage: str, spool_dir: Path, options: tuple[tuple[str, Any], ...]) -> OutputStore:
    if storage == "local":
        return LocalOutputStore(spool_dir)
    from app.outputs.s3 import S3OutputStore  # only S3 deployments load the client

    return S3OutputStore(storage, spool_dir, dict(options))


_last: tuple[Settings, OutputStore] | None = None  # the store of the settings object asked for last


def get_output_store() -> OutputStore:
    """The store OUTPUT_STORAGE names (one per distinct configuration, so tests may switch it); looked up
    once per settings object (every job asks)."""
    global _last
    settings = get_settings()
    if _last is None or _last[0] is not settings:
        options = settings.object_store_options
        _last = (settings, _store_for(settings.output_storage, Path(settings.output_dir), options))
    return _last[1]
