"""`python -m app.reports.declared check FILE`: check a report-types file (for CI); exit 1 if refused."""

from __future__ import annotations

import sys
from pathlib import Path

from app.reports.declared.check import check_file

USAGE = "usage: python -m app.reports.declared check FILE"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "check":
        print(USAGE, file=sys.stderr)
        return 2
    status, message = check_file(Path(argv[1]))
    print(message, file=sys.stderr if status else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
