"""`python -m app.cli …`: reportctl run as a module (the tests and `make run` call it so), with readable log
lines unless LOG_JSON is set."""

from __future__ import annotations

import os

from app.cli import main

if __name__ == "__main__":
    os.environ.setdefault("LOG_JSON", "false")
    main()
