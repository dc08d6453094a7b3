"""Where dumps come from: a local folder or an ``s3://bucket/prefix``. Lists inputs; reads bytes on demand.

A folder (or prefix) may be a job attempt's root in the frwatch layout (``ranks/``, the later dumps of
``ranks-later/``, ``pods/``, ``manifest.json``) or any flat folder of dump files with any name prefix
(``nccl_trace_rank_3``, ``rank3.pkl``, ``3.json``, ``nccl_trace_rank_3.final`` ...): the rank is the number
after the name's last ``rank``, else its trailing number (:func:`~frwatch_analyzers.store.layout.rank_digits`).
Every file of a rank is listed: which is used is decided by content (:mod:`~frwatch_analyzers.load.merge`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..base.limits import MAX_FILES, MAX_WORLD_SIZE
from ..base.safe_text import printable
from ..verdict import FileProblem
from .layout import (
    LATER_DIR,
    LOG_SUFFIXES,
    LOGS_DIR,
    MANIFEST,
    NCCL_DIR,
    NODES_DIR,
    PODS_DIR,
    RANKS_DIR,
    REPORT,
    REPORT_HTML,
    SUMMARIES_DIR,
    VERDICT,
    later_rank,
    rank_digits,
    rank_from_name,
    s3_url,
    split_s3_url,
)

_SKIP_NAMES = {MANIFEST, VERDICT, REPORT, REPORT_HTML}
_SKIP_SUFFIXES = (".pipe", ".tmp", ".part", ".lock", ".md", *LOG_SUFFIXES)
# evidence: frwatch_analyzers.evidence.read; summaries: frwatch_analyzers.summaries.reduce
_LAYOUT_DIRS = {RANKS_DIR, LATER_DIR, PODS_DIR, LOGS_DIR, NCCL_DIR, NODES_DIR, SUMMARIES_DIR}


class SourceError(Exception):
    """The input location itself cannot be read (missing folder, bad URL, S3 refused)."""


class TooLarge(Exception):
    """A file over its size limit; the message gives both sizes."""


@dataclass(frozen=True)
class S3Config:
    """How to reach S3. Empty fields fall back to boto3's usual sources (AWS_* variables, profiles)."""

    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: str = "path"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> S3Config:
        env = os.environ if environ is None else environ
        return cls(
            endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
        )


@dataclass(frozen=True)
class DumpRef:
    """One candidate file: where it is, and the rank its name gives (None: the name has no rank)."""

    name: str  # what a person recognises: the path or the s3 URL, made printable
    location: str  # a local path or an s3 key, as the file system or the store spells it
    rank: int | None
    size: int
    etag: str = ""  # the store's ETag (S3 listings): the MD5 of an object uploaded in one part


@dataclass(frozen=True)
class Inputs:
    """What a location holds: candidate dumps, the manifest when there is one, and what was not read."""

    root: str
    dumps: list[DumpRef]
    manifest: DumpRef | None
    bucket: str | None = None  # set for s3:// inputs
    skipped: list[FileProblem] = field(default_factory=list)  # entries that are not candidate dumps
    summaries: dict[int, DumpRef] = field(default_factory=dict)  # rank -> its summary (summaries/<rank>.json)


def display_name(path: str) -> str:
    """A path as a person should see it: undecodable bytes as ``\\xff``, controls escaped."""
    raw = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return printable(raw, 1024)


def _wanted(name: str) -> bool:
    return not (name.startswith(".") or name in _SKIP_NAMES or name.endswith(_SKIP_SUFFIXES))


def discover(location: str, s3: S3Config | None = None) -> Inputs:
    """List the dumps at a folder or an s3:// prefix. Raises SourceError when the location is unusable."""
    if location.startswith("s3://"):
        return _discover_s3(location, s3 or S3Config.from_env())
    return _discover_dir(Path(location))


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _candidate(
    path: str,
    name: str,
    st: os.stat_result,
    dumps: list[DumpRef],
    skipped: list[FileProblem],
    rank_of: Callable[[str], int | None] = rank_from_name,
) -> None:
    """Add one folder entry (``st`` from lstat) to ``dumps`` or, with the reason, to ``skipped``."""
    shown = display_name(path)
    rank = rank_of(name)
    if stat.S_ISLNK(st.st_mode):
        try:
            target = display_name(os.readlink(path))
        except OSError:
            target = "?"
        dangling = "a dangling " if not os.path.exists(path) else "a "
        reason = f"{dangling}symbolic link to {target}: not followed (a dump is a regular file)"
    elif not stat.S_ISREG(st.st_mode):
        reason = f"{_kind(st.st_mode)}: not read (a dump is a regular file)"
    elif rank is not None and rank >= MAX_WORLD_SIZE:
        digits = printable(rank_digits(name) or "", 40)
        reason = f"rank {digits} in the file name is beyond the limit of {MAX_WORLD_SIZE} ranks: not read"
        rank = None
    else:
        dumps.append(DumpRef(shown, path, rank, st.st_size))
        return
    skipped.append(FileProblem(file=shown, reason=reason, rank=rank))


def _discover_dir(path: Path) -> Inputs:
    if not path.exists():
        raise SourceError(f"{display_name(str(path))}: no such file or folder")
    if path.is_file():
        real = os.path.realpath(path)  # a link the user named is followed; links inside a folder are not
        dumps: list[DumpRef] = []
        skipped: list[FileProblem] = []
        _candidate(real, path.name, os.lstat(real), dumps, skipped)
        return Inputs(str(path), dumps, None, skipped=skipped)
    root = path
    layout = (path / RANKS_DIR).is_dir()
    folder = path / RANKS_DIR if layout else path
    manifest, skipped = _local_manifest(path / MANIFEST)
    dumps = []
    _scan(path, folder, dumps, skipped, rank_from_name)
    if layout and (path / LATER_DIR).is_dir():  # a later, different dump of a rank: merged by content
        _scan(path, path / LATER_DIR, dumps, skipped, later_rank)
    dumps.sort(key=lambda d: d.location)
    return Inputs(
        str(root), dumps, manifest, skipped=skipped, summaries=_local_summaries(path / SUMMARIES_DIR)
    )


def _scan(
    root: Path,
    folder: Path,
    dumps: list[DumpRef],
    skipped: list[FileProblem],
    rank_of: Callable[[str], int | None],
) -> None:
    """Every candidate dump of one folder (at most ``MAX_FILES``; the rest counted and said)."""
    listed = 0
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if not _wanted(entry.name) or (folder == root and entry.name in _LAYOUT_DIRS):
                    continue
                listed += 1
                if listed > MAX_FILES:
                    continue  # counted, not kept
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    skipped.append(FileProblem(file=display_name(entry.path), reason=f"cannot read: {exc}"))
                    continue
                _candidate(entry.path, entry.name, st, dumps, skipped, rank_of)
    except OSError as exc:
        raise SourceError(f"{display_name(str(folder))}: cannot list: {exc}") from exc
    if listed > MAX_FILES:
        skipped.append(_too_many(display_name(str(folder)), listed))


def _local_summaries(folder: Path) -> dict[int, DumpRef]:
    """``<rank>.json`` files of a ``summaries/`` folder (regular files only; anything else is not one)."""
    found: dict[int, DumpRef] = {}
    try:
        with os.scandir(folder) as it:
            for i, entry in enumerate(it):
                if i >= MAX_FILES:
                    break
                rank = rank_from_name(entry.name)
                if rank is None or rank >= MAX_WORLD_SIZE or entry.name != f"{rank}.json":
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    found[rank] = DumpRef(display_name(entry.path), entry.path, rank, st.st_size)
    except OSError:
        return found  # no summaries folder (or an unreadable one): every dump is decoded
    return found


def _too_many(where: str, listed: int) -> FileProblem:
    return FileProblem(
        file=where,
        reason=f"{listed - MAX_FILES} more entries not read: a location holds at most {MAX_FILES} files",
    )


def _local_manifest(path: Path) -> tuple[DumpRef | None, list[FileProblem]]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, []
    except OSError as exc:
        return None, [
            FileProblem(file=display_name(str(path)), reason=f"manifest ignored: cannot read: {exc}")
        ]
    dumps: list[DumpRef] = []
    skipped: list[FileProblem] = []
    _candidate(str(path), path.name, st, dumps, skipped)
    for p in skipped:
        p.reason = f"manifest ignored: {p.reason}"
    return (dumps[0] if dumps else None), skipped


def open_regular(path: str, max_bytes: int) -> IO[bytes]:
    """Open a local dump for reading: a regular file (never a FIFO, which would block, nor a link), of at
    most ``max_bytes``. Raises :class:`TooLarge` or OSError (``ELOOP`` for a link, with a reason)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise TooLarge(_over(st.st_size, max_bytes))
        return open(fd, "rb", buffering=1 << 20, closefd=True)
    except BaseException:
        os.close(fd)
        raise


def _over(size: int, limit: int) -> str:
    return f"{size} bytes is over the limit of {limit} bytes"


#: What to set when boto3 found no credentials at all ("Unable to locate credentials").
NO_CREDENTIALS_HINT = (
    "no store credentials found: boto3 looked for AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a web identity "
    "(AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE: IRSA), container credentials (EKS Pod Identity), a profile "
    "and the instance metadata. Set one: by hand, export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; in a "
    "cluster (the analyzer Job), the chart's analyzer.credentialsSecret (a Secret in analyzer.namespace), or "
    "storeAccess.mode=identity with storeAccess.analyzerServiceAccountAnnotations (docs/install.md, "
    '"Store credentials")'
)


def store_error_text(exc: BaseException) -> str:
    """A botocore error as a person can act on it: a missing-credentials error names what to set."""
    from botocore.exceptions import NoCredentialsError

    return NO_CREDENTIALS_HINT if isinstance(exc, NoCredentialsError) else str(exc)


def s3_client(s3: S3Config) -> Any:
    import boto3
    from botocore.config import Config

    cfg = Config(
        s3={"addressing_style": s3.addressing_style},  # type: ignore[arg-type]
        retries={"max_attempts": 5, "mode": "standard"},
        connect_timeout=5,
        read_timeout=60,
    )
    # a session of its own: boto3.client() would reuse boto3's default session, whose credentials are resolved
    # once (from the environment as it was at the first call) and kept for the life of the process
    session = boto3.session.Session()
    return session.client("s3", endpoint_url=s3.endpoint_url, region_name=s3.region, config=cfg)


def _discover_s3(url: str, s3: S3Config) -> Inputs:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        bucket, prefix = split_s3_url(url)
    except ValueError as exc:
        raise SourceError(str(exc)) from exc
    client = s3_client(s3)
    base = f"{prefix}/" if prefix else ""
    skipped: list[FileProblem] = []
    try:
        objects = []
        for i, obj in enumerate(_list_objects(client, bucket, base)):
            if i >= MAX_FILES:
                skipped.append(
                    FileProblem(
                        file=display_name(url),
                        reason=f"more objects not read: a location holds at most {MAX_FILES} files",
                    )
                )
                break
            objects.append(obj)
    except (BotoCoreError, ClientError) as exc:
        raise SourceError(f"{url}: cannot list the dumps: {store_error_text(exc)}") from exc
    manifest = None
    ranks_prefix = f"{base}{RANKS_DIR}/"
    later_prefix = f"{base}{LATER_DIR}/"
    has_layout = any(k.startswith(ranks_prefix) for k, _, _ in objects)
    dumps: list[DumpRef] = []
    summaries: dict[int, DumpRef] = {}
    for key, size, etag in objects:
        rel = key[len(base) :]
        if rel.startswith(SUMMARIES_DIR + "/"):
            leaf = rel[len(SUMMARIES_DIR) + 1 :]
            rank = rank_from_name(leaf)
            if rank is not None and rank < MAX_WORLD_SIZE and leaf == f"{rank}.json":
                summaries[rank] = DumpRef(display_name(s3_url(bucket, key)), key, rank, size)
            continue
        if rel == MANIFEST:
            manifest = DumpRef(display_name(s3_url(bucket, key)), key, None, size)
            continue
        later = has_layout and key.startswith(later_prefix) and "/" not in key[len(later_prefix) :]
        if has_layout and not key.startswith(ranks_prefix) and not later:
            continue
        if "/" in rel and not has_layout:
            continue  # a flat prefix: its direct children only
        leaf = rel.rsplit("/", 1)[-1]
        if rel.startswith(PODS_DIR + "/") or not _wanted(leaf):
            continue
        rank = later_rank(leaf) if later else rank_from_name(leaf)
        shown = display_name(s3_url(bucket, key))
        if rank is not None and rank >= MAX_WORLD_SIZE:
            digits = printable(rank_digits(leaf) or "", 40)
            reason = (
                f"rank {digits} in the object's name is beyond the limit of {MAX_WORLD_SIZE} ranks: not read"
            )
            skipped.append(FileProblem(file=shown, reason=reason))
            continue
        dumps.append(DumpRef(shown, key, rank, size, etag))
    return Inputs(url, dumps, manifest, bucket=bucket, skipped=skipped, summaries=summaries)


def _list_objects(client: Any, bucket: str, prefix: str) -> Iterator[tuple[str, int, str]]:
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            yield obj["Key"], int(obj.get("Size", 0)), str(obj.get("ETag", "")).strip('"')[:80]


def read_bytes(ref: DumpRef, bucket: str | None, client: Any | None, max_bytes: int) -> bytes:
    """Read one file whole, refusing one over ``max_bytes`` (:class:`TooLarge`) before and while reading.
    OSError / botocore errors propagate."""
    if ref.size > max_bytes:
        raise TooLarge(_over(ref.size, max_bytes))
    if bucket is None:
        with open_regular(ref.location, max_bytes) as fh:
            data = fh.read(max_bytes + 1)
    else:
        assert client is not None
        body = client.get_object(Bucket=bucket, Key=ref.location)["Body"]
        try:
            data = body.read(max_bytes + 1)
        finally:
            body.close()
    if len(data) > max_bytes:
        raise TooLarge(f"over the limit of {max_bytes} bytes (the listing said {ref.size})")
    return bytes(data)
