"""Where dumps come from: a local folder or an ``s3://bucket/prefix``. Lists inputs; reads bytes on demand.

A folder (or prefix) may be a job attempt's root in the frwatch layout (``ranks/``, ``pods/``,
``manifest.json``) or any flat folder of dump files with any name prefix (``nccl_trace_rank_3``,
``rank3.pkl``, ``3.json`` ...): the rank is the trailing number of the file name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .layout import MANIFEST, PODS_DIR, RANKS_DIR, REPORT, VERDICT, split_s3_url

_RANK_RE = re.compile(r"(\d+)(?:\.(?:pickle|pkl|json|bin))?$")
_SKIP_NAMES = {MANIFEST, VERDICT, REPORT}
_SKIP_SUFFIXES = (".pipe", ".tmp", ".part", ".lock", ".txt", ".md", ".log")


class SourceError(Exception):
    """The input location itself cannot be read (missing folder, bad URL, S3 refused)."""


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
    """One candidate dump file: where it is, and the rank its name gives (None: the name has no rank)."""

    name: str  # what a person recognises: the path or the s3 URL
    location: str  # a local path or an s3 key
    rank: int | None
    size: int


@dataclass(frozen=True)
class Inputs:
    """What a location holds: candidate dumps, and the manifest's bytes when there is one."""

    root: str
    dumps: list[DumpRef]
    manifest: bytes | None
    bucket: str | None = None  # set for s3:// inputs


def rank_from_name(name: str) -> int | None:
    m = _RANK_RE.search(name)
    return int(m.group(1)) if m else None


def _wanted(name: str) -> bool:
    return not (name.startswith(".") or name in _SKIP_NAMES or name.endswith(_SKIP_SUFFIXES))


def discover(location: str, s3: S3Config | None = None) -> Inputs:
    """List the dumps at a folder or an s3:// prefix. Raises SourceError when the location is unusable."""
    if location.startswith("s3://"):
        return _discover_s3(location, s3 or S3Config.from_env())
    return _discover_dir(Path(location))


def _discover_dir(path: Path) -> Inputs:
    if not path.exists():
        raise SourceError(f"{path}: no such file or folder")
    if path.is_file():
        st = path.stat()
        return Inputs(str(path), [DumpRef(str(path), str(path), rank_from_name(path.name), st.st_size)], None)
    root = path
    folder = path / RANKS_DIR if (path / RANKS_DIR).is_dir() else path
    manifest_path = path / MANIFEST
    manifest = manifest_path.read_bytes() if manifest_path.is_file() else None
    dumps = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if not entry.is_file() or not _wanted(entry.name):
            continue
        dumps.append(DumpRef(entry.path, entry.path, rank_from_name(entry.name), entry.stat().st_size))
    return Inputs(str(root), dumps, manifest)


def s3_client(s3: S3Config) -> Any:
    import boto3
    from botocore.config import Config

    cfg = Config(
        s3={"addressing_style": s3.addressing_style},  # type: ignore[arg-type]
        retries={"max_attempts": 5, "mode": "standard"},
        connect_timeout=5,
        read_timeout=60,
    )
    return boto3.client("s3", endpoint_url=s3.endpoint_url, region_name=s3.region, config=cfg)


def _discover_s3(url: str, s3: S3Config) -> Inputs:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        bucket, prefix = split_s3_url(url)
    except ValueError as exc:
        raise SourceError(str(exc)) from exc
    client = s3_client(s3)
    base = f"{prefix}/" if prefix else ""
    try:
        objects = list(_list_objects(client, bucket, base))
        manifest = None
        ranks_prefix = f"{base}{RANKS_DIR}/"
        has_layout = any(k.startswith(ranks_prefix) for k, _ in objects)
        dumps = []
        for key, size in objects:
            rel = key[len(base) :]
            if rel == MANIFEST:
                manifest = client.get_object(Bucket=bucket, Key=key)["Body"].read()
                continue
            if has_layout and not key.startswith(ranks_prefix):
                continue
            if "/" in rel and not has_layout:
                continue  # a flat prefix: its direct children only
            leaf = rel.rsplit("/", 1)[-1]
            if rel.startswith(PODS_DIR + "/") or not _wanted(leaf):
                continue
            dumps.append(DumpRef(f"s3://{bucket}/{key}", key, rank_from_name(leaf), size))
    except (BotoCoreError, ClientError) as exc:
        raise SourceError(f"{url}: cannot list the dumps: {exc}") from exc
    return Inputs(url, dumps, manifest, bucket=bucket)


def _list_objects(client: Any, bucket: str, prefix: str) -> Iterator[tuple[str, int]]:
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            yield obj["Key"], int(obj.get("Size", 0))


def read_bytes(ref: DumpRef, bucket: str | None, client: Any | None, max_bytes: int) -> bytes:
    """Read one dump, refusing files over ``max_bytes``. OSError / botocore errors propagate."""
    if ref.size > max_bytes:
        raise ValueError(f"{ref.size} bytes is over the {max_bytes}-byte limit (--max-file-mb)")
    if bucket is None:
        with open(ref.location, "rb") as fh:
            data = fh.read(max_bytes + 1)
    else:
        assert client is not None
        data = client.get_object(Bucket=bucket, Key=ref.location)["Body"].read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"over the {max_bytes}-byte limit (--max-file-mb)")
    return bytes(data)
