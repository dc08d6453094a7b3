"""The short terminal report a person reads in ten seconds: headline, groups, earliest branch, call site,
consequences, next steps."""

from __future__ import annotations

from ..base.safe_text import printable
from ..base.textfmt import ranks_text
from ..verdict import EntryView, Verdict

_MAX_CONSEQUENCES = 6
_MAX_CAUSES = 8
#: Cause kinds that follow another rank's failure: summed up in one line.
_CONSEQUENCES = {"peer_lost", "watchdog_timeout", "nccl_remote_error", "terminated", "exit_code"}


def render(v: Verdict) -> str:
    lines = [
        f"frwatch verdict: {v.status.value.upper()} / {v.category.value}"
        + ("  [hardware-class]" if v.hardware_class else "")
    ]
    lines.append(f"  {v.headline}")
    seen = f"{len(v.ranks_seen)} rank(s) analysed"
    if v.world_size:
        seen += f" of {v.world_size}"
    if v.missing_dumps:
        seen += f"; no dump from {ranks_text(v.missing_dumps)}"
    lines.append(f"  {seen}")
    if v.groups:
        lines.append("")
        lines.append("Groups of ranks that behaved alike:")
        for g in v.groups[:8]:
            nodes = f"  [{', '.join(g.nodes[:4])}{' ...' if len(g.nodes) > 4 else ''}]" if g.nodes else ""
            lines.append(f"  {ranks_text(g.ranks):<22} {g.label}{nodes}")
        if len(v.groups) > 8:
            lines.append(f"  ... {len(v.groups) - 8} more group(s)")
    if v.earliest_branch is not None:
        b = v.earliest_branch
        pg = b.process_group
        lines.append("")
        lines.append(
            f"Earliest branch: collective #{b.seq} of pg {pg.name}"
            f"{' (' + pg.desc + ')' if pg.desc and pg.desc != 'undefined' else ''}, {b.op}   members {ranks_text(pg.ranks)}"
        )
        for ev in v.evidence[:1]:
            for view in ev.views:
                lines.append(f"  {_view_line(view)}")
    if v.culprit_ranks:
        lines.append("")
        where = v.suspect_nodes or v.culprit_nodes
        lines.append(
            f"Culprit: {ranks_text(v.culprit_ranks)}"
            + (f" on {', '.join(where)}" if where else "")
            + ("  (suspect hardware)" if v.suspect_nodes else "")
        )
        detail = v.culprit_detail
        if detail.startswith(v.headline):
            detail = detail[len(v.headline) :].lstrip(". ")
        if detail:
            lines.append(f"  {detail}")
    elif v.summary:
        lines.append("")
        lines.append(f"  {v.summary}")
    lines.extend(_causes(v))
    if v.consequences:
        lines.append("")
        lines.append("Consequences (explained by the earliest branch):")
        for c in v.consequences[:_MAX_CONSEQUENCES]:
            lines.append(f"  - {c.summary} ({c.explained_by})")
        if len(v.consequences) > _MAX_CONSEQUENCES:
            lines.append(f"  - ... {len(v.consequences) - _MAX_CONSEQUENCES} more")
    if v.stragglers:
        lines.append("")
        lines.append("Stragglers:")
        for st in v.stragglers[:6]:
            lines.append(f"  {st.summary}")
    if v.dump_files:
        lines.append("")
        lines.append("Ranks with more than one dump:")
        for f in v.dump_files[:10]:
            lines.append(f"  rank {f.rank}: {f.file}: {f.role}" + (f" ({f.note})" if f.note else ""))
        if len(v.dump_files) > 10:
            lines.append(f"  ... {len(v.dump_files) - 10} more")
    if v.bad_files:
        lines.append("")
        lines.append("Files not used:")
        for p in v.bad_files[:10]:
            lines.append(f"  {p.file}: {p.reason}")
        if len(v.bad_files) > 10:
            lines.append(f"  ... {len(v.bad_files) - 10} more")
    if v.next_steps:
        lines.append("")
        lines.append("Next steps:")
        for i, s in enumerate(v.next_steps, 1):
            lines.append(f"  {i}. {s}")
    return "\n".join(map(printable, lines)) + "\n"  # no name in a line moves the cursor or adds a line


def _causes(v: Verdict) -> list[str]:
    """The evidence beyond Flight Recorder: the causes, then the log lines around the first one."""
    if not v.causes:
        return []
    out = ["", "Evidence from logs, container ends and nodes:"]
    shown = [c for c in v.causes if c.primary or c.first or c.kind.value not in _CONSEQUENCES][:_MAX_CAUSES]
    for c in shown:
        who = f"rank {c.rank}" if c.rank is not None else f"node {c.node}"
        when = f" at {c.time}" if c.time else ""
        where = f" [{c.source}{f':{c.line}' if c.line else ''}]"
        out.append(f"  {'*' if c.first else '-'} {who} {c.kind.value}{when}: {c.message}{where}")
    rest = [c for c in v.causes if c not in shown and c.rank is not None]
    if rest:
        kinds = sorted({c.kind.value for c in rest})
        out.append(f"  - {ranks_text(c.rank for c in rest if c.rank is not None)} then: {', '.join(kinds)}")
    lead = next((c for c in v.causes if c.excerpt and (c.first or c.primary)), None)
    if lead is not None:
        out.append(f"  Log around it ({lead.source}, line {lead.line}):")
        out.extend(f"    | {line}" for line in lead.excerpt)
    return out


def _view_line(view: EntryView) -> str:
    who = ranks_text(view.ranks)
    if view.op is None:
        return f"{who:<22} {view.state or 'never enqueued it'}"
    site = view.call_site[0] if view.call_site else None
    where = f" at {site.filename.rsplit('/', 1)[-1]}:{site.line} ({site.name})" if site else ""
    sizes = f" {view.input_sizes}" if view.input_sizes else ""
    dtypes = f" {view.input_dtypes}" if view.input_dtypes else ""
    state = f" [{view.state}]" if view.state else ""
    return f"{who:<22} {view.op}{sizes}{dtypes}{where}{state}"
