"""NCCL debug files in the dump folder -> ``nccl/<rank>.txt``, the tail of each, uploaded like a dump.

The webhook points ``NCCL_DEBUG_FILE`` at ``<dump folder>/nccl.<rank>.%h.%p.txt`` when it knows the pod's one
global rank, else at ``nccl.%h.%p.txt`` (``injection.nccl_env``); NCCL fills in the host and the pid. The
rank of a file is the one its name carries, else the pod's only rank as its Flight Recorder dumps show
it (a pod holding several ranks and naming none: the file is not uploaded, and the pod record says so).

A file is read the way a dump is (``dumpfiles.open_regular``: never through a link, never blocking, a
regular file), only its last ``max_bytes`` (NCCL appends for as long as the process lives), once its
size and mtime held for ``stable_seconds``, and again each time it grows. Of several files of one rank (a
process restarted in place: another pid) the most recently written one is uploaded. The bytes are
stored as they are (the analyzer decodes and masks).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_operator import constants as c
from frwatch_operator.agent.dumpfiles import FileId, NotADump, open_regular, shown

logger = logging.getLogger(__name__)
#: ``nccl.<rank>.<host>.<pid>.txt`` or ``nccl.<host>.<pid>.txt``: the rank is a number before the host.
_NAME = re.compile(re.escape(c.NCCL_FILE_PREFIX) + r"(?:([0-9]{1,7})\.)?.+" + re.escape(c.NCCL_FILE_SUFFIX))


def is_nccl_name(name: str) -> bool:
    """Whether a name in the dump folder is an NCCL debug file (the dump watcher leaves it alone)."""
    return _NAME.fullmatch(name) is not None


def rank_hint(name: str) -> int | None:
    m = _NAME.fullmatch(name)
    if m is None or m.group(1) is None:
        return None
    rank = int(m.group(1))
    return rank if rank < MAX_WORLD_SIZE else None


@dataclass
class Due:
    """A file to upload now: its tail's bytes, for ``rank``."""

    rank: int
    path: Path
    file: FileId
    data: bytes


@dataclass
class NcclFiles:
    """Polls the dump folder for NCCL debug files; hands out each rank's newest file when it changed."""

    dump_dir: Path
    max_bytes: int
    stable_seconds: float
    _seen: dict[str, tuple[FileId, float]] = field(default_factory=dict)
    _sent: dict[str, FileId] = field(default_factory=dict)  #: name -> the content last uploaded
    _skipped: dict[str, str] = field(default_factory=dict)

    def poll(self, now: float, pod_ranks: frozenset[int]) -> list[Due]:
        """The files whose newest content held still and was not uploaded yet (``pod_ranks``: the ranks
        this pod's dumps showed, for a file whose name carries none)."""
        newest: dict[int, tuple[str, Path, FileId]] = {}
        try:
            entries = sorted(os.scandir(self.dump_dir), key=lambda e: e.name)
        except FileNotFoundError:
            return []
        for entry in entries:
            if not is_nccl_name(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            file = FileId.of(st)
            seen = self._seen.get(entry.name)
            if seen is None or seen[0] != file:
                self._seen[entry.name] = (file, now)
                continue
            if now - seen[1] < self.stable_seconds:
                continue
            rank = rank_hint(entry.name)
            if rank is None and len(pod_ranks) == 1:
                rank = next(iter(pod_ranks))
            if rank is None:
                why = "an NCCL debug file whose rank is not known yet (the pod's dumps show " + (
                    f"ranks {sorted(pod_ranks)[:8]})" if pod_ranks else "none)"
                )
                self._skipped[entry.name] = why
                continue
            self._skipped.pop(entry.name, None)
            best = newest.get(rank)
            if best is None or file.mtime_ns > best[2].mtime_ns:
                if best is not None:
                    self._sent[best[0]] = best[2]  # an older file of the rank: superseded, never waited for
                newest[rank] = (entry.name, Path(entry.path), file)
            else:
                self._sent[entry.name] = file
        out: list[Due] = []
        for rank, (name, path, file) in sorted(newest.items()):
            if self._sent.get(name) == file:
                continue
            data = self._tail(path, file)
            if data is not None:
                out.append(Due(rank, path, file, data))
        return out

    def _tail(self, path: Path, file: FileId) -> bytes | None:
        try:
            fd, st = open_regular(path)
        except NotADump as why:
            self._skipped[path.name] = str(why)
            return None
        except OSError:
            return None
        try:
            if FileId.of(st) != file:
                return None  # changed since the listing: the next poll
            return os.pread(fd, self.max_bytes, max(0, file.size - self.max_bytes))
        finally:
            os.close(fd)

    def sent(self, due: Due) -> None:
        self._sent[due.path.name] = due.file

    def pending(self) -> list[str]:
        """Files whose newest content was not uploaded (for the drain), their rank known or not."""
        return [n for n, (file, _) in self._seen.items() if self._sent.get(n) != file and n not in self._skipped]

    def skipped(self) -> list[dict[str, str]]:
        return [{"name": shown(n), "why": why} for n, why in sorted(self._skipped.items())]
