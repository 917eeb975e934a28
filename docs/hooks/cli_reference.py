"""MkDocs hook: `reportctl`'s reference, every command's plain `--help` from the typer app (CLI_APP, else the
module pyproject's [project.scripts] names); block `cli-reference`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import typer
from _generated import Block, pyproject, repo_root
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

#: The typer app, as "module:attribute".
CLI_APP = "app.cli:cli"

BLOCK = Block("cli-reference", f"docs/hooks/cli_reference.py (CLI_APP = {CLI_APP!r})")
#: Help is wrapped at this width, whatever the terminal that builds the docs.
HELP_WIDTH = 100
_root: list[Path] = []


def scripts() -> dict[str, str]:
    return dict(pyproject(_root[0]).get("project", {}).get("scripts", {}))


def root_typer(module: Any) -> typer.Typer | None:
    """The one typer app of `module` that is not a sub-command group of another."""
    apps = [value for value in vars(module).values() if isinstance(value, typer.Typer)]
    nested = {id(group.typer_instance) for app in apps for group in app.registered_groups}
    roots = [app for app in apps if id(app) not in nested]
    return roots[0] if len(roots) == 1 else None


def load_cli() -> tuple[str, typer.Typer]:
    """(program name, typer app)."""
    entries = scripts()
    module_name, _, attribute = CLI_APP.partition(":")
    try:
        app = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        app = None
        for entry in entries.values():
            try:
                app = root_typer(importlib.import_module(entry.partition(":")[0]))
            except ImportError:
                continue
            if app is not None:
                module_name = entry.partition(":")[0]
                break
        if app is None:
            raise PluginError(
                f"{BLOCK.owner}: cannot import {CLI_APP!r} ({type(exc).__name__}: {exc}), and no module "
                f"named by [project.scripts] ({entries or 'none'}) holds one typer app; set CLI_APP"
            ) from exc
    if not isinstance(app, typer.Typer):
        raise PluginError(f"{BLOCK.owner}: {CLI_APP!r} is a {type(app).__name__}, not a typer.Typer")
    names = [name for name, entry in entries.items() if entry.partition(":")[0] == module_name]
    return (names[0] if names else module_name.rsplit(".", 1)[-1]), app


def sections(command: Any, name: str, parent: Any = None, depth: int = 2) -> list[str]:
    """One heading and help block per command, depth first, in the order the CLI lists them."""
    command.rich_markup_mode = None  # typer's plain (click) help text, not rich's console output
    ctx = command.context_class(
        command, info_name=name, parent=parent, terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH
    )
    heading = "#" * min(depth, 4)
    out = [f"{heading} `{ctx.command_path}`", "```text\n" + command.get_help(ctx).rstrip() + "\n```"]
    if hasattr(command, "list_commands"):
        for sub in command.list_commands(ctx):
            child = command.get_command(ctx, sub)
            if child is not None and not getattr(child, "hidden", False):
                out += sections(child, sub, ctx, depth + 1)
    return out


def render(page: Page) -> str:
    program, app = load_cli()
    return "\n\n".join(sections(typer.main.get_command(app), program))


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    _root[:] = [repo_root(config)]
    return config


def on_pre_build(config: MkDocsConfig) -> None:
    BLOCK.reset()


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return BLOCK.fill(markdown, page, render)


def on_post_build(config: MkDocsConfig) -> None:
    BLOCK.check_used()
