"""Find complete Flight Recorder dumps in the dump folder and upload each one the moment it is complete.

Completeness: a dump is the file ``<prefix><rank>`` (FR writes it directly, or renames it into place;
temporary names do not match and are ignored, and so are dot-files whatever their name: the workload's
``.frwatch_dump_requested`` flag and ``.nccl_trace_rank_<N>.<pid>.tmp`` files being written). It is read only after its size and mtime held still for
``stable_seconds`` and then it must parse: a pickle that loads with **no globals allowed** (real dumps
need none; this unpickler cannot run code) or a JSON object. A file that stays unparseable but unchanged
for ``corrupt_after_seconds`` is uploaded as is (a truncated dump is still evidence).

Layout (``frwatch_analyzers.layout.AttemptKey``): ``ranks/<rank>.<pickle|json>`` holds the first complete
dump of each rank in this attempt; a later, different dump of the same rank (a second dump in the same
process, or a container restarted in place) goes to ``ranks-later/<rank>.<unix-ms>.<fmt>`` so nothing is
overwritten. ``pods/<pod>.json`` (:class:`PodRecord`) says which ranks this pod held and where each went.

The local file is never deleted: an upload is confirmed when S3 returns an ETag equal to the MD5 of the
bytes read; until then it is retried with exponential backoff, whatever the error.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import pickle
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from frwatch_analyzers.layout import AttemptKey
from frwatch_operator.errors import FatalError, FrwatchError
from frwatch_operator.s3store import S3Store

logger = logging.getLogger(__name__)

Format = Literal["pickle", "json"]
LATER_DIR = "ranks-later"


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} refused: a Flight Recorder dump needs none")


def parse_dump(data: bytes) -> Format | None:
    """The dump's format if ``data`` is a whole, safe dump; None if it is not (yet) one."""
    if data[:1] == b"\x80":
        try:
            obj = _NoGlobals(io.BytesIO(data)).load()
        except Exception:
            return None
        return "pickle" if isinstance(obj, dict) else None
    if data.lstrip()[:1] == b"{":
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return None
        return "json" if isinstance(obj, dict) else None
    return None


def sniff_format(data: bytes) -> Format:
    return "json" if data.lstrip()[:1] == b"{" else "pickle"


@dataclass(frozen=True)
class Dump:
    """One complete dump read from disk."""

    rank: int
    path: Path
    data: bytes
    fmt: Format
    sha256: str
    corrupt: bool = False


@dataclass
class _Seen:
    size: int
    mtime_ns: int
    since: float
    taken_sha: str = ""  # content hash already handed out for this (size, mtime)


class DumpWatcher:
    """Polls the dump folder; returns each complete dump once per distinct content."""

    def __init__(self, dump_dir: Path, file_prefix: str, stable_seconds: float, corrupt_after_seconds: float):
        self.dump_dir = dump_dir
        self.pattern = re.compile(re.escape(file_prefix) + r"(\d+)")
        self.stable_seconds = stable_seconds
        self.corrupt_after_seconds = corrupt_after_seconds
        self._seen: dict[Path, _Seen] = {}
        self._handed: dict[int, set[str]] = {}

    def rank_of(self, name: str) -> int | None:
        m = self.pattern.fullmatch(name)
        return int(m.group(1)) if m else None

    def _dump_files(self) -> list[tuple[int, Path, os.stat_result]]:
        """(rank, path, stat) of each dump file in the folder (dot-files, other names, folders left out)."""
        try:
            entries = sorted(self.dump_dir.iterdir())
        except FileNotFoundError:
            return []
        out = []
        for path in entries:
            if path.name.startswith("."):
                continue  # flags and temporary files, never a dump
            rank = self.rank_of(path.name)
            if rank is None:
                continue
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append((rank, path, st))
        return out

    def poll(self, now: float) -> list[Dump]:
        out: list[Dump] = []
        for rank, path, st in self._dump_files():
            seen = self._seen.get(path)
            if seen is None or (seen.size, seen.mtime_ns) != (st.st_size, st.st_mtime_ns):
                self._seen[path] = _Seen(st.st_size, st.st_mtime_ns, now)
                continue
            if seen.taken_sha or now - seen.since < self.stable_seconds or st.st_size == 0:
                continue
            dump = self._read(rank, path, seen, now)
            if dump is not None:
                out.append(dump)
        return out

    def unsettled(self, now: float) -> list[Path]:
        """The dump files whose current content was not handed out yet (as of the last poll: a file that
        appeared or changed since, or is not complete yet). Empty: every dump present was taken. A file
        that stayed empty for ``corrupt_after_seconds`` holds nothing and does not count."""
        out: list[Path] = []
        for _, path, st in self._dump_files():
            seen = self._seen.get(path)
            current = seen is not None and (seen.size, seen.mtime_ns) == (st.st_size, st.st_mtime_ns)
            if current and seen is not None and (seen.taken_sha or self._empty_for_good(seen, now)):
                continue
            out.append(path)
        return out

    def _empty_for_good(self, seen: _Seen, now: float) -> bool:
        return seen.size == 0 and now - seen.since >= self.corrupt_after_seconds

    def _read(self, rank: int, path: Path, seen: _Seen, now: float) -> Dump | None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) != seen.size:
            return None  # changed under us: next poll
        fmt = parse_dump(data)
        corrupt = fmt is None
        if corrupt:
            if now - seen.since < self.corrupt_after_seconds:
                return None
            fmt = sniff_format(data)
            logger.warning("dump %s stayed unparseable for %.0fs: uploading as is", path, now - seen.since)
        sha = hashlib.sha256(data).hexdigest()
        seen.taken_sha = sha
        handed = self._handed.setdefault(rank, set())
        if sha in handed:
            return None
        handed.add(sha)
        assert fmt is not None
        return Dump(rank, path, data, fmt, sha, corrupt)


@dataclass
class _Pending:
    dump: Dump
    key: str
    tries: int = 0
    next_try: float = 0.0
    last_error: str = ""


@dataclass
class RankUpload:
    """Where one dump of a rank went (an entry of the pod record)."""

    key: str
    bytes: int
    sha256: str
    format: str
    corrupt: bool
    uploaded_at: float


@dataclass
class PodRecord:
    """``pods/<pod>.json``: the pod, its node, the ranks it held and where their dumps are."""

    pod: str
    namespace: str
    node: str
    uid: str
    job: str
    job_uid: str
    attempt: str
    agent_started_at: float
    ranks: dict[int, list[RankUpload]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        body = {
            "pod": self.pod, "namespace": self.namespace, "node": self.node, "uid": self.uid,
            "job": self.job, "job_uid": self.job_uid, "attempt": self.attempt,
            "agent_started_at": self.agent_started_at,
            "ranks": sorted(self.ranks),
            "dumps": {str(r): [u.__dict__ for u in ups] for r, ups in sorted(self.ranks.items())},
        }  # fmt: skip
        return json.dumps(body, indent=1).encode()


class Uploader:
    """Uploads dumps with retries; thread-safe ``submit``/``step``/``status``."""

    def __init__(
        self, store: S3Store, key: AttemptKey, record: PodRecord, *, bucket: str | None = None,
        backoff_initial: float = 0.5, backoff_max: float = 30.0,
    ) -> None:  # fmt: skip
        self.store = store
        self.key = key
        self.record = record
        self.bucket = bucket
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._record_dirty = True
        self._record_next_try = 0.0
        self._record_tries = 0
        self._first_key_of_rank: dict[int, str] = {}

    def key_for(self, dump: Dump) -> str:
        with self._lock:
            if dump.rank not in self._first_key_of_rank:
                key = self.key.rank(dump.rank, dump.fmt)
                self._first_key_of_rank[dump.rank] = key
                return key
        return f"{self.key.root}/{LATER_DIR}/{dump.rank}.{int(time.time() * 1000)}.{dump.fmt}"

    def submit(self, dump: Dump) -> None:
        key = self.key_for(dump)
        with self._lock:
            self._pending.append(_Pending(dump, key))

    def hurry(self, max_delay: float) -> None:
        """Retry sooner from now on (draining before exit): every delay at most ``max_delay``, and every
        upload waiting for its retry is due now."""
        with self._lock:
            self.backoff_max = min(self.backoff_max, max_delay)
            for item in self._pending:
                item.next_try = 0.0
            self._record_next_try = 0.0

    def _delay(self, tries: int) -> float:
        return float(min(self.backoff_max, self.backoff_initial * (2 ** max(0, tries - 1))))

    def step(self, now: float) -> int:
        """Try every due upload once; then the pod record if it changed. Returns uploads confirmed."""
        with self._lock:
            due = [p for p in self._pending if p.next_try <= now]
        done = 0
        for item in due:
            try:
                self.store.put(
                    item.key, item.dump.data, bucket=self.bucket, content_type="application/octet-stream"
                )
            except FrwatchError as exc:
                item.tries += 1
                item.last_error = str(exc)
                delay = self.backoff_max if isinstance(exc, FatalError) else self._delay(item.tries)
                item.next_try = time.monotonic() + delay
                log = logger.error if isinstance(exc, FatalError) else logger.warning
                log("upload of rank %d to %s failed (try %d, next in %.1fs): %s",
                    item.dump.rank, item.key, item.tries, delay, exc)  # fmt: skip
                continue
            done += 1
            logger.info("uploaded rank %d (%d bytes) to %s", item.dump.rank, len(item.dump.data), item.key)
            with self._lock:
                self._pending.remove(item)
                self.record.ranks.setdefault(item.dump.rank, []).append(
                    RankUpload(
                        item.key,
                        len(item.dump.data),
                        item.dump.sha256,
                        item.dump.fmt,
                        item.dump.corrupt,
                        time.time(),
                    )
                )
                self._record_dirty = True
        self._flush_record(now)
        return done

    def _flush_record(self, now: float) -> None:
        with self._lock:
            if not self._record_dirty or now < self._record_next_try:
                return
            self._record_dirty = False
            body = self.record.to_json()
        try:
            self.store.put(
                self.key.pod(self.record.pod), body, bucket=self.bucket, content_type="application/json"
            )
            self._record_tries = 0
        except FrwatchError as exc:
            self._record_tries += 1
            with self._lock:
                self._record_dirty = True
                self._record_next_try = time.monotonic() + self._delay(self._record_tries)
            logger.warning("pod record upload failed: %s", exc)

    @property
    def idle(self) -> bool:
        """Nothing left to upload (dumps and the pod record)."""
        with self._lock:
            return not self._pending and not self._record_dirty

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {
                "pod": self.record.pod,
                "root": self.key.root,
                "uploaded": {str(r): [u.key for u in ups] for r, ups in sorted(self.record.ranks.items())},
                "pending": [
                    {"rank": p.dump.rank, "key": p.key, "tries": p.tries, "error": p.last_error}
                    for p in self._pending
                ],
            }
