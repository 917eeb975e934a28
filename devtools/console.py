"""The dev launcher's terminal: one line at a time from the launcher and its children, each prefixed with
its source (coloured on a terminal unless NO_COLOR is set).
"""

from __future__ import annotations

import os
import sys
import threading

COLORS = {"api": 36, "worker": 32, "dead-letter": 35, "scheduler": 33, "redis": 31, "migrate": 34, "keys": 34}


class Console:
    """Serialises output lines from the launcher and its children, each prefixed with its source."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._color = sys.stdout.isatty() and "NO_COLOR" not in os.environ

    def _write(self, text: str) -> None:
        with self._lock:
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except (OSError, ValueError):
                pass  # keep draining the children's pipes even if our stdout is gone

    def line(self, name: str, text: str) -> None:
        prefix = f"{name:<11}| "
        if self._color:
            prefix = f"\033[{COLORS.get(name, 1)}m{prefix}\033[0m"
        self._write(f"{prefix}{text}\n")

    def lines(self, name: str, text: str) -> None:
        for line in text.splitlines():
            self.line(name, line)

    def block(self, text: str) -> None:
        self._write(text)
