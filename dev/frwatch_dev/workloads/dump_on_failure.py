"""NCCL's "every rank dumps its Flight Recorder on a timeout", imitated for gloo.

Gloo records collectives in the Flight Recorder but has no watchdog and never writes a dump by itself
(../shared/FACTS.md, section 1). This module gives a rank what NCCL's watchdog gives it:

- a watchdog: a thread in every rank dumps when the rank's collective has been in flight for `watchdog_s`
  (a little less than the process group's timeout, so the dump is taken while the collective is still
  blocked: taken after gloo raised, a dump may already show the entry retired and completed);
- a rank whose collective hangs or raises asks every rank to dump: a flag file next to the dumps (seen by
  ranks that share the folder) and a key in the job's TCPStore (seen by ranks in other pods, as NCCL does);
- the thread dumps when it sees either signal, then tears its process down (SIGABRT, as NCCL's watchdog
  does) if the process has not ended by itself within a grace period: a rank stuck in Python is not left
  hanging;
- a rank asked while it is still on its way to where it will block (``at_rest()`` false: between two
  collectives, not stuck) dumps once it gets there: inside a collective Flight Recorder recorded, or stuck
  outside one. NCCL's ranks dump the moment they are asked, but NCCL asks after a 10-minute timeout, when a
  rank that is not there is stuck; this module's watchdog fires after seconds, and on a loaded machine a
  rank can be that late. Dumped on its way, such a rank looks CPU-stuck before the hang and the analyzer
  rightly names it too (the skip scenario once gave culprits 0 and 1 so);
- a rank that trains to the end dumps at exit, once every collective it issued is retired.

A dump is written once per process, under `<prefix><global rank>` (the prefix from `TORCH_FR_DUMP_TEMP_FILE`,
else `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`, else `/tmp/nccl_trace_rank_`), through a temporary file in the same
folder and `os.rename`, so a reader never sees a half-written dump under the final name.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from torch._C import _distributed_c10d as c10d
from torch._C._distributed_c10d import TCPStore

from frwatch_operator.constants import (
    ENV_FR_DUMP_TEMP_FILE,
    ENV_FR_DUMP_TEMP_FILE_OLD,
    WORKLOAD_DUMP_FLAG_FILE,
)

DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
#: The flag file's mtime must be later than the reader's start (a flag left by an earlier job in the same
#: folder is ignored). The local launcher removes it afterwards.
FLAG_FILE_NAME = WORKLOAD_DUMP_FLAG_FILE
#: Set in the job's TCPStore (the one `MASTER_ADDR:MASTER_PORT` serves) by the first rank that fails.
STORE_KEY = "frwatch/dump_requested"


class DumpFormat(StrEnum):
    """What a dump file holds: the pickle torch's own dumps use, or `_dump_fr_trace_json`'s JSON (no frames)."""

    PICKLE = "pickle"
    JSON = "json"


def dump_prefix_from(environ: Mapping[str, str]) -> str:
    """The dump path prefix the Flight Recorder variables name (new name first, then the old one)."""
    for name in (ENV_FR_DUMP_TEMP_FILE, ENV_FR_DUMP_TEMP_FILE_OLD):
        value = environ.get(name, "")
        if value:
            return value
    return DEFAULT_DUMP_PREFIX


def dump_path(prefix: str, rank: int) -> Path:
    """Where rank `rank` dumps: `<prefix><rank>`, as NCCL names it."""
    return Path(f"{prefix}{rank}")


def flag_path(prefix: str) -> Path:
    """The flag file that asks every rank sharing the dump folder to dump."""
    return Path(prefix).parent / FLAG_FILE_NAME


def trace_bytes(fmt: DumpFormat) -> bytes:
    """This process's Flight Recorder, all process groups, in `fmt`."""
    if fmt is DumpFormat.JSON:
        data = c10d._dump_fr_trace_json(  # type: ignore[attr-defined]
            includeCollectives=True, onlyActive=False
        )
    else:
        data = c10d._dump_fr_trace(  # type: ignore[attr-defined]
            includeCollectives=True, includeStackTraces=True, onlyActive=False
        )
    return bytes(data)


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(tmp, path)


@dataclass(frozen=True)
class WatcherSettings:
    """How one rank's watcher behaves."""

    rank: int
    prefix: str
    fmt: DumpFormat
    #: `(MASTER_ADDR, MASTER_PORT)` of the job's TCPStore; None: the flag file only.
    store_addr: tuple[str, int] | None
    #: Dump and ask everyone to dump when a collective has been in flight this long (None: never).
    watchdog_s: float | None = None
    #: After dumping on the watchdog or a peer's signal, how long the process may take to end by itself
    #: (its collective raising, say) before SIGABRT.
    teardown_grace_s: float = 2.0
    #: How often the watcher looks for the flag file and the store key.
    poll_s: float = 0.1
    #: A safety net: past this age the rank asks everyone to dump and tears itself down.
    max_runtime_s: float = 600.0


class DumpWatcher:
    """One rank's Flight Recorder dumper: on its own failure, on a peer's signal, or at a clean exit."""

    def __init__(
        self,
        settings: WatcherSettings,
        *,
        in_flight_since: Callable[[], float | None],
        on_teardown: Callable[[str], None],
        at_rest: Callable[[], bool] | None = None,
    ) -> None:
        """`in_flight_since()`: the `time.monotonic()` at which the rank's current collective was enqueued, or
        None. `at_rest()`: is the rank where it will stay (inside a recorded collective, or stuck)? A peer's
        request is served only then; None: at once."""
        self.settings = settings
        self._in_flight_since = in_flight_since
        self._at_rest = at_rest
        self._on_teardown = on_teardown
        #: set once a peer asked every rank to dump (whether or not this rank has dumped yet)
        self.asked = threading.Event()
        self._started_at = time.time()
        self._lock = threading.Lock()
        self._dumped: Path | None = None
        self.dump_reason = ""
        self._exiting = threading.Event()
        self._failure = threading.Event()
        self._claimed = threading.Event()
        self._store: TCPStore | None = None
        self._thread = threading.Thread(target=self._watch, name="frwatch-dump-watcher", daemon=True)

    # --- the rank's side -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect to the job's store (best effort) and start watching."""
        if self.settings.store_addr is not None:
            host, port = self.settings.store_addr
            try:
                self._store = TCPStore(
                    host, port, is_master=False, timeout=timedelta(seconds=2), wait_for_workers=False
                )
            except Exception:  # the flag file still works without the store
                self._store = None
        self._thread.start()

    def wait_until_retired(self, timeout_s: float = 2.0) -> bool:
        """Wait until every collective this process issued is retired in FR (gloo retires asynchronously:
        a dump taken right after the last collective returned can still show it in flight)."""
        deadline = time.monotonic() + timeout_s
        while True:
            entries = json.loads(trace_bytes(DumpFormat.JSON)).get("entries", [])
            if all(entry.get("retired", True) for entry in entries):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def warm_up(self) -> None:
        """Take a throw-away dump: the first one in a process is slow (symbolizing), later ones take ~1 ms."""
        trace_bytes(self.settings.fmt)

    @property
    def dumped(self) -> Path | None:
        return self._dumped

    def dump(self, reason: str) -> Path | None:
        """Write this rank's dump unless it was written already; returns its path (None when it failed)."""
        with self._lock:
            if self._dumped is None:
                path = dump_path(self.settings.prefix, self.settings.rank)
                try:
                    write_atomically(path, trace_bytes(self.settings.fmt))
                except OSError:
                    return None
                self._dumped = path
                self.dump_reason = reason
            return self._dumped

    def dump_on_demand(self) -> Path | None:
        """Write an extra JSON dump now, beside the one written on failure or at exit
        (``<prefix><rank>.json``), as a live sample or an on-demand request leaves one."""
        path = Path(f"{dump_path(self.settings.prefix, self.settings.rank)}.json")
        try:
            write_atomically(path, trace_bytes(DumpFormat.JSON))
        except OSError:
            return None
        return path

    def request_everyone_dumps(self) -> None:
        """Tell every rank to dump: the flag file now, the store key from the watcher thread."""
        flag = flag_path(self.settings.prefix)
        try:
            flag.parent.mkdir(parents=True, exist_ok=True)
            flag.write_text(f"{self.settings.rank}\n")
        except OSError:
            pass
        self._failure.set()

    def claim_exit(self) -> None:
        """The rank's own code is ending the process (after a failure): no teardown from the watcher."""
        self._claimed.set()

    def exiting(self) -> None:
        """The process is ending by itself: the watcher stops."""
        self._claimed.set()
        self._exiting.set()

    # --- the watcher thread ----------------------------------------------------------------------------------
    def _watch(self) -> None:
        published = False
        dumped_at: float | None = None
        while not self._exiting.is_set():
            now = time.monotonic()
            if self._failure.is_set() and not published:
                published = self._publish()
            if time.time() - self._started_at > self.settings.max_runtime_s and not self._claimed.is_set():
                self.request_everyone_dumps()
                self._publish()
                self._tear_down(f"ran longer than {self.settings.max_runtime_s:.0f}s")
                return
            if dumped_at is None:
                reason = self._why_dump_now(now)
                if reason:
                    self.dump(reason)
                    dumped_at = now
            elif now - dumped_at > self.settings.teardown_grace_s and not self._claimed.is_set():
                self._tear_down(f"still running {self.settings.teardown_grace_s:.1f}s after dumping")
                return
            time.sleep(self.settings.poll_s)

    def _why_dump_now(self, now: float) -> str:
        since = self._in_flight_since()
        watchdog = self.settings.watchdog_s
        if watchdog is not None and since is not None and now - since > watchdog:
            self.request_everyone_dumps()
            return "watchdog"
        if not self._failure.is_set() and (self.asked.is_set() or self._peer_asked()):
            self.asked.set()
            if self._at_rest is None or self._at_rest():
                return "peer asked"
        return ""

    def _publish(self) -> bool:
        if self._store is not None:
            try:
                self._store.set(STORE_KEY, str(self.settings.rank))
            except Exception:  # the store's host may be gone; the flag file is written already
                self._store = None
        return True

    def _peer_asked(self) -> bool:
        try:
            if flag_path(self.settings.prefix).stat().st_mtime >= self._started_at - 1.0:
                return True
        except OSError:
            pass
        if self._store is None:
            return False
        try:
            return bool(self._store.check([STORE_KEY]))
        except Exception:  # the store's host (rank 0) is gone: rely on the flag file
            self._store = None
            return False

    def _tear_down(self, why: str) -> None:
        self.dump("torn down")
        self._on_teardown(why)
        os.abort()
