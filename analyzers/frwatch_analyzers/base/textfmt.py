"""Small text helpers shared by the diagnosis and the report: rank ranges, op names, call sites."""

from __future__ import annotations

from collections.abc import Iterable


def ranks_text(ranks: Iterable[int], limit: int = 12) -> str:
    """``[0, 1, 2, 5]`` -> ``'ranks 0-2,5'``; one rank -> ``'rank 5'``; long lists are cut."""
    rs = sorted(set(ranks))
    if not rs:
        return "no rank"
    if len(rs) == 1:
        return f"rank {rs[0]}"
    spans: list[str] = []
    start = prev = rs[0]
    for r in rs[1:]:
        if r == prev + 1:
            prev = r
            continue
        spans.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = r
    spans.append(f"{start}" if start == prev else f"{start}-{prev}")
    text = ",".join(spans[:limit]) + (f",... ({len(rs)} ranks)" if len(spans) > limit else "")
    return f"ranks {text}"


def op_short(op: str) -> str:
    """``'nccl:all_reduce'`` -> ``'all_reduce'``."""
    return op.split(":", 1)[-1]


def call_site_text(site: Iterable[tuple[str, str, int]]) -> str:
    """The innermost user frame as ``file.py:42 (fn)`` (the full path is in the verdict's evidence)."""
    for name, filename, line in site:
        return f"{filename.rsplit('/', 1)[-1]}:{line} ({name})"
    return ""
