"""Renders a :class:`~frwatch_analyzers.verdict.Verdict` (and, with a source folder, the bridge to the code)
into the report page."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import jinja2

from ...base.textfmt import op_short, ranks_text
from ...verdict import GroupTimeline, Verdict
from .bridge import Bridge, build, needs
from .sourcefiles import SourceTree

_HERE = Path(__file__).parent
#: Rows of long tables (groups, files) drawn before "... N more".
MAX_ROWS = 64
#: Sides of the branch drawn (the distinct things the members recorded there).
MAX_SIDES = 12

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(_HERE)),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["ranks"] = lambda rs, limit=8: ranks_text(rs, limit)
_ENV.filters["op"] = lambda op: op_short(op) if op else "never enqueued"
_ENV.filters["base"] = lambda path: str(path).rsplit("/", 1)[-1]
_CSS = (_HERE / "report.css").read_text(encoding="utf-8")
_CSP_STYLE = "sha256-" + base64.b64encode(hashlib.sha256(_CSS.encode()).digest()).decode()


def render_html(verdict: Verdict, source: Path | None = None, *, source_missing: str = "") -> str:
    """The page for ``verdict``; ``source``: the training code's folder, for the bridge to the code.
    ``source_missing``: why the code could not be had (said before what the bridge would need)."""
    bridge: Bridge | None = None
    if source is not None and verdict.evidence:
        bridge = build(verdict, SourceTree(source))
    context: dict[str, Any] = {
        "v": verdict,
        "css": _CSS,
        "csp": f"default-src 'none'; style-src '{_CSP_STYLE}'; img-src 'none'; base-uri 'none'; form-action 'none'",
        "bridge": bridge,
        "needs": (
            f"{source_missing.rstrip('.')}. {needs(verdict)}" if source_missing else needs(verdict)
        ) if bridge is None and verdict.evidence else "",
        "culprits": set(verdict.culprit_ranks),
        "max_rows": MAX_ROWS,
        "max_sides": MAX_SIDES,
        "summary": _after(verdict.summary, verdict.headline),
        "detail": _after(verdict.culprit_detail, verdict.headline),
        "timelines": [_timeline_view(t) for t in verdict.timelines],
    }
    return _ENV.get_template("report.html.j2").render(context)


def _timeline_view(t: GroupTimeline) -> dict[str, Any]:
    """Each cell's classes: never enqueued, not completed, at the branch, or unlike most ranks' call there."""
    weight: list[dict[tuple[str | None, str, str], int]] = [{} for _ in t.seqs]
    for lane in t.lanes:
        for i, c in enumerate(lane.cells):
            key = (c.op, c.detail, c.site)
            weight[i][key] = weight[i].get(key, 0) + len(lane.ranks)
    usual = [max(w, key=w.__getitem__) if w else None for w in weight]
    lanes = []
    for lane in t.lanes:
        cells = []
        for i, c in enumerate(lane.cells):
            cls = ["cell"]
            if c.op is None:
                cls.append("none")
            elif c.state in ("in flight", "scheduled", "started"):
                cls.append("open")
            if (c.op, c.detail, c.site) != usual[i]:
                cls.append("differs")
            if c.seq == t.branch_seq:
                cls.append("branch")
            cells.append({"c": c, "cls": " ".join(cls)})
        nodes = list(lane.nodes) + (
            [f"... ({lane.nodes_total} nodes)"] if lane.nodes_total > len(lane.nodes) else []
        )
        lanes.append({"l": lane, "cells": cells, "nodes": nodes})
    return {"t": t, "lanes": lanes}


def _after(text: str, headline: str) -> str:
    """``text`` without the headline it repeats."""
    return text[len(headline) :].lstrip(". ") if headline and text.startswith(headline) else text
