"""Process-wide logging: JSON lines on stderr by default, readable text when LOG_JSON=false (`make run`).

Secrets never reach logs: settings hold them as SecretStr and nothing logs raw keys.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

from app.core.config import get_settings

# Attributes every LogRecord has; anything else on a record came from `extra=` and is worth showing.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# Libraries that log each request or tick at INFO: their routine lines only at WARNING.
QUIET_LOGGERS = ("httpx", "httpcore", "apscheduler")


class TextFormatter(logging.Formatter):
    """`12:00:30 WARNING app.core.queue: enqueue failed job_id=01J… error=…`: one line, extras included."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")}
        if not extras:
            return line
        pairs = " ".join(f"{key}={value}" for key, value in extras.items())
        head, newline, tail = line.partition("\n")  # a traceback stays below the first line
        return f"{head} {pairs}{newline}{tail}"


class ArqJobLines(logging.Filter):
    """Drops arq's two INFO lines per job (`  0.01s → …` and `  0.01s ← …`): the attempt service logs one
    structured line per terminal transition instead. Warnings, errors and LOG_LEVEL=DEBUG keep them all."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or logging.getLogger().isEnabledFor(logging.DEBUG):
            return True
        return not (isinstance(record.msg, str) and record.msg.startswith("%6.2fs"))


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
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # uvicorn gives its loggers handlers of their own (plain text even in JSON mode): route them through ours.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "arq"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # httpx logs every request URL at INFO; webhook URLs carry tokens (DingTalk's access_token).
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    arq_worker = logging.getLogger("arq.worker")
    if not any(isinstance(f, ArqJobLines) for f in arq_worker.filters):
        arq_worker.addFilter(ArqJobLines())
