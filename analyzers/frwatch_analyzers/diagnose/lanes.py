"""Timelines for the HTML report: per process group, the last collectives of every lane of ranks that
behaved alike, and where the culprits, stragglers and ranks without a dump ran (pods and nodes).

A lane is a set of ranks that recorded the same thing (signature and state) at every sequence number of
the window drawn; ranks are never drawn one by one, so a 16,384-rank world with a few behaviours is a few
lanes. Work is one pass over the members of each drawn group, each rank reading at most ``WINDOW``
sequence numbers (a bisect each), so the cost is O(ranks x WINDOW x log entries) per drawn group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..align.groups import GroupInfo, entry_state
from ..align.history import index
from ..base.textfmt import op_short
from ..trace.summarize import EntrySig
from ..verdict import GroupTimeline, Place, TimelineCell, TimelineLane

if TYPE_CHECKING:
    from ..align.world import World
    from .category import Candidate

#: How many sequence numbers of a group a timeline draws.
WINDOW = 10
#: How many groups get a timeline (the branch's group first, then groups with disagreements, then the rest).
MAX_TIMELINES = 12
#: How many lanes one timeline draws; the others are counted in ``lanes_omitted``.
MAX_LANES = 48
#: How many nodes a lane names.
MAX_NODES = 16
#: How many rows of places (culprits, stragglers, ranks without a dump) are kept.
MAX_PLACES = 64


def timelines(
    world: World, groups: dict[str, GroupInfo], top: Candidate | None
) -> tuple[list[GroupTimeline], int]:
    """The groups' timelines (at most ``MAX_TIMELINES``) and how many groups were left out."""
    branch_key = top.group.key if top is not None else None
    order = sorted(
        groups.values(),
        key=lambda g: (g.key != branch_key, not g.disagreements, g.key),
    )
    drawn = [g for g in order if g.frontier >= 0][:MAX_TIMELINES]
    culprits = set(top.culprits) if top is not None else set()
    # a p2p branch is numbered by p2p_seq_id, not by the collective sequence numbers a timeline draws
    p2p = top is not None and top.d is not None and top.d.p2p
    out = [
        _timeline(world, g, top.seq if top is not None and g.key == branch_key and not p2p else None, culprits)
        for g in drawn
    ]
    return out, max(0, len([g for g in groups.values() if g.frontier >= 0]) - len(drawn))


def _window(world: World, g: GroupInfo, branch: int | None) -> list[int]:
    lowest = min(
        (
            int(pg.seqs[0])
            for r in g.dumped
            if (pg := world.traces[r].pgs.get(g.key)) is not None and len(pg.seqs)
        ),
        default=0,
    )
    last = g.frontier
    if branch is not None and branch < last - WINDOW + 3:
        last = min(g.frontier, branch + WINDOW - 3)  # keep the branch in view, with what came after
    first = max(lowest, last - WINDOW + 1)
    if branch is not None:
        first = min(first, branch)
    return list(range(first, last + 1))


def _timeline(world: World, g: GroupInfo, branch: int | None, culprits: set[int]) -> GroupTimeline:
    seqs = _window(world, g, branch)
    keyed: dict[tuple[bool, tuple[tuple[int | None, str], ...]], list[int]] = {}
    for r in g.dumped:
        t = world.traces[r]
        pg = t.pgs.get(g.key)
        row: list[tuple[int | None, str]] = []
        for s in seqs:
            i = index(pg, s) if pg is not None else None
            row.append((int(pg.sigs[i]) if pg is not None and i is not None else None, entry_state(t, g.key, s, "in flight")))
        keyed.setdefault((r in culprits, tuple(row)), []).append(r)
    lanes = [_lane(world, key, ranks, seqs) for key, ranks in keyed.items()]
    omitted = max(0, len(lanes) + bool(g.no_dump) - MAX_LANES)
    if g.no_dump:
        lanes.append(
            TimelineLane(
                ranks=list(g.no_dump),
                culprit=bool(culprits & set(g.no_dump)),
                no_dump=True,
                cells=[TimelineCell(seq=s, op=None, state="no dump") for s in seqs],
            )
        )
    lanes.sort(key=lambda lane: (not lane.culprit, lane.no_dump, min(lane.ranks)))
    lanes = lanes[:MAX_LANES]
    if world.manifest is not None:
        for lane in lanes:
            nodes = sorted({n for n in map(world.manifest.node_of, lane.ranks) if n})
            lane.nodes, lane.nodes_total = nodes[:MAX_NODES], len(nodes)
    return GroupTimeline(
        process_group=g.key,
        label=g.label,
        members=len(g.members),
        seqs=seqs,
        branch_seq=branch,
        lanes=lanes,
        lanes_omitted=omitted,
    )


def _lane(
    world: World, key: tuple[bool, tuple[tuple[int | None, str], ...]], ranks: list[int], seqs: list[int]
) -> TimelineLane:
    cells = []
    for s, (sig, state) in zip(seqs, key[1], strict=True):
        det = world.details.get(sig) if sig is not None else None
        cells.append(
            TimelineCell(
                seq=s,
                op=op_short(det.op) if det is not None else (None if sig is None else "?"),
                state=state if sig is not None else "not enqueued",
                detail=_detail(det) if det is not None else "",
                site=_site(det) if det is not None else "",
            )
        )
    return TimelineLane(ranks=sorted(ranks), culprit=key[0], cells=cells)




def _detail(det: EntrySig) -> str:
    sizes = "" if det.varying else " ".join("x".join(map(str, s)) or "scalar" for s in det.input_sizes[:4])
    dtypes = ",".join(sorted(set(det.input_dtypes)))
    more = f" (+{len(det.input_sizes) - 4})" if len(det.input_sizes) > 4 and not det.varying else ""
    return " ".join(x for x in (sizes + more, dtypes, "sizes by rank" if det.varying else "") if x)


def _site(det: EntrySig) -> str:
    for name, filename, line in det.call_site[:1]:
        return f"{name} at {filename.rsplit('/', 1)[-1]}:{line}"
    return ""


def places(world: World, culprits: list[int], missing: list[int], stragglers: list[int]) -> list[Place]:
    """Where the ranks a person looks for ran: runs of ranks with the same role, pod and node."""
    m = world.manifest
    roles: list[tuple[str, list[int]]] = [
        ("culprit", culprits),
        ("no dump", missing),
        ("straggler", stragglers),
    ]
    out: list[Place] = []
    for role, ranks in roles:
        run: list[int] = []
        where: tuple[str, str] = ("", "")
        for r in sorted(set(ranks)):
            here = (m.pod_of(r), m.node_of(r)) if m is not None else ("", "")
            if run and (here != where or r != run[-1] + 1):
                out.append(Place(role=role, ranks=run, pod=where[0], node=where[1]))
                run = []
            run.append(r)
            where = here
            if len(out) >= MAX_PLACES:
                return out
        if run:
            out.append(Place(role=role, ranks=run, pod=where[0], node=where[1]))
    return out[:MAX_PLACES]
