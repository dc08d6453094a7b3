"""The object-store layout of one job attempt (DESIGN.md, "Object-store layout"). Pure: the one place that
builds and parses every key and every ``s3://`` URL of it (the agent, the operator and the analyzer all
come here; the records themselves are :mod:`~frwatch_analyzers.store.pod_record`,
:mod:`~frwatch_analyzers.store.manifest` and :mod:`~frwatch_analyzers.verdict`).

``<prefix>/<namespace>/<job>/<job-uid>/<attempt>/ranks/<global-rank>.<pickle|json>``,
``.../ranks-later/<rank>.<unix-ms>.<fmt>`` (a later, different dump of a rank: nothing is overwritten),
``.../summaries/<rank>.json`` (the agent's summary of ``ranks/<rank>``),
``.../pods/<pod>.json``, ``.../manifest.json``, ``.../verdict.json``, ``.../report.txt``, ``.../report.html``; evidence beyond
Flight Recorder: ``.../logs/<pod>/<container>.txt`` (the tail of a container's log, UTF-8 text),
``.../logs/<pod>/<container>.previous.txt`` (the previous instance of a restarted container),
``.../logs/<pod>/<container>.termination.txt`` (its termination message), ``.../nccl/<rank>.txt`` (a rank's
NCCL debug file) and ``.../nodes/<node>.json`` (:mod:`~frwatch_analyzers.store.node_record`).

Keys read back from a listing are untrusted: :func:`parse_key` never sizes anything by them (a rank's
digits are bounded before they become a number, and a rank at or past ``MAX_WORLD_SIZE`` is said, never
taken).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..base.limits import MAX_WORLD_SIZE

RANKS_DIR = "ranks"
LATER_DIR = "ranks-later"
PODS_DIR = "pods"
#: A rank's summary (:mod:`~frwatch_analyzers.summaries.rank_summary`), written by its agent beside the dump.
SUMMARIES_DIR = "summaries"
LOGS_DIR = "logs"
#: Suffixes of the text files of a flat folder read as logs (never tried as dumps).
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
NCCL_DIR = "nccl"
NODES_DIR = "nodes"
MANIFEST = "manifest.json"
VERDICT = "verdict.json"
REPORT = "report.txt"
#: The HTML report, beside report.txt (``frwatch analyze --html``).
REPORT_HTML = "report.html"
#: The formats a dump is stored in (its key's suffix).
DUMP_FORMATS = ("pickle", "json")
_POD_SUFFIX = ".json"
_NODE_SUFFIX = ".json"
_TEXT_SUFFIX = ".txt"
#: What a log key holds, by its suffix: the tail of the current container's log, of the previous
#: instance of a restarted container, and the container's termination message. A container name is a
#: DNS label (no ``.``), so the suffix cannot be part of it.
LOG_VARIANTS = {"tail": ".txt", "previous": ".previous.txt", "termination": ".termination.txt"}
LogVariant = Literal["tail", "previous", "termination"]
_LONGEST_SUFFIX_FIRST: tuple[LogVariant, ...] = ("termination", "previous", "tail")
#: Digits of a rank in a key read back: more than this is past every bound without being turned into a number.
_MAX_RANK_DIGITS = 12


#: What a namespace, job, uid, pod or attempt may look like as one key segment: Kubernetes names and uids
#: fit; ``..``, ``/``, blanks and control characters do not.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def segment_problem(value: str) -> str | None:
    """Why ``value`` cannot be one segment of an object key (None: it can)."""
    if _SEGMENT.fullmatch(value):
        return None
    return f"{value[:40]!r} is not a usable key segment (letters, digits, '.', '_', '-'; no '/' or '..')"


def s3_url(bucket: str, key: str) -> str:
    """``s3://bucket/key``."""
    return f"s3://{bucket}/{key}"


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``. Raises ValueError on anything else."""
    if not url.startswith("s3://"):
        raise ValueError(f"not an s3:// URL: {url!r}")
    rest = url[len("s3://") :]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"s3 URL without a bucket: {url!r}")
    return bucket, key.strip("/")


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

    def later(self, rank: int, unix_ms: int, fmt: str = "pickle") -> str:
        """Where a later, different dump of ``rank`` goes (``ranks/<rank>`` already holds its first)."""
        return f"{self.root}/{LATER_DIR}/{rank}.{unix_ms}.{fmt}"

    def summary(self, rank: int) -> str:
        """Where the summary of ``rank``'s first dump (``ranks/<rank>``) goes."""
        return f"{self.root}/{SUMMARIES_DIR}/{rank}.json"

    def pod(self, pod: str) -> str:
        return f"{self.root}/{PODS_DIR}/{pod}{_POD_SUFFIX}"

    def log(self, pod: str, container: str, variant: LogVariant = "tail") -> str:
        """Where a container's log evidence goes: its tail (``tail``), the tail of its previous instance
        (``previous``) or its termination message (``termination``)."""
        return f"{self.root}/{LOGS_DIR}/{pod}/{container}{LOG_VARIANTS[variant]}"

    def nccl(self, rank: int) -> str:
        """Where a rank's NCCL debug file (``NCCL_DEBUG_FILE``) goes."""
        return f"{self.root}/{NCCL_DIR}/{rank}{_TEXT_SUFFIX}"

    def node(self, node: str) -> str:
        """Where a suspect node's conditions and Events go (:mod:`~frwatch_analyzers.store.node_record`)."""
        return f"{self.root}/{NODES_DIR}/{node}{_NODE_SUFFIX}"

    @property
    def manifest(self) -> str:
        return f"{self.root}/{MANIFEST}"

    @property
    def verdict(self) -> str:
        return f"{self.root}/{VERDICT}"

    @property
    def report(self) -> str:
        return f"{self.root}/{REPORT}"

    @property
    def report_html(self) -> str:
        return f"{self.root}/{REPORT_HTML}"

    def at(self, bucket: str) -> RootUrl:
        """The attempt's root in ``bucket`` (what an Incident's ``spec.storageUrl`` holds)."""
        return RootUrl(bucket, self.root)

    @classmethod
    def of_root(cls, root: str) -> AttemptKey:
        """The key whose :attr:`root` is ``root`` (its last four segments are namespace, job, uid and
        attempt; what precedes them is the prefix). Raises ValueError when it cannot be one."""
        *prefix, namespace, job, job_uid, attempt = ["", "", "", "", *root.strip("/").split("/")]
        for value in (namespace, job, job_uid, attempt):
            if problem := segment_problem(value):
                raise ValueError(f"{root[:200]!r} is not an attempt's root: {problem}")
        return cls("/".join(p for p in prefix if p), namespace, job, job_uid, attempt)


@dataclass(frozen=True)
class RootUrl:
    """``s3://<bucket>/<attempt root>``: the attempt's evidence, and the URL of each object in it."""

    bucket: str
    root: str

    @classmethod
    def parse(cls, url: str) -> RootUrl:
        """Raises ValueError for anything but an ``s3://`` URL naming a root inside its bucket."""
        bucket, root = split_s3_url(url)
        if not root:
            raise ValueError(f"{url!r} names no attempt root inside the bucket")
        return cls(bucket, root)

    def __str__(self) -> str:
        return s3_url(self.bucket, self.root)

    def key(self, name: str) -> str:
        """The key of ``name`` (``MANIFEST``, ``VERDICT``, ``REPORT``) under the root."""
        return f"{self.root}/{name}"

    def url(self, name: str) -> str:
        return s3_url(self.bucket, self.key(name))

    @property
    def manifest_url(self) -> str:
        return self.url(MANIFEST)

    @property
    def verdict_url(self) -> str:
        return self.url(VERDICT)

    @property
    def report_url(self) -> str:
        return self.url(REPORT)

    @property
    def report_html_url(self) -> str:
        return self.url(REPORT_HTML)

    def attempt(self) -> AttemptKey:
        """The attempt this root is of; ValueError when the root is not an attempt's."""
        return AttemptKey.of_root(self.root)


#: A dump's file name in a folder of any layout: torch writes ``<TORCH_FR_DUMP_TEMP_FILE><global rank>``
#: (default prefix ``~/.cache/torch/comm_lib_trace_rank_``, older ``nccl_trace_rank_``; DebugInfoWriter in
#: torch's FlightRecorder.cpp), and a person copying dumps adds what they like behind it
#: (``nccl_trace_rank_0.final``, ``nccl_trace_rank_0.1``, ``rank3.pkl``); frwatch's own keys are
#: ``ranks/<rank>.<fmt>``. The rank is the number after the last ``rank`` in the name (``rank_0.1`` is rank
#: 0, not 1), else the trailing number, with any suffixes of letters after it (``dump_3.final``, ``3.json``).
#: ASCII digits only (``\d`` also matches other scripts' digits, which ``int`` accepts).
_RANK_AFTER_WORD = re.compile(r"(?i)rank[_.-]?([0-9]+)")
_RANK_AT_END = re.compile(r"([0-9]+)(?:\.[A-Za-z][A-Za-z0-9_-]*)*$")


def rank_digits(name: str) -> str | None:
    """The number of a dump's file name that is its rank, as written (None: the name has none)."""
    after_word = _RANK_AFTER_WORD.findall(name)
    if after_word:
        return str(after_word[-1])
    m = _RANK_AT_END.search(name)
    return m.group(1) if m else None


def rank_from_name(name: str) -> int | None:
    """The rank a file name gives (:func:`rank_digits`); ranks of ``MAX_WORLD_SIZE`` and more are returned as they are
    only when short enough to be read (a longer number is returned as ``MAX_WORLD_SIZE``)."""
    digits = rank_digits(name)
    if digits is None:
        return None
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else MAX_WORLD_SIZE


#: A later dump's leaf under ``ranks-later/``: ``<rank>.<unix-ms>.<fmt>`` (:meth:`AttemptKey.later`).
_LATER_LEAF = re.compile(r"([0-9]{1,12})\.[0-9]{1,16}\.(?:pickle|json)")


def later_rank(leaf: str) -> int | None:
    """The rank of a ``ranks-later/`` leaf (None: not such a leaf, or a rank at or past ``MAX_WORLD_SIZE``)."""
    m = _LATER_LEAF.fullmatch(leaf)
    rank = int(m.group(1)) if m else None
    return rank if rank is not None and rank < MAX_WORLD_SIZE else None


KeyKind = Literal["rank", "rank-out-of-bounds", "pod", "manifest", "log", "nccl", "node", "other"]


@dataclass(frozen=True)
class StoreKey:
    """What one key under an attempt's root names: ``rank`` (a dump, ``ranks/<rank>.<fmt>``, ``rank`` and
    ``fmt`` set), ``rank-out-of-bounds`` (a dump named for a rank at or past ``MAX_WORLD_SIZE``), ``pod``
    (``pods/<pod>.json``, ``name`` the pod), ``manifest``, ``log`` (``logs/<pod>/<container>...txt``:
    ``name`` the pod, ``container`` and ``variant`` set), ``nccl`` (``nccl/<rank>.txt``, ``rank`` set),
    ``node`` (``nodes/<node>.json``, ``name`` the node), or ``other`` (``ranks-later/``, the verdict, the
    report, a log, NCCL or node key whose names are no key segments, anything else)."""

    kind: KeyKind
    name: str = ""
    rank: int | None = None
    fmt: str = ""
    container: str = ""
    variant: LogVariant | None = None


def parse_key(root: str, key: str) -> StoreKey | None:
    """What ``key`` names under the attempt root ``root`` (None: it is not under it)."""
    base = root + "/"
    if not key.startswith(base):
        return None
    rel = key[len(base) :]
    if rel == MANIFEST:
        return StoreKey("manifest", MANIFEST)
    folder, _, leaf = rel.partition("/")
    if folder == RANKS_DIR and "/" not in leaf:
        return _rank_key(leaf)
    if folder == PODS_DIR and "/" not in leaf and leaf.endswith(_POD_SUFFIX):
        return StoreKey("pod", leaf[: -len(_POD_SUFFIX)])
    evidence = _evidence_key(folder, leaf)
    return evidence if evidence is not None else StoreKey("other", rel)


def _evidence_key(folder: str, leaf: str) -> StoreKey | None:
    """A log, NCCL or node key (None: ``folder/leaf`` is none of them, or names no usable segment)."""
    if folder == LOGS_DIR:
        pod, _, file = leaf.partition("/")
        if "/" in file or segment_problem(pod):
            return None
        for variant in _LONGEST_SUFFIX_FIRST:
            suffix = LOG_VARIANTS[variant]
            container = file[: -len(suffix)]
            if file.endswith(suffix) and "." not in container and not segment_problem(container):
                return StoreKey("log", pod, container=container, variant=variant)
        return None
    if folder == NCCL_DIR and leaf.endswith(_TEXT_SUFFIX):
        digits = leaf[: -len(_TEXT_SUFFIX)]
        bounded = digits.isascii() and digits.isdigit() and len(digits) <= _MAX_RANK_DIGITS
        return StoreKey("nccl", leaf, int(digits)) if bounded and int(digits) < MAX_WORLD_SIZE else None
    if folder == NODES_DIR and "/" not in leaf and leaf.endswith(_NODE_SUFFIX):
        node = leaf[: -len(_NODE_SUFFIX)]
        return None if segment_problem(node) else StoreKey("node", node)
    return None


def _rank_key(leaf: str) -> StoreKey:
    """``<rank>.<fmt>`` (ASCII digits, at most 12 of them) below ``MAX_WORLD_SIZE``; a name whose stem is
    digits but that is no such key is a dump of a rank out of bounds."""
    digits, _, fmt = leaf.partition(".")
    if not (digits.isascii() and digits.isdigit()):
        return StoreKey("other", f"{RANKS_DIR}/{leaf}")
    if len(digits) <= _MAX_RANK_DIGITS and fmt in DUMP_FORMATS and int(digits) < MAX_WORLD_SIZE:
        return StoreKey("rank", leaf, int(digits), fmt)
    return StoreKey("rank-out-of-bounds", leaf)
