"""Reading the evidence beyond Flight Recorder next to the dumps: logs, NCCL debug files, node records.

Where it is looked for, in the same folder or ``s3://`` prefix as the dumps:

- the frwatch layout (:mod:`~frwatch_analyzers.store.layout`): ``logs/<pod>/<container>[.previous|.termination].txt``
  (the manifest maps the pod to its ranks), ``nccl/<rank>.txt``, ``nodes/<node>.json``;
- a flat folder (``frwatch analyze DIR``): text files next to the dumps (``.log``, ``.txt``, ``.out``,
  ``.err``) named by rank (``rank3.log``, ``train_rank_3.out``, ``3.txt``) or by a pod the manifest names
  (``llama-worker-1.log``). Any other name's number is not taken for a rank (``worker-0`` of a PyTorchJob is
  rank 1, ``node1`` may hold ranks 8-15, ``nccl.host.4321`` ends with a pid): such a file is read with its
  ranks unknown, and only its lines that name their rank (torch's ``[rank3]:`` prefix) are anyone's.

Each file is read by its tail (:data:`~frwatch_analyzers.evidence.logtext.MAX_LOG_BYTES`), within a budget for all
of them (:data:`MAX_EVIDENCE_BYTES`, :data:`MAX_EVIDENCE_FILES`); what is refused is named, with why, as a
:class:`~frwatch_analyzers.verdict.FileProblem`. Nothing here raises for a bad file.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.limits import MAX_WORLD_SIZE
from ..base.safe_text import printable
from ..store.layout import (
    LOG_SUFFIXES,
    LOGS_DIR,
    NCCL_DIR,
    NODES_DIR,
    REPORT,
    parse_key,
    rank_from_name,
    s3_url,
)
from ..store.manifest import Manifest
from ..store.node_record import MAX_NODE_RECORD_BYTES, NodeRecord, parse_node_record
from ..verdict import FileProblem
from .logtext import MAX_LOG_BYTES, LogText, NotText, decode_tail

#: Evidence files read for one attempt (a log, a previous log and a termination message a rank, and more).
MAX_EVIDENCE_FILES = 4 * 4096
#: Bytes of evidence read for one attempt, all files together (the tails of 128 logs at their cap). Scanning
#: costs about 0.25 s for a 2 MiB tail of ordinary lines and 0.7 s for one of NCCL WARN lines (measured on
#: the 2-core dev machine): about a minute for the whole budget at worst.
MAX_EVIDENCE_BYTES = 256 << 20
#: Entries listed while looking for evidence (a folder of millions of files is not walked to its end).
MAX_LISTED = 4 * MAX_EVIDENCE_FILES
#: A flat log's name that says its rank: the number is the whole name, or follows "rank".
_FLAT_RANK = re.compile(r"(?:^|rank[_.-]?)([0-9]{1,12})$", re.IGNORECASE)


@dataclass(frozen=True)
class LogFile:
    """One log read: where from, whose (ranks, pod, container), what kind (``tail``, ``previous``,
    ``termination``, ``nccl``, ``file``), and its lines."""

    name: str
    ranks: tuple[int, ...]
    text: LogText
    pod: str = ""
    container: str = ""
    variant: str = "file"


@dataclass
class Gathered:
    """The evidence found at a location."""

    logs: list[LogFile] = field(default_factory=list)
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    problems: list[FileProblem] = field(default_factory=list)


@dataclass(frozen=True)
class _Ref:
    name: str  # shown
    location: str  # path or key
    size: int
    what: str  # log | nccl | node
    ranks: tuple[int, ...] = ()
    pod: str = ""
    container: str = ""
    variant: str = "file"


def gather(
    location: str,
    manifest: Manifest | None,
    *,
    bucket: str | None = None,
    client: Any = None,
    suspects: Iterable[int] = (),
) -> Gathered:
    """The evidence at a local folder, or (``bucket`` and an S3 ``client`` given) under the key prefix
    ``location``. Node records are read first, then the logs of the ``suspects`` (Flight Recorder's
    culprits and the ranks without a dump), then the rest while the budget lasts. Never raises for what it
    finds; an unlistable location gives one problem."""
    out = Gathered()
    try:
        found = _list_s3(client, bucket, location) if bucket is not None else _list_dir(location)
        listing = list(itertools.islice(found, MAX_LISTED + 1))
    except Exception as exc:  # OSError, botocore: the dumps were listed, the evidence is extra
        out.problems.append(
            FileProblem(
                file=printable(location, 300), reason=f"evidence not listed: {printable(str(exc), 200)}"
            )
        )
        return out
    if len(listing) > MAX_LISTED:
        listing.pop()
        out.problems.append(
            FileProblem(
                file=printable(location, 300),
                reason=f"evidence listing stopped at {MAX_LISTED} entries: the rest was not looked at",
            )
        )
    first = set(suspects)
    refs = sorted(
        _refs(listing, manifest, out.problems, bucket),
        key=lambda r: (r.what != "node", not first.intersection(r.ranks)),
    )  # stable: names within
    budget = MAX_EVIDENCE_BYTES
    for i, ref in enumerate(refs):
        if i >= MAX_EVIDENCE_FILES or budget <= 0:
            out.problems.append(
                FileProblem(
                    file=ref.name,
                    reason=f"{len(refs) - i} evidence file(s) from here on not read: over the budget of "
                    f"{MAX_EVIDENCE_FILES} files and {MAX_EVIDENCE_BYTES} bytes an attempt",
                )
            )
            break
        cap = MAX_NODE_RECORD_BYTES if ref.what == "node" else MAX_LOG_BYTES
        try:
            data = _read(ref, bucket, client, cap)
        except Exception as exc:  # OSError, botocore
            out.problems.append(FileProblem(file=ref.name, reason=f"not read: {printable(str(exc), 200)}"))
            continue
        budget -= len(data)
        if ref.what == "node":
            _add_node(ref, data, out)
            continue
        try:
            text = decode_tail(data, size=ref.size)
        except NotText as exc:
            out.problems.append(
                FileProblem(file=ref.name, reason=f"log not read: {exc}", rank=_one(ref.ranks))
            )
            continue
        out.logs.append(LogFile(ref.name, ref.ranks, text, ref.pod, ref.container, ref.variant))
    return out


def _one(ranks: tuple[int, ...]) -> int | None:
    return ranks[0] if len(ranks) == 1 else None


def _add_node(ref: _Ref, data: bytes, out: Gathered) -> None:
    if ref.size > MAX_NODE_RECORD_BYTES:
        out.problems.append(
            FileProblem(
                file=ref.name,
                reason=f"node record not read: {ref.size} bytes is over "
                f"the limit of {MAX_NODE_RECORD_BYTES} bytes",
            )
        )
        return
    record = parse_node_record(data)
    if record is None:
        out.problems.append(FileProblem(file=ref.name, reason="node record not read: not a node record"))
        return
    out.nodes[ref.pod or record.node] = record


def _refs(
    listing: list[tuple[str, str, int]],
    manifest: Manifest | None,
    problems: list[FileProblem],
    bucket: str | None,
) -> list[_Ref]:
    """What each listed ``(relative path, location, size)`` is, in a stable order."""
    pods = {p.pod: tuple(sorted(set(p.ranks))) for p in manifest.pods} if manifest is not None else {}
    refs: list[_Ref] = []
    for rel, where, size in sorted(listing):
        shown = _shown(s3_url(bucket, where) if bucket is not None else where)
        if size < 0:
            if rel.split("/", 1)[0] in (LOGS_DIR, NCCL_DIR, NODES_DIR) or rel.endswith(LOG_SUFFIXES):
                problems.append(
                    FileProblem(
                        file=shown,
                        reason="not read: not a regular file (a link, a FIFO or "
                        "a device is never followed or opened)",
                    )
                )
            continue
        top = rel.split("/", 1)[0]
        if top in (LOGS_DIR, NCCL_DIR, NODES_DIR):
            key = parse_key("r", f"r/{rel}")
            if key is None or key.kind == "other":
                problems.append(
                    FileProblem(file=shown, reason="not read: not a log, NCCL or node key of the layout")
                )
            elif key.kind == "log":
                if key.name not in pods:
                    problems.append(
                        FileProblem(
                            file=shown,
                            reason=f"log not read: pod {printable(key.name, 80)} is "
                            "not in the manifest, so its ranks are unknown",
                        )
                    )
                    continue
                refs.append(
                    _Ref(
                        shown,
                        where,
                        size,
                        "log",
                        pods[key.name],
                        key.name,
                        key.container,
                        key.variant or "tail",
                    )
                )
            elif key.kind == "nccl" and key.rank is not None:
                refs.append(_Ref(shown, where, size, "log", (key.rank,), variant="nccl"))
            elif key.kind == "node":
                refs.append(_Ref(shown, where, size, "node", pod=key.name))
            continue
        if "/" in rel or rel == REPORT or not rel.endswith(LOG_SUFFIXES):
            continue
        stem = rel.rsplit(".", 1)[0]
        if stem in pods:
            refs.append(_Ref(shown, where, size, "log", pods[stem], stem))
            continue
        m = _FLAT_RANK.search(stem)
        rank = rank_from_name(m.group(1)) if m else None
        if rank is not None and rank >= MAX_WORLD_SIZE:
            problems.append(
                FileProblem(
                    file=shown,
                    reason=f"log not read: its name names rank {rank}, beyond {MAX_WORLD_SIZE - 1}",
                )
            )
            continue
        # no rank in its name: read, its lines' own rank prefixes say whose they are (causes.py)
        refs.append(_Ref(shown, where, size, "log", (rank,) if rank is not None else ()))
    return refs


def _shown(where: str) -> str:
    raw = where.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return printable(raw, 1024)


def _list_dir(location: str) -> Iterator[tuple[str, str, int]]:
    """Regular files of a folder (its direct children) and of its ``logs/``, ``nccl/``, ``nodes/``."""
    root = Path(location)
    if not root.is_dir():
        return
    for sub in ("", LOGS_DIR, NCCL_DIR, NODES_DIR):
        folder = root / sub if sub else root
        if sub and not folder.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            if not sub:
                dirnames.clear()  # the top folder's own files only
            elif Path(dirpath).relative_to(root).parts.__len__() >= 3:
                dirnames.clear()  # logs/<pod>/ is as deep as the layout goes
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                # a link, a FIFO or a device is listed with size -1: named, never opened
                yield os.path.relpath(path, root), path, st.st_size if stat.S_ISREG(st.st_mode) else -1


def _list_s3(client: Any, bucket: str, prefix: str) -> Iterator[tuple[str, str, int]]:
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    paginator = client.get_paginator("list_objects_v2")
    for sub in ("", f"{LOGS_DIR}/", f"{NCCL_DIR}/", f"{NODES_DIR}/"):
        kwargs = {"Delimiter": "/"} if not sub else {}
        for page in paginator.paginate(Bucket=bucket, Prefix=base + sub, **kwargs):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                yield key[len(base) :], key, int(obj.get("Size", 0))


def _read(ref: _Ref, bucket: str | None, client: Any, cap: int) -> bytes:
    """The last ``cap`` bytes of a file (a node record: its first ``cap``; it is refused when larger)."""
    if bucket is None:
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(ref.location, flags)
        with open(fd, "rb", closefd=True) as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise OSError("not a regular file")
            if ref.what != "node" and st.st_size > cap:
                fh.seek(st.st_size - cap)
            return fh.read(cap)
    rng = f"bytes=0-{cap - 1}" if ref.what == "node" else f"bytes=-{cap}"
    if ref.size == 0:
        return b""
    body = client.get_object(Bucket=bucket, Key=ref.location, Range=rng)["Body"]
    try:
        return bytes(body.read(cap + 1)[-cap:] if ref.what != "node" else body.read(cap))
    finally:
        body.close()
