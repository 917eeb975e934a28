"""Process-wide logging: JSON lines on stderr (or plain text when LOG_JSON=false).

Secrets never reach logs: settings hold them as SecretStr and nothing logs raw keys.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

from app.config import get_settings


def setup_logging(process: str) -> None:
    settings = get_settings()
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_json:
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s", static_fields={"process": process}
            )
        )
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s {process} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # httpx logs every request URL at INFO; webhook URLs carry tokens (DingTalk's access_token).
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
