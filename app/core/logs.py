"""Process-wide logging: JSON lines on stderr by default, readable text when LOG_JSON=false (`make run`).

Secrets never reach logs: settings hold them as SecretStr and nothing logs raw keys.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from app.core.config import get_settings

# Attributes every LogRecord has; anything else on a record came from `extra=` and is worth showing.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# Extras no line shows: uvicorn's `color_message` is its message again with ANSI colour codes (for its own
# formatter, which ours replace), escape sequences in a log file or a terminal that is not one.
HIDDEN_EXTRAS = frozenset({"color_message"})
# Libraries that log each request or tick at INFO: their routine lines only at WARNING.
QUIET_LOGGERS = ("httpx", "httpcore", "apscheduler")


class TextFormatter(logging.Formatter):
    """`12:00:30 WARNING app.dispatch.queue: enqueue failed job_id=01J… error=…`: one line, with extras."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {
            k: v
            for k, v in vars(record).items()
            if k not in _STANDARD_ATTRS and k not in HIDDEN_EXTRAS and not k.startswith("_")
        }
        if not extras:
            return line
        pairs = " ".join(f"{key}={value}" for key, value in extras.items())
        head, newline, tail = line.partition("\n")  # a traceback stays below the first line
        return f"{head} {pairs}{newline}{tail}"


def setup_logging(process: str) -> None:
    settings = get_settings()
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_json:
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                static_fields={"process": process},
                reserved_attrs=[*RESERVED_ATTRS, *HIDDEN_EXTRAS],
            )
        )
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # uvicorn gives its loggers handlers of their own (plain text even in JSON mode): route them through ours,
    # except an access log that `--no-access-log` turned off (no handlers, not propagating): it stays off.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "arq"):
        logger = logging.getLogger(name)
        if name == "uvicorn.access" and not logger.handlers and not logger.propagate:
            continue
        logger.handlers.clear()
        logger.propagate = True
    # httpx logs every request URL at INFO; webhook URLs carry tokens (DingTalk's access_token).
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # arq writes two INFO lines per job (`  0.01s → …`, `  0.01s ← …`); the attempt service writes one
    # structured line per terminal transition instead, and the workers announce themselves (fleet). Below
    # DEBUG, arq's worker logger keeps its warnings and errors only: its INFO lines are not even built.
    arq_level = logging.NOTSET if root.isEnabledFor(logging.DEBUG) else logging.WARNING
    logging.getLogger("arq.worker").setLevel(arq_level)
    # No line shows where it was logged from, or the thread and process names: the logging HOWTO's
    # "Optimization" switches, so a record costs no stack walk (the process is a static field).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
