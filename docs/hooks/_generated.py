"""What the docs hooks share: a page's generated block (`<!-- generated: NAME -->` … `<!-- /generated -->`),
filled at build time by the hook that owns NAME, and the repository's root and pyproject.toml.
"""

from __future__ import annotations

import posixpath
import re
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

BLOCK = re.compile(r"<!-- generated: (?P<name>[\w-]+) -->\n.*?<!-- /generated -->", re.DOTALL)
MARKDOWN_LINK = re.compile(r"\]\((?!https?:|mailto:|#|/)(?P<target>[^)\s]+)\)")


def repo_root(config: MkDocsConfig) -> Path:
    """The folder of mkdocs.yml, put first on sys.path so `app` imports from this checkout."""
    root = Path(config.config_file_path).resolve().parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return root


def pyproject(root: Path) -> dict[str, Any]:
    path = root / "pyproject.toml"
    if not path.exists():
        raise PluginError(f"docs hooks: no {path} (they read [project.scripts] and [tool.importlinter])")
    with path.open("rb") as fh:
        return tomllib.load(fh)


def relative_links(markdown: str, page: Page) -> str:
    """Rewrite links written relative to docs/ (as in Settings' descriptions) relative to `page`."""
    here = posixpath.dirname(page.file.src_uri)

    def fix(match: re.Match[str]) -> str:
        return f"]({posixpath.relpath(match.group('target'), here or '.')})"

    return MARKDOWN_LINK.sub(fix, markdown)


class Block:
    """One named generated block: filled in every page that has it, and required in at least one."""

    def __init__(self, name: str, owner: str) -> None:
        self.name = name
        self.owner = owner
        self.pages: list[str] = []

    def reset(self) -> None:
        self.pages.clear()

    def fill(self, markdown: str, page: Page, render: Callable[[Page], str]) -> str:
        if f"<!-- generated: {self.name} -->" not in markdown:
            return markdown
        matches = [m for m in BLOCK.finditer(markdown) if m.group("name") == self.name]
        if not matches:
            raise PluginError(
                f"{page.file.src_uri}: '<!-- generated: {self.name} -->' has no closing '<!-- /generated -->'"
            )
        text = render(page).strip("\n")
        self.pages.append(page.file.src_uri)
        for match in reversed(matches):
            markdown = markdown[: match.start()] + text + markdown[match.end() :]
        return markdown

    def check_used(self) -> None:
        if not self.pages:
            raise PluginError(
                f"{self.owner}: no page has the block '<!-- generated: {self.name} -->' … "
                "'<!-- /generated -->'; put it back where the generated text belongs"
            )


def cell(text: str) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
