"""MkDocs hook: the configuration table, one row per settings field (environment variable, default and
`Field(description=...)`), read from the class only, never from the environment; block `settings-table`.
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

from _generated import Block, cell, relative_links, repo_root
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

#: The settings class, as "module:attribute".
SETTINGS = "app.core.config:Settings"

BLOCK = Block("settings-table", f"docs/hooks/settings_table.py (SETTINGS = {SETTINGS!r})")
#: Durations of at least an hour get their reading beside the seconds: `604800` (7 days).
UNITS_S = ((86400, "day", "days"), (3600, "h", "h"))


def load_settings() -> Any:
    module_name, _, attribute = SETTINGS.partition(":")
    try:
        settings = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise PluginError(
            f"{BLOCK.owner}: cannot import {SETTINGS!r} ({type(exc).__name__}: {exc}); "
            "if the settings class moved, point SETTINGS at it"
        ) from exc
    if not hasattr(settings, "model_fields"):
        raise PluginError(f"{BLOCK.owner}: {SETTINGS!r} is not a pydantic settings class")
    return settings


def number(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def plain(value: Any) -> Any:
    """The default as the environment would spell it (JSON for lists and maps, no `.0` on whole numbers)."""
    if hasattr(value, "get_secret_value"):
        return plain(value.get_secret_value())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def duration_note(name: str, value: Any) -> str:
    if not name.endswith("_s") or isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    for size, one, many in UNITS_S:
        if value >= size and math.isclose(value % size, 0):
            count = int(value // size)
            return f" ({count} {one if count == 1 else many})"
    return ""


def default_text(name: str, field: Any) -> str:
    if field.is_required():
        return "required"
    value = plain(field.default_factory() if field.default_factory is not None else field.default)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list):
        return f"`{json.dumps(value, separators=(',', ':'))}`" if value else "empty"
    if isinstance(value, dict):
        return f"`{json.dumps(value, separators=(',', ':'))}`"
    if isinstance(value, Path):
        text = value.as_posix()
        return f"`{text if value.is_absolute() else './' + text}`"
    if value == "":
        return "empty"
    shown = number(value) if isinstance(value, float) else str(value)
    return f"`{shown}`{duration_note(name, value)}"


def render(page: Page) -> str:
    settings = load_settings()
    prefix = str(settings.model_config.get("env_prefix", "") or "")
    missing = [name for name, field in settings.model_fields.items() if not field.description]
    if missing:
        raise PluginError(
            f"{BLOCK.owner}: these settings have no Field(description=...), which is their row in the docs: "
            + ", ".join(missing)
        )
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for name, field in settings.model_fields.items():
        variable = (prefix + str(field.alias or name)).upper()
        rows.append(f"| `{variable}` | {default_text(name, field)} | {cell(field.description)} |")
    return relative_links("\n".join(rows), page)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    repo_root(config)
    return config


def on_pre_build(config: MkDocsConfig) -> None:
    BLOCK.reset()


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return BLOCK.fill(markdown, page, render)


def on_post_build(config: MkDocsConfig) -> None:
    BLOCK.check_used()
