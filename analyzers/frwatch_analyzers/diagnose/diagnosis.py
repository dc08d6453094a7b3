"""From aligned groups to a verdict: the world's size, the root (:mod:`.rootcause`), its words
(:mod:`.wording`), and the verdict's evidence, groups of ranks, consequences, stragglers and next steps."""

from __future__ import annotations

from ..align.groups import Disagreement, GroupInfo, compare_group, infer_groups
from ..align.p2p import compare_p2p
from ..align.stragglers import stragglers
from ..align.world import World
from ..base.textfmt import op_short, ranks_text
from ..trace.summarize import RankTrace
from ..verdict import (
    Branch,
    Category,
    CulpritKind,
    Finding,
    ProcessGroupRef,
    Status,
    Straggler,
    Verdict,
)
from .category import Candidate, Context, candidates, p2p_candidate, root
from .lanes import places, timelines
from .nextsteps import next_steps
from .proof import evidence, nodes_of, rank_groups, root_sites
from .wording import detail, exit_known, headline, short


def diagnose(world: World) -> Verdict:
    traces = world.traces
    expected, world_note = _expected_ranks(world)
    missing = sorted(set(expected) - set(traces))
    entries = sum(t.entries for t in traces.values())
    if not traces or entries == 0:
        return _no_dump(world, expected, missing, bool(traces))
    groups = infer_groups(traces, expected)
    for g in groups.values():
        compare_group(g, traces, world.details)
    hard = {
        k: list(g.disagreements) for k, g in groups.items() if g.disagreements and not g.benign_call_sites
    }
    unreadable = {p.rank for p in world.problems if p.rank is not None}
    ctx = Context(traces, world.details, groups, expected, unreadable)
    p2p = [p2p_candidate(ctx, d) for d in compare_p2p(traces, groups, world.details)]
    for c in p2p:
        hard.setdefault(c.group.key, []).append(c.d) if c.d is not None else None
    top, others = root(ctx, candidates(ctx, hard, p2p))
    late = stragglers(traces, groups)
    for s in late:
        s.nodes = nodes_of(world, [s.rank])
        s.summary += f" (on {', '.join(s.nodes)})" if s.nodes else ""
    stats = {
        "files": float(sum(len(t.files) for t in traces.values()) + len(world.problems)),
        "ranks": float(len(traces)),
        "entries": float(entries),
        "process_groups": float(len(groups)),
        "disagreements": float(sum(g.total_disagreements for g in groups.values())),
    }
    notes = [n for n in (world_note, _version_note(traces), _benign_note(groups), *world.notes) if n]
    late_note = _straggler_note(late)
    drawn, undrawn = timelines(world, groups, top)
    culprit_ranks = top.culprits if top is not None else []
    common = {
        "world_size": len(expected) or None,
        "ranks_seen": sorted(traces),
        "missing_dumps": missing,
        "bad_files": world.problems,
        "stats": stats,
        "stragglers": late,
        "dump_files": world.files,
        "timelines": drawn,
        "timelines_omitted": undrawn,
        "places": places(world, culprit_ranks, missing, [s.rank for s in late]),
    }
    if top is None:
        return Verdict(
            status=Status.healthy,
            category=Category.healthy,
            headline=f"healthy: {len(traces)} ranks agree on every collective in {len(groups)} process group(s)"
            + (f"; {late[0].summary}" if late else ""),
            summary=" ".join(
                [f"{entries} entries compared; no rank is missing a collective or stuck.", late_note, *notes]
            ).strip(),
            groups=rank_groups(world, ctx, None, missing),
            short=f"healthy: {len(traces)} ranks agree"
            + (f"; rank {late[0].rank} is a straggler" if late else ""),
            **common,
        )
    culprits = top.culprits
    nodes = nodes_of(world, culprits)
    hw = top.hardware
    # a finding that names no rank (a network hang) still says where: the nodes of the ranks in the stall
    suspects = nodes_of(world, culprits or top.suspects) if hw else []
    status = Status.inconclusive if top.category == Category.inconclusive else Status.problem
    text = detail(ctx, top, world.manifest)
    if nodes and not hw and culprits:
        text += f" {ranks_text(culprits)} ran on {', '.join(nodes)}: a software finding, no node is suspect."
    findings, consequences = _findings(world, ctx, top, others, hard)
    return Verdict(
        status=status,
        category=top.category,
        hardware_class=hw,
        headline=headline(ctx, top),
        summary=" ".join([text, late_note, *notes]).strip(),
        earliest_branch=Branch(
            process_group=ProcessGroupRef(name=top.group.name, desc=top.group.desc, ranks=top.group.members),
            seq=top.seq,
            op=top.op,
            p2p=bool(top.d and top.d.p2p),
        ),
        culprit_ranks=culprits,
        culprit_detail=text,
        culprit_kind=top.kind if culprits or top.kind != CulpritKind.unknown else CulpritKind.unknown,
        short=short(ctx, top, world.manifest),
        suspect_nodes=suspects,
        culprit_nodes=nodes,
        groups=rank_groups(world, ctx, top, missing),
        findings=findings,
        consequences=consequences,
        evidence=evidence(world, ctx, top),
        next_steps=next_steps(
            top, root_sites(world, top), nodes or suspects, exit_known(world.manifest, culprits)
        ),
        **common,
    )


# --- world size ------------------------------------------------------------------------------------------
def _expected_ranks(world: World) -> tuple[list[int], str]:
    """The world: given, else the manifest, else every sane membership source in the dumps (the default
    group's pg_config, an unnamed pg_config entry listing the world as gloo writes it), else the ranks seen."""
    size = world.world_size
    if size is None and world.manifest and world.manifest.world_size:
        size = world.manifest.world_size
    if size is None:
        for t in world.traces.values():
            for pg in t.pgs.values():
                if pg.config_ranks and (pg.desc == "default_pg" or pg.name == "0"):
                    members = pg.config_ranks  # a range's last member in O(1): max() would walk it
                    size = max(size or 0, (members[-1] if isinstance(members, range) else max(members)) + 1)
            if t.world_ranks is not None:
                size = max(size or 0, t.world_ranks[1] + 1)
    seen = set(world.traces) | {p.rank for p in world.problems if p.rank is not None}
    top = (max(seen) + 1) if seen else 0
    if size is None:
        note = (
            "The world size is not known (no manifest, no usable pg_config): it is taken as the highest rank "
            "seen plus one, so ranks above it that left no file would go unnoticed."
        )
        return list(range(top)), note
    return list(range(max(size, top))), ""


def _no_dump(world: World, expected: list[int], missing: list[int], empty: bool) -> Verdict:
    bad = world.problems
    if empty:
        reason = f"the {len(world.traces)} dump(s) hold no entries"
        why = (
            "The dumps were read but record no collective: Flight Recorder was off for them "
            "(TORCH_FR_BUFFER_SIZE=0) or they were taken before any collective ran. Nothing can be aligned."
        )
    else:
        reason = f"none of the {len(bad)} file(s) is a usable dump" if bad else "no dump file was found"
        why = (
            "Without at least one rank's Flight Recorder dump there is nothing to align. Check that "
            "TORCH_FR_BUFFER_SIZE is not 0 and that the dump path is on a volume the agent reads."
        )
    return Verdict(
        status=Status.inconclusive,
        category=Category.no_dump,
        headline=f"no dump to compare: {reason}",
        summary=why,
        short=f"no dump to compare: {reason}"[:120],
        world_size=len(expected) or None,
        ranks_seen=sorted(world.traces),
        missing_dumps=missing,
        bad_files=bad,
        dump_files=world.files,
        next_steps=[
            "Make sure Flight Recorder is on (TORCH_FR_BUFFER_SIZE > 0) and TORCH_NCCL_DUMP_ON_TIMEOUT=1.",
            "Do not set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (pytorch#121055: no dump is written); use 3.",
        ],
    )


# --- point-to-point -------------------------------------------------------------------------------------
# --- findings, groups, evidence --------------------------------------------------------------------------
def _findings(
    world: World, ctx: Context, top: Candidate, others: list[Candidate], hard: dict[str, list[Disagreement]]
) -> tuple[list[Finding], list[Finding]]:
    root_ref = f"{top.group.label} #{top.seq}"
    findings = [
        Finding(
            category=top.category,
            process_group=top.group.key,
            seq=top.seq,
            op=top.op,
            ranks=top.culprits,
            summary=headline(ctx, top),
            silent=top.silent,
        )
    ]
    consequences: list[Finding] = []
    for c in others:
        if c.edges:
            why = "; ".join(
                sorted(
                    {
                        f"{ranks_text([r])} blocked in {ctx.groups[s.key].label} #{s.seq}"
                        if s.key in ctx.groups
                        else f"{ranks_text([r])} blocked in an earlier transfer ({s.key.split(':', 2)[-1]}, p2p #{s.seq})"
                        for r, s in c.edges.items()
                        if s.key in ctx.groups or s.key.startswith("p2p:")
                    }
                )
            )
        else:
            why = f"another finding, not explained by {root_ref} (look at it once the root is fixed)"
        f = Finding(
            category=c.category,
            process_group=c.group.key,
            seq=c.seq,
            op=c.op,
            ranks=c.culprits or sorted(c.edges),
            summary=f"{c.group.label} #{c.seq} {op_short(c.op)}: {headline(ctx, c)}",
            explained_by=why,
            silent=c.silent,
        )
        findings.append(f)
        consequences.append(f)
    ds = [d for d in hard.get(top.group.key, []) if not d.p2p and d.seq > top.seq]
    for i, d in enumerate(ds[:3]):
        f = Finding(
            category=d.category,
            process_group=d.pg,
            seq=d.seq,
            op=_view_op(world, d),
            ranks=d.odd,
            summary=f"{top.group.label} #{d.seq} {op_short(_view_op(world, d))}: {ranks_text(d.odd)} differ",
            explained_by=f"follows from the branch at {root_ref}: from there on these ranks' sequences differ",
        )
        findings.append(f)
        consequences.append(f)
        rest = top.group.total_disagreements - i - 2
        if i == 2 and rest > 0:
            more = f"... and {rest} more disagreement(s) in {top.group.label}"
            consequences.append(f.model_copy(update={"summary": more}))
    return findings, consequences


def _view_op(world: World, d: Disagreement) -> str:
    for v in d.views:
        if v.sig is not None and v.sig in world.details:
            return world.details[v.sig].op
    return "?"


def _version_note(traces: dict[int, RankTrace]) -> str:
    versions = sorted({t.version for t in traces.values()})
    if len(versions) > 1:
        return (
            f"The dumps come from different Flight Recorder versions ({', '.join(versions)}): read with care."
        )
    return ""


def _benign_note(groups: dict[str, GroupInfo]) -> str:
    benign = [g for g in groups.values() if g.benign_call_sites]
    if not benign:
        return ""
    return (
        "Rank-dependent call sites (same collective, sizes and dtypes, different code location) were seen in "
        + ", ".join(g.label for g in benign)
        + " without any other disagreement: not treated as a problem."
    )


def _straggler_note(late: list[Straggler]) -> str:
    if not late:
        return ""
    texts = "; ".join(s.summary for s in late[:4])
    clocks = (
        " (enqueue times are wall clocks of different hosts: a clock offset between nodes would look the same)"
        if any(s.kind.value == "late_enqueue" for s in late)
        else ""
    )
    return f"Stragglers: {texts}{clocks}."
