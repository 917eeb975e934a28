"""Reading Prometheus exposition text as a test would: parse it, then sum the samples that match."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def value(text: str, name: str, **labels: Any) -> float:
    """The sum of every `name` sample whose labels include `labels` (0 when there is none)."""
    want = {k: str(v) for k, v in labels.items()}
    return sum(v for n, got, v in samples(text) if n == name and want.items() <= got.items())


def label_sets(text: str, name: str) -> list[dict[str, str]]:
    return [got for n, got, _ in samples(text) if n == name]


def scrape(url: str) -> str:
    """GET a process's /metrics over real HTTP."""
    resp = httpx.get(url, timeout=5)
    resp.raise_for_status()
    return resp.text


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    """`promtool check metrics` on an exposition (promtool comes from Debian's prometheus package)."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: `make system-deps` installs Debian's prometheus package"
    return subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
