"""The object-store layout of one job attempt (DESIGN.md, "Object-store layout"). Pure: builds keys only.

``<prefix>/<namespace>/<job>/<job-uid>/<attempt>/ranks/<global-rank>.<pickle|json>``,
``.../pods/<pod>.json``, ``.../manifest.json``, ``.../verdict.json``, ``.../report.txt``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RANKS_DIR = "ranks"
PODS_DIR = "pods"
MANIFEST = "manifest.json"
VERDICT = "verdict.json"
REPORT = "report.txt"


#: What a namespace, job, uid, pod or attempt may look like as one key segment: Kubernetes names and uids
#: fit; ``..``, ``/``, blanks and control characters do not.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def segment_problem(value: str) -> str | None:
    """Why ``value`` cannot be one segment of an object key (None: it can)."""
    if _SEGMENT.fullmatch(value):
        return None
    return f"{value[:40]!r} is not a usable key segment (letters, digits, '.', '_', '-'; no '/' or '..')"


@dataclass(frozen=True)
class AttemptKey:
    """Where one job attempt's evidence lives in the bucket."""

    prefix: str
    namespace: str
    job: str
    job_uid: str
    attempt: str

    @property
    def root(self) -> str:
        parts = [self.prefix.strip("/"), self.namespace, self.job, self.job_uid, self.attempt]
        return "/".join(p for p in parts if p)

    def rank(self, rank: int, fmt: str = "pickle") -> str:
        return f"{self.root}/{RANKS_DIR}/{rank}.{fmt}"

    def pod(self, pod: str) -> str:
        return f"{self.root}/{PODS_DIR}/{pod}.json"

    @property
    def manifest(self) -> str:
        return f"{self.root}/{MANIFEST}"

    @property
    def verdict(self) -> str:
        return f"{self.root}/{VERDICT}"

    @property
    def report(self) -> str:
        return f"{self.root}/{REPORT}"


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``. Raises ValueError on anything else."""
    if not url.startswith("s3://"):
        raise ValueError(f"not an s3:// URL: {url!r}")
    rest = url[len("s3://") :]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"s3 URL without a bucket: {url!r}")
    return bucket, key.strip("/")
