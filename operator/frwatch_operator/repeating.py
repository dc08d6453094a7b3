"""A step repeated in a background thread until stopped: the loop the leader election and the live shards run.

:class:`Repeating` calls its step, waits ``every`` seconds (woken at once by :meth:`Repeating.stop`), and
again; :meth:`Repeating.stop` waits for the step under way to end (up to ``every + 10`` seconds).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Repeating:
    """Calls ``step`` every ``every`` seconds in a daemon thread named ``name``, from :meth:`start` to :meth:`stop`."""

    def __init__(self, step: Callable[[], object], every: float, name: str) -> None:
        self.step, self.every, self.name = step, every, name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.every)

    def stop(self) -> None:
        """Stop repeating and wait for the step under way (if any) to end. Idempotent; a no-op before start."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.every + 10)
