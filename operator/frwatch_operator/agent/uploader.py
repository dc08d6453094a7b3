"""Upload each complete dump the moment the watcher (``dumpfiles``) hands it out, streaming, never losing one.

Layout (``frwatch_analyzers.store.layout.AttemptKey``): ``ranks/<rank>.<pickle|json>`` holds the first complete
dump of each rank in this attempt; a later, different dump of the same rank (a second dump in the same
process, or a container restarted in place) goes to ``ranks-later/<rank>.<unix-ms>.<fmt>`` so nothing is
overwritten. ``summaries/<rank>.json`` (:mod:`frwatch_analyzers.summaries.rank_summary`) is the summary of ``ranks/<rank>``,
made right after that upload, best effort. ``pods/<pod>.json``
(:class:`~frwatch_analyzers.store.pod_record.StoredPodRecord`) says which
ranks this pod held, where each went, and what the watcher skipped in the folder and why.

Memory: no dump is held. An upload opens the file again (``O_NOFOLLOW``, a regular file, the very file and
content that were hashed) and streams it (``S3Store.put_file``: multipart for large files, at most two
parts in memory). The local file is never deleted. An upload is confirmed when the store holds the
size sent (and, sent in one part, an ETag equal to the MD5 of the bytes hashed) and the file did not
change meanwhile; until then it is retried with exponential backoff, whatever the error. A dump whose
file was replaced before it could be uploaded (FR truncates its file for each dump) cannot be: that is
logged and recorded in the pod record (``replaced``), and the newer content is uploaded in its place.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from frwatch_analyzers.base.limits import MIB
from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.store.pod_record import RankUpload, StoredPodRecord
from frwatch_analyzers.summaries.writer import NotSummarised, summarise_file
from frwatch_operator.agent.dumpfiles import Dump, FileId, NotADump, open_regular
from frwatch_operator.errors import FatalError, FrwatchError
from frwatch_operator.store.s3 import S3Store

logger = logging.getLogger(__name__)

#: Dumps larger than this get no summary (the analyzer decodes them): a dump decodes to about 10 times its
#: size, and the worker that summarises it lives in the agent's container (256 MiB by default).
SUMMARY_MAX_DUMP_BYTES = 8 * MIB
#: Memory the summarising worker may map beyond the agent's own (a 2000-entry dump needs about 10 MB).
SUMMARY_WORKER_BYTES = 128 * MIB


@dataclass
class _Pending:
    dump: Dump
    key: str = ""  #: chosen at the first try, kept across retries
    tries: int = 0
    next_try: float = 0.0
    last_error: str = ""


class _Replaced(Exception):
    """The dump's file no longer holds the content that was handed out."""


class Uploader:
    """Uploads dumps with retries; thread-safe ``submit``/``step``/``status``."""

    def __init__(
        self, store: S3Store, key: AttemptKey, record: StoredPodRecord, *, bucket: str | None = None,
        backoff_initial: float = 0.5, backoff_max: float = 30.0, summaries: bool = True,
    ) -> None:  # fmt: skip
        self.store = store
        self.key = key
        self.summaries = summaries  #: write summaries/<rank>.json after each rank's first dump
        self.record = record  #: who the agent is; what it uploaded, skipped and lost is kept beside it
        self._uploads: dict[int, list[RankUpload]] = {}
        self._skipped: list[dict[str, str]] = []
        self._replaced_dumps: list[dict[str, Any]] = []
        self.bucket = bucket
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._record_dirty = True
        self._record_next_try = 0.0
        self._record_tries = 0
        #: rank -> the key of its first dump (``ranks/``), once an upload there was tried
        self._first_key_of_rank: dict[int, str] = {}
        self._confirmed_first: set[int] = set()

    def _key_for(self, dump: Dump) -> str:
        with self._lock:
            if dump.rank not in self._first_key_of_rank:
                key = self.key.rank(dump.rank, dump.fmt)
                self._first_key_of_rank[dump.rank] = key
                return key
        return self.key.later(dump.rank, int(time.time() * 1000), dump.fmt)

    def submit(self, dump: Dump) -> None:
        with self._lock:
            self._pending.append(_Pending(dump))

    def ranks(self) -> frozenset[int]:
        """The ranks whose dumps this pod wrote (uploaded or on their way)."""
        with self._lock:
            return frozenset(self._first_key_of_rank) | frozenset(self._uploads)

    def note_skipped(self, skipped: list[dict[str, str]]) -> None:
        """What the watcher skipped in the folder (for the pod record), when it changed."""
        with self._lock:
            if skipped != self._skipped:
                self._skipped = list(skipped)
                self._record_dirty = True

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

    def _upload(self, item: _Pending) -> None:
        """Stream the dump's file to its key. Raises :class:`_Replaced` when the file no longer holds
        what was handed out (before or while it was read), a :class:`FrwatchError` when the store failed."""
        dump = item.dump
        try:
            fd, st = open_regular(dump.path)
        except (NotADump, OSError) as exc:
            raise _Replaced(str(exc)) from exc
        try:
            if FileId.of(st) != dump.file:
                raise _Replaced("the file changed")
            # streamed from the file this descriptor holds open (never through a link, whatever the name
            # points at by now); a file object would be read part by part into memory instead
            self.store.put_file(
                item.key, f"/proc/self/fd/{fd}", size=dump.size, md5=dump.md5, bucket=self.bucket,
                content_type="application/octet-stream",
            )  # fmt: skip
            if FileId.of(os.fstat(fd)) != dump.file:
                raise _Replaced("the file changed while it was uploaded")
        finally:
            os.close(fd)

    def _replaced(self, item: _Pending, why: str) -> None:
        dump = item.dump
        with self._lock:
            self._pending.remove(item)
            if self._first_key_of_rank.get(dump.rank) == item.key and dump.rank not in self._confirmed_first:
                del self._first_key_of_rank[dump.rank]  # the newer content takes ranks/<rank>
            self._replaced_dumps.append(
                {"rank": dump.rank, "bytes": dump.size, "sha256": dump.sha256, "why": why, "at": time.time()}
            )
            self._record_dirty = True
        logger.error(
            "dump of rank %d (%d bytes, %s) was replaced before it could be uploaded (%s): this content is "
            "lost; the newer one is uploaded", dump.rank, dump.size, dump.path, why,
        )  # fmt: skip

    def step(self, now: float) -> int:
        """Try every due upload once; then the pod record if it changed. Returns uploads confirmed."""
        with self._lock:
            due = [p for p in self._pending if p.next_try <= now]
        done = 0
        for item in due:
            if not item.key:
                item.key = self._key_for(item.dump)
            try:
                self._upload(item)
            except _Replaced as exc:
                self._replaced(item, str(exc))
                continue
            except Exception as exc:  # a store error, or a bug: retried with backoff, never in a tight loop
                item.tries += 1
                item.last_error = str(exc) if isinstance(exc, FrwatchError) else repr(exc)
                delay = self.backoff_max if isinstance(exc, FatalError) else self._delay(item.tries)
                item.next_try = time.monotonic() + delay
                log = logger.warning if isinstance(exc, FrwatchError) else logger.error
                log("upload of rank %d to %s failed (try %d, next in %.1fs): %s",
                    item.dump.rank, item.key, item.tries, delay, item.last_error,
                    exc_info=not isinstance(exc, FrwatchError))  # fmt: skip
                continue
            done += 1
            d = item.dump
            logger.info("uploaded rank %d (%d bytes) to %s", d.rank, d.size, item.key)
            with self._lock:
                self._pending.remove(item)
                first = self._first_key_of_rank.get(d.rank) == item.key
                if first:
                    self._confirmed_first.add(d.rank)
                self._uploads.setdefault(d.rank, []).append(
                    RankUpload(key=item.key, bytes=d.size, sha256=d.sha256, format=d.fmt, corrupt=d.corrupt,
                               uploaded_at=time.time())
                )  # fmt: skip
                self._record_dirty = True
            if first and self.summaries:
                self._upload_summary(d)
        self._flush_record(now)
        return done

    def _upload_summary(self, dump: Dump) -> None:
        """Best effort, once: the summary of a rank's first dump beside it (``summaries/<rank>.json``), made
        in a bounded worker process from the file's bytes, uploaded only when those are the bytes uploaded
        (same sha256). Without it the analyzer decodes the dump; the dump itself is always kept."""
        if dump.corrupt or dump.size > SUMMARY_MAX_DUMP_BYTES:
            return
        try:
            made = summarise_file(dump.path, dump.rank, max_bytes=SUMMARY_MAX_DUMP_BYTES,
                                  memory_bytes=SUMMARY_WORKER_BYTES, binary=True)  # fmt: skip
        except NotSummarised as exc:
            logger.warning("no summary for rank %d: %s (the analyzer will decode its dump)", dump.rank, exc)
            return
        if made.dump.sha256 != dump.sha256:
            logger.warning("no summary for rank %d: its file changed after the upload", dump.rank)
            return
        key = self.key.summary(dump.rank)
        try:
            self.store.put(key, made.data, bucket=self.bucket, content_type="application/vnd.msgpack")
        except FrwatchError as exc:
            logger.warning(
                "summary upload of rank %d failed: %s (the analyzer will decode its dump)", dump.rank, exc
            )
            return
        logger.info("uploaded the summary of rank %d (%d bytes) to %s", dump.rank, len(made.data), key)

    def _flush_record(self, now: float) -> None:
        with self._lock:
            if not self._record_dirty or now < self._record_next_try:
                return
            self._record_dirty = False
            body = self.record.with_uploads(self._uploads, self._skipped, self._replaced_dumps).agent_json()
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
                "uploaded": {str(r): [u.key for u in ups] for r, ups in sorted(self._uploads.items())},
                "pending": [
                    {"rank": p.dump.rank, "key": p.key, "tries": p.tries, "error": p.last_error}
                    for p in self._pending
                ],
                "skipped": list(self._skipped),
                "replaced": list(self._replaced_dumps),
            }
