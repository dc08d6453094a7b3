"""Find complete Flight Recorder dumps in the dump folder, reading nothing but regular files named for a rank.

What is read: the file ``<prefix><rank>`` (FR writes it in place, truncating it on each dump, or it is
renamed into place), ``rank`` a decimal number torch would write (no leading zero, below
:data:`~frwatch_analyzers.base.limits.MAX_WORLD_SIZE`, the rank bound the operator and the analyzer use too). It is opened with ``O_NOFOLLOW | O_NONBLOCK`` and must be a regular file by ``fstat``
of the open descriptor, the same file (device, inode, size, mtime) the folder listing showed: a link is
never followed, a FIFO never blocks, a file swapped in between is not taken for the one that was seen.

What is ignored without a word: dot-files (the workload's ``.frwatch_dump_requested`` flag,
``.nccl_trace_rank_<N>.<pid>.tmp`` files being written), the on-demand pipes ``<prefix><rank>.pipe`` and
NCCL's debug files ``nccl.*.txt`` (``agent.nccl_files`` uploads those).
Everything else is **skipped and reported** (:class:`Skip`: the name, shown escaped, and why): other
names, ranks out of bounds, links, FIFOs, folders, sockets, devices. The agent logs each once and puts
them in its pod record and ``/status``, so nothing in the folder disappears silently.

Complete: size and mtime held still for ``stable_seconds``, not empty, and the file is framed as a
whole dump: a pickle starts with PROTO (``0x80``) and ends with STOP (``.``), a JSON dump's first and
last non-blank bytes are ``{`` and ``}``. The agent never decodes a dump: decoding is the analyzer's
(``frwatch_analyzers.decode.safe_load``, bounded, in the analyzer Job), and a decoded dump takes about ten times
its size in memory (a 28 MB pickle: 280 MB), far beyond the agent's limit. A file that stays unchanged
but not framed as a whole dump for ``corrupt_after_seconds`` is handed out as is (a truncated dump is
still evidence; the analyzer names it). Each distinct content of a rank is handed out once (SHA-256,
computed with the MD5 in one streaming pass: the file is never held in memory).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_operator import constants as c
from frwatch_operator.capture.recorder_env import dump_name, rank_digits

logger = logging.getLogger(__name__)

Format = Literal["pickle", "json"]
#: Suffix of the on-demand dump pipes (TORCH_NCCL_DEBUG_INFO_PIPE_FILE): expected in the folder, never read.
PIPE_SUFFIX = ".pipe"
#: Skipped names kept for the report; more are counted, not listed.
MAX_SKIPS = 100
#: Bytes read at a time while hashing a dump (the agent never holds a whole dump).
READ_BYTES = 1 << 20
_FRAME_BYTES = 64
_BLANK = b" \t\r\n"


def shown(name: str, limit: int = 200) -> str:
    """A file name safe to log and to store as JSON: undecodable bytes as ``\\xNN``, control and other
    unprintable characters escaped, cut at ``limit`` characters."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


@dataclass(frozen=True)
class FileId:
    """Which file, with which content: it changed (or was replaced) when any of these differ."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileId:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class Dump:
    """One complete dump on disk (its bytes are read again, streamed, when it is uploaded)."""

    rank: int
    path: Path
    file: FileId
    fmt: Format
    sha256: str
    md5: str
    corrupt: bool = False

    @property
    def size(self) -> int:
        return self.file.size


@dataclass(frozen=True)
class Skip:
    """A name in the dump folder that was not read, and why."""

    name: str
    why: str


class NotADump(Exception):
    """The path cannot be read as a dump; the message says why (a :class:`Skip` reason)."""


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISLNK, "a symbolic link (never followed)"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):  # fmt: skip
        if test(mode):
            return what
    return "not a regular file"


def open_regular(path: Path) -> tuple[int, os.stat_result]:
    """A read-only descriptor of ``path`` and its ``fstat``: never through a link, never blocking on a
    FIFO; only a regular file. Raises :class:`NotADump` (why) or ``OSError`` (gone, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotADump(_kind(stat.S_IFLNK)) from exc
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotADump(_kind(st.st_mode))
    return fd, st


def framed(head: bytes, tail: bytes) -> Format | None:
    """The format of a file starting with ``head`` and ending with ``tail`` when it is framed as a whole
    dump (see the module docstring); None when it is not (yet) one."""
    if head[:1] == b"\x80":
        return "pickle" if tail[-1:] == b"." else None
    if head.lstrip(_BLANK)[:1] == b"{":
        return "json" if tail.rstrip(_BLANK)[-1:] == b"}" else None
    return None


def sniff(head: bytes) -> Format:
    """The format a file claims by its first byte (for the key of a dump uploaded as is)."""
    return "json" if head.lstrip(_BLANK)[:1] == b"{" else "pickle"


def digests(fd: int, size: int) -> tuple[str, str]:
    """(SHA-256, MD5) hex digests of the first ``size`` bytes of ``fd``, read :data:`READ_BYTES` at a time."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(READ_BYTES, size - offset), offset)
        if not chunk:
            break
        sha.update(chunk)
        md5.update(chunk)
        offset += len(chunk)
    return sha.hexdigest(), md5.hexdigest()


@dataclass
class _Seen:
    file: FileId
    since: float
    taken: bool = False  # this content was handed out (or was a copy of one handed out before)
    held: bool = False  # held back once as not (yet) a whole dump: said in the log


@dataclass
class SkipLog:
    """What the watcher skipped: each name once (the latest reason), at most :data:`MAX_SKIPS` listed."""

    entries: dict[str, Skip] = field(default_factory=dict)
    more: int = 0

    def add(self, name: str, why: str) -> None:
        if name in self.entries and self.entries[name].why == why:
            return
        if name not in self.entries and len(self.entries) >= MAX_SKIPS:
            self.more += 1
            return
        self.entries[name] = Skip(shown(name), why)
        logger.warning("dump folder: skipped %s: %s", shown(name), why)

    def drop(self, name: str) -> None:
        self.entries.pop(name, None)

    def report(self) -> list[dict[str, str]]:
        out = [{"name": s.name, "why": s.why} for s in self.entries.values()]
        if self.more:
            out.append({"name": "...", "why": f"{self.more} more names skipped (not listed)"})
        return out


class DumpWatcher:
    """Polls the dump folder; hands out each complete dump once per distinct content of its rank."""

    def __init__(self, dump_dir: Path, file_prefix: str, stable_seconds: float, corrupt_after_seconds: float):
        self.dump_dir = dump_dir
        self.prefix = file_prefix
        self.pattern = dump_name(file_prefix)  # torch's and torchcomms' files (recorder_env)
        self.stable_seconds = stable_seconds
        self.corrupt_after_seconds = corrupt_after_seconds
        self.skipped = SkipLog()
        self._seen: dict[Path, _Seen] = {}
        self._handed: dict[int, set[str]] = {}

    def rank_of(self, name: str) -> int | None:
        """The rank a dump file name stands for; None for another name. Raises :class:`NotADump` for a
        rank number no rank has (leading zeros, not below MAX_WORLD_SIZE)."""
        m = self.pattern.fullmatch(name)
        if m is None:
            return None
        digits = rank_digits(m)
        if len(digits) > len(str(MAX_WORLD_SIZE)) or int(digits) >= MAX_WORLD_SIZE:
            raise NotADump(
                f"rank number {digits[:24]}{'...' if len(digits) > 24 else ''} is beyond the limit of "
                f"{MAX_WORLD_SIZE} ranks"
            )
        if digits != str(int(digits)):
            raise NotADump(f"rank number {digits} has a leading zero (torch writes none)")
        return int(digits)

    def _expected(self, name: str) -> bool:
        """Names that belong in the folder and are no dump: dot-files, the on-demand pipes."""
        if name.startswith(".") or (name.startswith(c.NCCL_FILE_PREFIX) and name.endswith(c.NCCL_FILE_SUFFIX)):
            return True  # NCCL debug files are agent.nccl_files'

        if name.endswith(PIPE_SUFFIX):
            try:
                return self.rank_of(name[: -len(PIPE_SUFFIX)]) is not None
            except NotADump:
                return False
        return False

    def _dump_files(self) -> list[tuple[int, Path, FileId]]:
        """(rank, path, identity) of each dump file in the folder; everything else skipped or ignored."""
        try:
            entries = sorted(os.scandir(self.dump_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        out = []
        for entry in entries:
            name = entry.name
            if self._expected(name):
                continue
            try:
                rank = self.rank_of(name)
                if rank is None:
                    raise NotADump(f"not a dump name (expected {self.prefix}<rank>)")
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    raise NotADump(_kind(st.st_mode))
            except NotADump as why:
                self.skipped.add(name, str(why))
                continue
            except FileNotFoundError:
                continue
            self.skipped.drop(name)
            out.append((rank, Path(entry.path), FileId.of(st)))
        return out

    def poll(self, now: float) -> list[Dump]:
        out: list[Dump] = []
        for rank, path, file in self._dump_files():
            seen = self._seen.get(path)
            if seen is None or seen.file != file:
                self._seen[path] = _Seen(file, now)
                continue
            if seen.taken or now - seen.since < self.stable_seconds or file.size == 0:
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
        for _, path, file in self._dump_files():
            seen = self._seen.get(path)
            if seen is not None and seen.file == file and (seen.taken or self._empty_for_good(seen, now)):
                continue
            out.append(path)
        return out

    def _empty_for_good(self, seen: _Seen, now: float) -> bool:
        return seen.file.size == 0 and now - seen.since >= self.corrupt_after_seconds

    def _read(self, rank: int, path: Path, seen: _Seen, now: float) -> Dump | None:
        try:
            fd, st = open_regular(path)
        except NotADump as why:
            self.skipped.add(path.name, str(why))
            return None
        except OSError:
            return None  # gone or unreadable: the next poll says
        try:
            if FileId.of(st) != seen.file:
                return None  # replaced or changed since the listing: the next poll
            size = seen.file.size
            head = os.pread(fd, _FRAME_BYTES, 0)
            tail = os.pread(fd, _FRAME_BYTES, max(0, size - _FRAME_BYTES))
            whole = framed(head, tail)
            corrupt = whole is None
            if whole is None:
                if now - seen.since < self.corrupt_after_seconds:
                    if not seen.held:  # looked and decided: not uploaded yet (once per file version)
                        seen.held = True
                        logger.info(
                            "dump %s is not framed as a whole dump yet: held back (uploaded as is after %.0fs)",
                            path, self.corrupt_after_seconds,
                        )  # fmt: skip
                    return None
                logger.warning(
                    "dump %s stayed incomplete for %.0fs (not framed as a whole dump): uploading as is",
                    path, now - seen.since,
                )  # fmt: skip
            sha, md5 = digests(fd, size)
            if FileId.of(os.fstat(fd)) != seen.file:
                return None  # written to while it was read: the next poll
        finally:
            os.close(fd)
        seen.taken = True
        handed = self._handed.setdefault(rank, set())
        if sha in handed:
            return None
        handed.add(sha)
        return Dump(rank, path, seen.file, whole or sniff(head), sha, md5, corrupt)
