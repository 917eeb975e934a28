"""A short database outage on cue: stop the suite's private MariaDB now, start it again a little later.

Given to a fake peer's `before_next_answer()`, it falls between the peer's acceptance and our record of it.
"""

from __future__ import annotations

import threading
import time

from devtools.servers import MariaDBServer


class MariaDBBlip:
    """Callable once: stops `server` (SIGTERM, as a restart does) and starts it again `down_s` later in a
    background thread; `wait_back()` blocks until it answers again and reports what happened."""

    def __init__(self, server: MariaDBServer, down_s: float) -> None:
        self.server = server
        self.down_s = down_s
        self.stopped_at: float | None = None
        self.back_at: float | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def __call__(self) -> None:
        self.server.stop()
        self.stopped_at = time.monotonic()
        self._thread = threading.Thread(target=self._start_later, name="mariadb-blip", daemon=True)
        self._thread.start()

    def _start_later(self) -> None:
        try:
            time.sleep(self.down_s)
            self.server.start()
            self.back_at = time.monotonic()
        except BaseException as exc:  # surfaced by wait_back() in the test's thread
            self._error = exc

    @property
    def happened(self) -> bool:
        return self.stopped_at is not None

    def wait_back(self, timeout_s: float = 60.0) -> None:
        """Block until the server is up again (at once if the blip never fired); always leaves it running."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._error is not None:
            raise self._error
        self.server.start()  # no-op when running; a safety net for the tests after this one
