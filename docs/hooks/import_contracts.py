"""MkDocs hook: import-linter's contracts (pyproject, .importlinter or setup.cfg) as the architecture page's
layer diagram and rules, with module and contract names as configured; block `layers`.
"""

from __future__ import annotations

import configparser
from pathlib import Path
from typing import Any

from _generated import Block, pyproject, repo_root
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

BLOCK = Block("layers", "docs/hooks/import_contracts.py")
INI_FILES = (".importlinter", "setup.cfg")
_root: list[Path] = []


def as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip()]
    return [str(item) for item in value or []]


def ini_contracts(path: Path) -> list[dict[str, Any]] | None:
    parser = configparser.ConfigParser()
    parser.read(path)
    if not parser.has_section("importlinter"):
        return None
    return [
        dict(parser.items(section))
        for section in parser.sections()
        if section.startswith("importlinter:contract:")
    ]


def load_contracts() -> tuple[str, list[dict[str, Any]]]:
    """(where they were read, the contracts)."""
    root = _root[0]
    linter = pyproject(root).get("tool", {}).get("importlinter")
    if linter is not None:
        return "pyproject.toml [tool.importlinter]", list(linter.get("contracts", []))
    for name in INI_FILES:
        if (root / name).exists() and (found := ini_contracts(root / name)) is not None:
            return f"{name} [importlinter]", found
    raise PluginError(
        f"{BLOCK.owner}: no import-linter configuration in pyproject.toml [tool.importlinter], "
        f"{' or '.join(INI_FILES)}; the architecture page draws its layers from it"
    )


def layer_modules(layer: str) -> tuple[list[str], str]:
    """The modules of one layer line and how its siblings relate (import-linter's `|` and `:`)."""
    for separator, note in (("|", "independent: none imports another"), (":", "siblings")):
        if separator in layer:
            return [m.strip() for m in layer.split(separator)], note
    return [layer.strip()], ""


def diagram(layers: list[str]) -> str:
    """The layers stacked top to bottom in one box, independent siblings marked on the right."""
    rows = []
    for layer in layers:
        modules, note = layer_modules(layer)
        names = [m[1:-1] + " (optional)" if m.startswith("(") and m.endswith(")") else m for m in modules]
        rows.append(("  ·  ".join(names), note))
    width = max(len(text) for text, _ in rows) + 2
    lines = ["┌" + "─" * width + "┐"]
    for index, (text, note) in enumerate(rows):
        if index:
            lines.append("├" + "─" * width + "┤")
        lines.append("│ " + text.ljust(width - 1) + "│" + (f"  {note}" if note else ""))
    lines.append("└" + "─" * width + "┘")
    return "```text\n" + "\n".join(lines) + "\n```"


def code_list(modules: list[str]) -> str:
    return ", ".join(f"`{m}`" for m in modules)


def describe(contract: dict[str, Any]) -> str:
    kind = str(contract.get("type", ""))
    name = str(contract.get("name", "(unnamed contract)"))
    out = [f"**{name}** ({kind} contract)"]
    if kind == "layers":
        layers = as_list(contract.get("layers"))
        if not layers:
            raise PluginError(f"{BLOCK.owner}: the layers contract {name!r} lists no layers")
        containers = as_list(contract.get("containers"))
        inside = f" inside each of {code_list(containers)}" if containers else ""
        out.append(f"Top to bottom: each layer{inside} may import only the layers below it.")
        out.append(diagram(layers))
    elif kind == "forbidden":
        indirect = str(contract.get("allow_indirect_imports", "")).lower() == "true"
        how = "directly (through another module is allowed)" if indirect else "directly or indirectly"
        out.append(
            f"{code_list(as_list(contract.get('source_modules')))} may not import "
            f"{code_list(as_list(contract.get('forbidden_modules')))}, {how}."
        )
    elif kind == "independence":
        out.append(f"{code_list(as_list(contract.get('modules')))} may not import one another.")
    else:
        settings = {k: v for k, v in contract.items() if k not in ("name", "type", "ignore_imports")}
        out.append("; ".join(f"{k}: {code_list(as_list(v))}" for k, v in settings.items()))
    ignored = as_list(contract.get("ignore_imports"))
    if ignored:
        out.append("Allowed exceptions:\n\n" + "\n".join(f"- `{rule}`" for rule in ignored))
    return "\n\n".join(out)


def render(page: Page) -> str:
    source, contracts = load_contracts()
    layered = [c for c in contracts if c.get("type") == "layers"]
    if not layered:
        raise PluginError(f"{BLOCK.owner}: {source} has no contract of type 'layers' to draw")
    ordered = layered + [c for c in contracts if c.get("type") != "layers"]
    intro = f"The {len(contracts)} contracts of {source}, checked by `lint-imports` in `make test`:"
    return "\n\n".join([intro, *(describe(c) for c in ordered)])


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    _root[:] = [repo_root(config)]
    return config


def on_pre_build(config: MkDocsConfig) -> None:
    BLOCK.reset()


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return BLOCK.fill(markdown, page, render)


def on_post_build(config: MkDocsConfig) -> None:
    BLOCK.check_used()
