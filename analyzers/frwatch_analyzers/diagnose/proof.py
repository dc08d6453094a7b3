"""The verdict's evidence: the entries that prove the root, and the ranks grouped by what they did."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..align.groups import entry_state, in_flight
from ..align.history import index, sig_at
from ..base.textfmt import call_site_text
from ..trace.summarize import STATE_NAMES, PgTrace, RankTrace
from ..verdict import EntryView, Evidence, Frame, RankGroup
from .category import Candidate, Context

if TYPE_CHECKING:
    from ..align.world import World


def nodes_of(world: World, ranks: list[int]) -> list[str]:
    m = world.manifest
    if m is None:
        return []
    return sorted({n for n in (m.node_of(r) for r in ranks) if n})


def completed_seq(pg: PgTrace, has_states: bool) -> int:
    """The group's last completed sequence number as the dump proves it: ``pg_status``'s counter, or the newest
    entry when the counter is one behind it and its own record says it is done. gloo retires an entry (and
    releases ``wait()``) before it moves the counter, so a dump right after a wait can read one less with every
    entry retired (docs/live-watch.md, section 1); ranks that did the same must not be told apart by that."""
    if pg.last_enqueued == pg.last_completed + 1 and in_flight(pg, pg.last_enqueued, has_states) is False:
        return pg.last_enqueued
    return pg.last_completed


def rank_groups(world: World, ctx: Context, top: Candidate | None, missing: list[int]) -> list[RankGroup]:
    keyed: dict[tuple[tuple[str, int, int, str], ...], list[int]] = {}
    culprits = set(top.culprits) if top else set()
    for r, t in world.traces.items():
        key = tuple(
            (
                name,
                pg.last_enqueued,
                completed_seq(pg, t.has_states) if pg.status_known else -2,
                _state_name(world, r, name, pg.last_enqueued),
            )
            for name, pg in sorted(t.pgs.items())
        )
        keyed.setdefault((*key, ("culprit", int(r in culprits), 0, "")), []).append(r)
    out = []
    for key, ranks in sorted(keyed.items(), key=lambda kv: min(kv[1])):
        ranks.sort()
        t = world.traces[ranks[0]]
        enq = {k[0]: k[1] for k in key if k[0] != "culprit"}
        done = {name: completed_seq(pg, t.has_states) for name, pg in t.pgs.items() if pg.status_known}
        flight = {}
        for name, pg in t.pgs.items():
            if in_flight(pg, pg.last_enqueued, t.has_states):
                flight[name] = _op_of(world, pg, pg.last_enqueued)
                if t.has_states:
                    flight[name] += f" [{_state_name(world, ranks[0], name, pg.last_enqueued)}]"
        label = _group_label(t, flight, culprits & set(ranks), top)
        if not t.has_states and flight:
            label = label.replace("inside ", "last in ") + " (not retired at dump time)"
        out.append(
            RankGroup(
                ranks=ranks,
                label=label,
                last_enqueued=enq,
                last_completed=done,
                in_flight=flight,
                nodes=nodes_of(world, ranks),
            )
        )
    if missing:
        out.append(RankGroup(ranks=missing, label="no dump", nodes=nodes_of(world, missing)))
    return out


def _op_of(world: World, pg: PgTrace, seq: int) -> str:
    i = index(pg, seq)
    sig = world.details.get(pg.sigs[i]) if i is not None else None
    return f"{sig.op} #{seq}" if sig else f"#{seq}"


def _group_label(t: RankTrace, flight: dict[str, str], culprit: set[int], top: Candidate | None) -> str:
    tag = "culprit: " if culprit else ""
    if flight:
        where = "; ".join(f"pg {k}: {v}" for k, v in sorted(flight.items()))
        return f"{tag}inside {where}"
    if top is not None:
        pg = t.pgs.get(top.group.key)
        if pg is not None:
            return f"{tag}idle, last at #{pg.last_enqueued} of pg {top.group.name}"
    return f"{tag}idle"


def root_sites(world: World, top: Candidate) -> list[str]:
    sites: list[str] = []
    if top.d is None:
        sig = None
        for r in top.group.dumped:
            sig = sig_at(world.traces, r, top.group.key, top.seq)
            if sig is not None:
                break
        site = (
            call_site_text(world.details[sig].call_site) if sig is not None and sig in world.details else ""
        )
        return [site] if site else []
    for v in reversed(top.d.views):
        if v.sig is not None and v.sig in world.details:
            site = call_site_text(world.details[v.sig].call_site)
            if site and site not in sites:
                sites.append(site)
    return sites


def evidence(world: World, ctx: Context, top: Candidate) -> list[Evidence]:
    g = top.group
    views: list[EntryView] = []
    if top.d is not None and not top.d.balance:
        src = [(v.sig, v.ranks) for v in top.d.views]
    else:
        by_sig: dict[tuple[int | None, str], list[int]] = {}
        for r in g.dumped:
            sig = sig_at(world.traces, r, g.key, top.seq)
            by_sig.setdefault((sig, _state_name(world, r, g.key, top.seq)), []).append(r)
        src = [(sig, ranks) for (sig, _), ranks in by_sig.items()]
    multi = {f.rank for f in world.files}
    for sig, ranks in src:
        det = world.details.get(sig) if sig is not None else None
        if top.d is not None and top.d.p2p:
            states = [_p2p_state(world, ranks[0], g.key, sig)]
        else:
            states = sorted(
                {_state_name(world, r, g.key, top.seq) for r in ranks if r in world.traces} - {""}
            )
        files = sorted({f for r in ranks if r in multi for f in world.traces[r].files})
        views.append(
            EntryView(
                ranks=ranks,
                op=det.op if det else None,
                input_sizes=[list(s) for s in det.input_sizes] if det and not det.varying else [],
                input_dtypes=list(det.input_dtypes) if det else [],
                output_sizes=[list(s) for s in det.output_sizes] if det and not det.varying else [],
                output_dtypes=list(det.output_dtypes) if det else [],
                state="/".join(states) or (None if det else "never enqueued it"),
                call_site=[Frame(name=n, filename=f, line=ln) for n, f, ln in det.call_site] if det else [],
                files=files,
            )
        )
    if g.no_dump:
        views.append(EntryView(ranks=g.no_dump, op=None, state="no dump"))
    note = f"membership from {g.membership_source}"
    if top.d is not None and top.d.balance:
        note += f"; {top.d.balance}"
    elif top.note:
        note += f"; {top.note}"
    return [Evidence(process_group=g.key, seq=top.seq, views=views, note=note)]


def _p2p_state(world: World, rank: int, group: str, sig: int | None) -> str:
    t = world.traces.get(rank)
    if t is None:
        return "no dump"
    if sig is None:
        return "never posted it"
    for e in reversed(t.p2p):
        if e.pg == group and e.sig == sig:
            return STATE_NAMES.get(e.state, "")
    return ""


def _state_name(world: World, rank: int, group: str, seq: int) -> str:
    return entry_state(world.traces[rank], group, seq, "not retired (in flight)")
