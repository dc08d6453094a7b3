"""The hand-over of the source step's copy between the two namespaces it crosses (``frwatch source``).

The copy Job runs in the training job's namespace (:mod:`.source_job`): the training image's Python copies
the files the branch names into an ``emptyDir``; then this module, in frwatch's image in the same pod,
packs that folder into one JSON object (:func:`pack`) and PUTs it to a **presigned URL** the operator
minted for exactly one key (``<attempt>/source/files.json``, :data:`BUNDLE_KEY`), valid until the Job's
deadline. That pod holds no store credentials and no service-account token: the URL is all it has, and it
can write that one key only. The render Job in frwatch's namespace then fetches the object with the
analyzer's keys (:func:`fetch`), unpacks it into its own ``emptyDir`` (:func:`unpack`) and renders
report.html with ``frwatch analyze --source``.

Everything in the object is the tenant's (the tenant's image chose the files' contents, and the tenant can
read the URL in its Job and PUT anything there until it expires): it is unpacked as hostile input, bounded
the way the copier bounds it (:data:`~.source_job.MAX_FILES`, :data:`~.source_job.MAX_FILE_BYTES`,
:data:`~.source_job.MAX_TOTAL_BYTES`), each path checked again (:func:`.source_copier.normalise`), each
file written new (``O_EXCL``, ``O_NOFOLLOW``) under the destination, UTF-8 text only; the page that shows it
is rendered by the analyzer, which parses code with ``ast`` and never runs it, and escapes every name.

The hand-over side needs the standard library and the copier's path check only; the fetch side imports the
analyzer's S3 reader when it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from frwatch_operator import constants as c
from frwatch_operator.analysis import source_copier

#: The bundle's key under the attempt's root.
BUNDLE_KEY = c.SOURCE_BUNDLE_KEY
#: The copier's bounds (:mod:`.source_job` passes the same to the copier; a test holds them equal).
MAX_FILES = 32
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_TOTAL_BYTES = 32 * 1024 * 1024
#: A bundle larger than this is refused unread (JSON escaping can double text; a little room above).
MAX_BUNDLE_BYTES = 2 * MAX_TOTAL_BYTES + 64 * 1024
#: The PUT's total time at most (seconds): the Job's deadline stops it anyway.
PUT_TIMEOUT_SECONDS = 60.0
#: The env var holding the presigned URL in the hand-over container.
ENV_PUT_URL = c.ENV_SOURCE_PUT_URL
BUNDLE_VERSION = 1


class HandOverError(Exception):
    """The bundle could not be made, sent, read or unpacked; the message says why."""


@dataclass(frozen=True)
class Limits:
    files: int = MAX_FILES
    file_bytes: int = MAX_FILE_BYTES
    total_bytes: int = MAX_TOTAL_BYTES


def _walk(root: Path) -> Iterator[Path]:
    """Regular-file candidates under ``root``, sorted, never through a link."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _read_text(path: Path, max_bytes: int) -> tuple[str, str]:
    """(text, "") or ("", reason): a regular file, never a link, at most ``max_bytes``, UTF-8 without NUL."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return "", f"cannot open it: {exc.strerror or exc}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", "not a regular file"
        data = os.read(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return "", f"over {max_bytes} bytes"
    if b"\x00" in data:
        return "", "binary (it holds NUL bytes)"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return "", f"not UTF-8 text (byte {exc.start})"


def pack(folder: Path, limits: Limits = Limits()) -> tuple[bytes, list[str]]:
    """The copy under ``folder`` as one JSON object ``{"version": 1, "files": {"/abs/path": text}}``, and the
    files left out with their reasons."""
    files: dict[str, str] = {}
    left_out: list[str] = []
    total = 0
    for path in _walk(folder):
        name = "/" + path.relative_to(folder).as_posix()
        if len(files) >= limits.files:
            left_out.append(f"{name[:200]} (more than {limits.files} files)")
            continue
        text, why = _read_text(path, limits.file_bytes)
        size = len(text.encode()) if not why else 0
        if not why and total + size > limits.total_bytes:
            why = "over the copy's total of bytes"
        if why:
            left_out.append(f"{name[:200]} ({why})")
            continue
        files[name] = text
        total += size
    body = {"version": BUNDLE_VERSION, "files": files}
    return json.dumps(body, ensure_ascii=False).encode(), left_out


def put(url: str, data: bytes, timeout: float = PUT_TIMEOUT_SECONDS) -> None:
    """PUT ``data`` to the presigned ``url``; :class:`HandOverError` on any failure."""
    if not url.startswith(("http://", "https://")):
        raise HandOverError("the upload URL is not http(s)")
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method="PUT", headers=headers)  # noqa: S310 (checked above)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (checked above)
            response.read(4096)
    except urllib.error.HTTPError as exc:
        raise HandOverError(f"the store answered {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise HandOverError(f"the store could not be reached: {exc}") from exc


def unpack(data: bytes, dest: Path, limits: Limits = Limits()) -> tuple[list[str], list[str]]:
    """Write the bundle's files under ``dest`` (``/app/train.py`` -> ``dest/app/train.py``), read-only.
    Returns (paths written, names left out with their reasons). Raises
    :class:`HandOverError` when ``data`` is no bundle at all."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise HandOverError(f"the bundle holds {len(data)} bytes (limit {MAX_BUNDLE_BYTES})")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise HandOverError(f"the bundle is not JSON: {str(exc)[:200]}") from exc
    files = body.get("files") if isinstance(body, dict) else None
    if not isinstance(files, dict):
        raise HandOverError("the bundle holds no 'files' object")
    written: list[str] = []
    left_out: list[str] = []
    total = 0
    for name, text in files.items():
        shown = str(name)[:200]
        path, why = source_copier.normalise(name)
        if not why and not isinstance(text, str):
            why = "not text"
        if not why and len(written) >= limits.files:
            why = f"more than {limits.files} files"
        raw = text.encode("utf-8", "surrogatepass") if not why else b""
        if not why and (len(raw) > limits.file_bytes or total + len(raw) > limits.total_bytes):
            why = "over the size limits"
        if not why and ("\x00" in text or _surrogates(text)):
            why = "not UTF-8 text"
        if not why:
            why = _write_new(dest / path.lstrip("/"), raw)
        if why:
            left_out.append(f"{shown!r} ({why})")
            continue
        written.append(path)
        total += len(raw)
    return written, left_out


def _surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _write_new(target: Path, raw: bytes) -> str:
    """Write ``raw`` to a new file ``target`` (read-only); "" or the reason it was not written."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of the bundle is in the way
        return f"cannot write it: {exc.strerror or exc}"
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    except FileExistsError:
        return "named twice"
    except OSError as exc:
        return f"cannot write it: {exc.strerror or exc}"
    try:
        os.write(fd, raw)
    finally:
        os.close(fd)
    return ""


def fetch(url: str) -> bytes:
    """The bundle at ``s3://bucket/key`` with the analyzer's S3 settings (AWS_* variables), bounded."""
    from frwatch_analyzers.store.layout import split_s3_url
    from frwatch_analyzers.store.sources import S3Config, s3_client

    bucket, key = split_s3_url(url)
    client = s3_client(S3Config.from_env(dict(os.environ)))
    try:
        head = client.head_object(Bucket=bucket, Key=key)
        size = int(head.get("ContentLength", 0))
        if size > MAX_BUNDLE_BYTES:
            raise HandOverError(f"the bundle holds {size} bytes (limit {MAX_BUNDLE_BYTES})")
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        data: bytes = body.read(MAX_BUNDLE_BYTES + 1)
    except HandOverError:
        raise
    except Exception as exc:  # botocore's errors: not found, denied, unreachable
        raise HandOverError(f"{url} could not be read: {exc}") from exc
    return data


def _termination(path: str, text: str) -> None:
    """The container's termination message (the kubelet's file: opened, never created); best effort."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        os.write(fd, text.encode("utf-8", "replace")[:4096])
    except OSError:
        pass
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="frwatch source", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    give = sub.add_parser("hand-over", help=f"pack FOLDER and PUT it to ${ENV_PUT_URL} (a presigned URL)")
    give.add_argument("folder")
    give.add_argument("--termination-log", default="")
    take = sub.add_parser("fetch", help="read the bundle at s3://BUCKET/KEY and unpack it into FOLDER")
    take.add_argument("url")
    take.add_argument("folder")
    take.add_argument("--termination-log", default="")
    args = parser.parse_args(argv)
    try:
        if args.verb == "hand-over":
            data, left_out = pack(Path(args.folder))
            url = os.environ.get(ENV_PUT_URL, "")
            if not url:
                raise HandOverError(f"{ENV_PUT_URL} is not set")
            put(url, data)
            line = f"handed over {len(data)} bytes" + (f"; left out: {'; '.join(left_out[:8])}" if left_out else "")
        else:
            written, left_out = unpack(fetch(args.url), Path(args.folder))
            line = f"unpacked {len(written)} file{'s' if len(written) != 1 else ''}"
            if left_out:
                line += f"; left out: {'; '.join(left_out[:8])}"
    except HandOverError as exc:
        print(f"frwatch source {args.verb}: {exc}", file=sys.stderr)
        if args.termination_log:
            _termination(args.termination_log, str(exc))
        return 1
    print(line)
    if args.termination_log:
        _termination(args.termination_log, line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
