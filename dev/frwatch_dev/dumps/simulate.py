"""Runs a :class:`World`'s program on every rank and returns what each rank's Flight Recorder holds.

Each rank has its own stream of calls: the program ops it takes part in, with its faults applied
(skipped, extra, changed, or the stream ending where it stops). NCCL pairs the k-th collective of each
member of a group (its own ``collective_seq_id``) and the k-th send ``a->b`` with the k-th receive at
``b`` from ``a``; so does this simulation. A call completes when every member issued it, they are
compatible and no fault holds it; a rank waits in each call until it completes (it is *blocked* there).
A blocked rank still enqueues ``World.queued`` more calls, which stay ``scheduled`` (their stream waits
behind the stuck one), as NCCL's asynchronous ops do in a real hang. States and times follow:
``completed`` (both timestamps, ``duration_ms``), ``started`` (the rank entered the collective and waits
for its peers), ``scheduled`` (never started: a GPU hang, or queued behind one). Without
``TORCH_NCCL_ENABLE_TIMING`` nothing is ever ``started``; gloo records ``scheduled`` and no times at all.

About 500 lines by choice: the run and what it records are one piece (what a rank records depends on
when its calls complete), read together.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .frames import CALL_SITES, stack
from .kinds import ROOTED, Payload, Rec, default_tensor, records
from .program import DEFAULT_GROUP, CallSite, Dump, Fault, Frame, Group, Op, World

#: The Flight Recorder format version torch 2.13 writes.
FR_VERSION = "2.10"
TIMEOUT_MS = {"nccl": 600_000, "gloo": 1_800_000}
COMM_LIB_VERSION = {"nccl": "2.27.5", "gloo": ""}
BASE_NS = 1_795_310_584_000_000_000
STEP_NS = 40_000_000  # one program op every 40 ms
START_NS = 30_000  # launch -> start discovered
DURATION_NS = 2_500_000  # the last member's start -> completion discovered
THREAD_ID_BASE = 139_975_964_072_832
_VARYING = ROOTED | {"all_to_all", "all_to_all_single"}


@dataclass
class _Call:
    index: int  # the program op's position: its time
    label: str
    members: tuple[int, ...]  # the group part (collective) or the ranks of the pairs (p2p)
    seq: int  # the program's collective_seq_id in the group (0 for p2p)
    op: Op
    payload: Payload
    faults: tuple[Fault, ...] = ()
    frames_fault: Fault | None = None
    offset_ns: int = 0


@dataclass
class _Entry:
    record_id: int
    label: str
    group: Group
    seq: int
    p2p_seq: int
    op_id: int
    name: str
    rec: Rec
    created: int
    frames: list[Frame]
    is_p2p: bool
    carrier: bool  # carries the call's state (not a part of a coalesced region or p2p batch)
    state: str = "scheduled"
    started: int | None = None
    completed: int | None = None


@dataclass
class _Arrival:
    rank: int
    call: _Call
    entries: list[_Entry]
    active: bool  # issued while the rank was free (False: queued behind a stuck call, never starts)


@dataclass
class _Instance:
    members: tuple[int, ...]
    arrivals: dict[int, _Arrival] = field(default_factory=dict)
    resolved: bool = False
    done: set[int] = field(default_factory=set)


@dataclass
class _Rank:
    rank: int
    entries: list[_Entry] = field(default_factory=list)
    record_id: int = 0
    pg_ids: dict[str, int] = field(default_factory=dict)
    seq: dict[str, int] = field(default_factory=dict)  # its own collective count per group
    p2p_seq: dict[str, int] = field(default_factory=dict)
    op_id: dict[str, int] = field(default_factory=dict)
    pair_count: dict[tuple[str, int, int], int] = field(default_factory=dict)
    pending: list[tuple[Any, ...]] = field(default_factory=list)  # the instances its active call waits on
    blocked: bool = False
    queue_left: int = 0


def simulate(w: World, upto: int | None = None) -> dict[int, Dump]:
    return _Simulation(w, upto).run()


class _Simulation:
    def __init__(self, w: World, upto: int | None) -> None:
        self.w = w
        self.nccl = w.backend == "nccl"
        self.prefix = f"{w.backend}:"
        self.groups = {DEFAULT_GROUP: w.group_named(DEFAULT_GROUP), **{g.label: g for g in w.groups}}
        program = self._extended_program()
        self.program = program if upto is None else program[:upto]
        self.rank_faults: dict[tuple[int, str, int], list[Fault]] = {}
        self.world_faults: dict[tuple[str, int], list[Fault]] = {}
        for f in w.faults:
            if f.rank is None:
                self.world_faults.setdefault((f.group, f.seq), []).append(f)
            else:
                self.rank_faults.setdefault((f.rank, f.group, f.seq), []).append(f)
        self.enqueue_delay = {r: 0 for r in range(w.size)}
        self.start_delay = {r: 0 for r in range(w.size)}
        for r, late, slow in w.delays:
            self.enqueue_delay[r] += late
            self.start_delay[r] += slow
        self.ranks = [_Rank(r, queue_left=w.queued) for r in range(w.size)]
        for st in self.ranks:  # local pg ids, in creation order, for the groups the rank is in
            for label, g in self.groups.items():
                if st.rank in g.ranks:
                    st.pg_ids[label] = len(st.pg_ids)
        self.strings: dict[str, str] = {}
        self.frames: dict[tuple[str, str, int], Frame] = {}
        self.thread_ids = [self._s(str(THREAD_ID_BASE + 4096 * r)) for r in range(w.size)]
        self.instances: dict[tuple[Any, ...], _Instance] = {}

    def _s(self, value: str) -> str:
        """One object per distinct string, so pickle memoizes repeats like torch's pickler does."""
        return self.strings.setdefault(value, value)

    def _extended_program(self) -> tuple[Op, ...]:
        program = list(self.w.program)
        counts: dict[str, int] = {}
        last: dict[str, Op] = {}
        for op in program:
            if op.is_collective:
                counts[op.group] = counts.get(op.group, 0) + 1
                last[op.group] = op
        for f in self.w.faults:
            missing = f.seq - counts.get(f.group, 0)
            if missing > 0:
                if f.group not in last:
                    raise ValueError(
                        f"a fault at seq {f.seq} of group {f.group!r}, which has no collective: "
                        f"add one (e.g. .all_reduce(steps={f.seq}, group={f.group!r}))"
                    )
                program.extend([last[f.group]] * missing)
                counts[f.group] = f.seq
        return tuple(program)

    # ----- each rank's stream of calls ---------------------------------------------------------
    def _stream(self, rank: int) -> list[_Call]:
        calls: list[_Call] = []
        seqs: dict[str, int] = {}
        for index, op in enumerate(self.program):
            g = self.groups[op.group]
            if not op.is_collective:
                members = tuple(sorted({r for p in op.pairs for r in p}))
                if rank in members:
                    calls.append(_Call(index, op.group, members, 0, op, op.payload(index)))
                continue
            seq = seqs[op.group] = seqs.get(op.group, 0) + 1
            if rank not in g.ranks:
                continue
            faults = tuple(self.rank_faults.get((rank, op.group, seq), ()))
            whats = {f.what for f in faults}
            if "stop" in whats:
                break
            members = g.part_of(rank)
            for f in faults:
                if f.what == "extra":
                    same = [o for o in self.program[:index] if o.group == op.group and o.kind == f.kind]
                    extra = same[-1] if same else Op(f.kind, op.group, (default_tensor(f.kind),), op.dtype)
                    calls.append(
                        _Call(
                            index,
                            op.group,
                            members,
                            seq,
                            extra,
                            extra.payload(index),
                            (f,),
                            offset_ns=-STEP_NS // 2,
                        )
                    )
            if "skip" in whats:
                continue
            payload = op.payload(index)
            frames_fault = None
            for f in faults:
                if f.what == "op":
                    payload = Payload(f.kind, (default_tensor(f.kind),), payload.dtype)
                elif f.what == "sizes":
                    payload = replace(payload, explicit=f.explicit)
                elif f.what == "dtype":
                    payload = replace(payload, dtype=f.dtype)
                elif f.what == "root":
                    payload = replace(payload, root=f.root)
                elif f.what == "count":
                    payload = replace(payload, count=f.count)
                elif f.what == "call_site":
                    frames_fault = f
            calls.append(_Call(index, op.group, members, seq, op, payload, faults, frames_fault))
        return calls

    # ----- the run -----------------------------------------------------------------------------
    def run(self) -> dict[int, Dump]:
        streams = {st.rank: self._stream(st.rank) for st in self.ranks}
        pos = dict.fromkeys(streams, 0)
        self._advance(streams, pos, queue=False)
        # every rank is done or blocked for good: the blocked ones still enqueue their next calls
        self._advance(streams, pos, queue=True)
        self._finish_unresolved()
        return {st.rank: self._dump(st) for st in self.ranks if st.rank not in self.w.no_dump}

    def _advance(self, streams: dict[int, list[_Call]], pos: dict[int, int], *, queue: bool) -> None:
        while True:
            progress = False
            for st in self.ranks:
                stream = streams[st.rank]
                while pos[st.rank] < len(stream) and (not st.blocked or (queue and st.queue_left > 0)):
                    active = not st.blocked
                    if not active:
                        st.queue_left -= 1
                    self._issue(st, stream[pos[st.rank]], active)
                    pos[st.rank] += 1
                    progress = True
            for inst in list(self.instances.values()):
                if not inst.resolved and len(inst.arrivals) == len(inst.members):
                    self._resolve(inst)
                    progress = True
            if not progress:
                return

    def _issue(self, st: _Rank, call: _Call, active: bool) -> None:
        keys: list[tuple[Any, ...]] = []
        if call.op.is_collective:
            entries = self._record_collective(st, call)
            keys.append(("c", call.label, call.members, st.seq[call.label]))
        else:
            entries = self._record_p2p(st, call)
            for src, dst in call.op.pairs:
                if st.rank not in (src, dst):
                    continue
                n = st.pair_count[(call.label, src, dst)] = st.pair_count.get((call.label, src, dst), 0) + 1
                keys.append(("p", call.label, src, dst, n))
        for key in keys:
            members = call.members if key[0] == "c" else (key[2], key[3])
            inst = self.instances.setdefault(key, _Instance(members))
            inst.arrivals[st.rank] = _Arrival(st.rank, call, entries, active)
        if active:
            st.blocked = True
            st.pending = keys

    def _resolve(self, inst: _Instance) -> None:
        inst.resolved = True
        arrivals = list(inst.arrivals.values())
        if not all(a.active for a in arrivals):
            return  # a member queued it behind a stuck call: it never starts
        faults = [f for a in arrivals for f in a.call.faults]
        seqs = {a.call.seq for a in arrivals}
        label = arrivals[0].call.label
        world = [f for s in seqs for f in self.world_faults.get((label, s), ())]
        done: set[int] = set(inst.members)
        if any(f.what == "not_started" for f in faults) or any(
            f.what == "network" and (not f.completed_on or f.completed_on & set(inst.members)) for f in world
        ):
            done = set()
        for f in world:
            if f.what == "stall" and f.completed_on & set(inst.members):
                done &= f.completed_on
        forced = [f for f in faults if f.what in ("op", "sizes", "dtype", "count", "call_site", "root")]
        if any(f.hangs for f in forced):
            done = set()
        elif not forced and len({_compat(a) for a in arrivals}) > 1:
            done = set()  # mismatched calls (a skip, an extra call): they hang
        started = {a.rank: self._start_time(a) for a in arrivals}
        finish = max(started.values()) + DURATION_NS
        for a in arrivals:
            if a.rank in done:
                inst.done.add(a.rank)
                carrier = a.entries[-1]
                carrier.state, carrier.started = "completed", started[a.rank]
                carrier.completed = finish + 1_000 * (carrier.record_id % 7)
                self._maybe_unblock(a.rank)

    def _maybe_unblock(self, rank: int) -> None:
        st = self.ranks[rank]
        if all(rank in self.instances[k].done for k in st.pending):
            st.blocked, st.pending = False, []

    def _start_time(self, a: _Arrival) -> int:
        return a.entries[-1].created + START_NS + self.start_delay[a.rank]

    def _finish_unresolved(self) -> None:
        for inst in self.instances.values():
            for a in inst.arrivals.values():
                carrier = a.entries[-1]
                if carrier.state == "completed" or not a.active:
                    continue
                if any(f.what == "not_started" for f in a.call.faults):
                    continue  # a GPU hang: scheduled, never started
                carrier.state, carrier.started = "started", self._start_time(a)

    # ----- recording ---------------------------------------------------------------------------
    def _record_collective(self, st: _Rank, call: _Call) -> list[_Entry]:
        label = call.label
        st.seq[label] = st.seq.get(label, 0) + 1
        recs = records(
            call.payload, backend=self.w.backend, n=len(call.members), me=call.members.index(st.rank)
        )
        created = self._created(st.rank, call)
        kind = call.payload.kind
        out = []
        for rec in recs:
            if kind == "coalesced":
                fkind = rec.name if rec.part else "coalesced"
                site = (call.op.call_site or CALL_SITES["coalesced"]) if rec.part else call.op.call_site
            else:
                fkind, site = kind, call.op.call_site if kind == call.op.kind else None
            frames = self._stack(fkind, site, label, call.frames_fault)
            out.append(self._entry(st, call, rec, created, frames, is_p2p=False, carrier=not rec.part))
        return out

    def _record_p2p(self, st: _Rank, call: _Call) -> list[_Entry]:
        label = call.label
        st.p2p_seq[label] = st.p2p_seq.get(label, 0) + 1
        g = self.groups[label]
        local = {r: i for i, r in enumerate(g.part_of(call.members[0]))}
        batch = call.op.kind == "batch_p2p"
        created = self._created(st.rank, call)
        sizes, dt = call.op.p2p_sizes, call.op.dtype
        out = []
        for src, dst in call.op.pairs:
            if st.rank == src:
                name, part = f"send {local[src]}->{local[dst]}", "send"
            elif st.rank == dst:
                name, part = f"recv {local[dst]}<-{local[src]}", "recv"
            else:
                continue
            rec = Rec(name, sizes, sizes, (dt,) * len(sizes), (dt,) * len(sizes), part=batch)
            frames = self._stack(part, call.op.call_site, label, None)
            out.append(self._entry(st, call, rec, created, frames, is_p2p=True, carrier=not batch))
        if batch:
            end = Rec("coalesced", (), (), (), ())
            out.append(
                self._entry(
                    st,
                    call,
                    end,
                    created,
                    self._stack("coalesced", None, label, None),
                    is_p2p=True,
                    carrier=True,
                )
            )
        return out

    def _created(self, rank: int, call: _Call) -> int:
        return BASE_NS + call.index * STEP_NS + call.offset_ns + 7_919 * rank + self.enqueue_delay[rank]

    def _entry(
        self,
        st: _Rank,
        call: _Call,
        rec: Rec,
        created: int,
        frames: list[Frame],
        *,
        is_p2p: bool,
        carrier: bool,
    ) -> _Entry:
        label = call.label
        st.op_id[label] = st.op_id.get(label, 0) + 1
        e = _Entry(
            record_id=st.record_id,
            label=label,
            group=self.groups[label],
            seq=st.seq.get(label, 0),
            p2p_seq=st.p2p_seq.get(label, 0) if self.nccl else 0,
            op_id=st.op_id[label],
            name=rec.name,
            rec=rec,
            created=created,
            frames=frames,
            is_p2p=is_p2p,
            carrier=carrier,
        )
        st.entries.append(e)
        st.record_id += 1
        return e

    def _stack(
        self, op_kind: str, call_site: CallSite | None, group: str, fault: Fault | None
    ) -> list[Frame]:
        site = call_site or CALL_SITES.get(op_kind, (f"_{op_kind}", "/workspace/model/comm.py", 10))
        if call_site is None and group != DEFAULT_GROUP:  # a distinct code path per group
            site = (site[0], site[1], site[2] + 1000 * int(self.groups[group].name))
        raw = [(str(f["name"]), str(f["filename"]), int(f["line"])) for f in stack(site, op_kind)]
        if fault is not None:
            if fault.frames and fault.frames[0] == ("", "", -1):
                raw[2] = fault.frames[1]
            else:
                raw = list(fault.frames)
        out = []
        for key in raw:
            frame = self.frames.get(key)
            if frame is None:
                frame = {"name": self._s(key[0]), "filename": self._s(key[1]), "line": key[2]}
                self.frames[key] = frame
            out.append(frame)
        return out

    # ----- the dump ----------------------------------------------------------------------------
    def _as_dict(self, st: _Rank, e: _Entry) -> dict[str, Any]:
        s = self._s
        nccl, timed = self.nccl, self.nccl and self.w.timing and e.carrier
        state = e.state if e.carrier else "scheduled"
        completed = state == "completed"
        retired = completed and e.carrier
        shown = "scheduled" if not nccl or (state == "started" and not self.w.timing) else state
        started = e.started if timed and state in ("started", "completed") else None
        done = e.completed if nccl and completed and e.carrier else None
        entry: dict[str, Any] = {
            "frames": e.frames,
            "record_id": e.record_id,
            "pg_id": st.pg_ids[e.label],
            "process_group": (s(e.group.name), s(e.group.desc)),
            "thread_name": s("python"),
            "thread_id": self.thread_ids[st.rank],
            "collective_seq_id": e.seq,
            "p2p_seq_id": e.p2p_seq,
            "op_id": e.op_id,
            "profiling_name": s(self.prefix + e.name),
            "time_created_ns": e.created,
        }
        if done is not None and started is not None and retired:
            entry["duration_ms"] = (done - started) / 1e6
        entry.update(
            input_sizes=[list(x) for x in e.rec.input_sizes],
            input_dtypes=[s(d) for d in e.rec.input_dtypes],
            output_sizes=[list(x) for x in e.rec.output_sizes],
            output_dtypes=[s(d) for d in e.rec.output_dtypes],
            state=s(shown),
            time_discovered_started_ns=started,
            time_discovered_completed_ns=done,
            retired=retired,
            timeout_ms=TIMEOUT_MS[self.w.backend],
            is_p2p=e.is_p2p,
        )
        return entry

    def _dump(self, st: _Rank) -> Dump:
        enqueued: dict[str, int] = {}
        started: dict[str, int] = {}
        completed: dict[str, int] = {}
        for e in st.entries:
            if e.is_p2p or not e.carrier:
                continue
            enqueued[e.label] = max(enqueued.get(e.label, -1), e.seq)
            if e.state in ("started", "completed") and self.nccl and self.w.timing:
                started[e.label] = max(started.get(e.label, -1), e.seq)
            if e.state == "completed":
                completed[e.label] = max(completed.get(e.label, -1), e.seq)
        pg_status = {}
        for label, pg_id in sorted(st.pg_ids.items(), key=lambda kv: kv[1]):
            if label not in enqueued and label not in st.p2p_seq:
                continue  # the recorder learns of a group at its first op
            pg_status[str(pg_id)] = {
                "last_enqueued_collective": enqueued.get(label, -1),
                "last_started_collective": started.get(label, -1),
                "last_completed_collective": completed.get(label, -1),
            }
        return {
            "version": FR_VERSION,
            "pg_config": self._pg_config(st),
            "comm_lib_version": COMM_LIB_VERSION[self.w.backend],
            "pg_status": pg_status,
            "entries": [self._as_dict(st, e) for e in st.entries[-self.w.buffer_size :]],
        }

    def _pg_config(self, st: _Rank) -> dict[str, dict[str, str]]:
        if not self.nccl:  # FACTS.md: gloo's pg_config is broken
            in_subgroup = any(st.rank in g.ranks for g in self.w.groups)
            ranks = "[]" if in_subgroup else str(list(range(self.w.size)))
            return {"": {"name": "", "desc": "", "ranks": ranks}}
        return {
            g.name: {"name": g.name, "desc": g.desc, "ranks": str(list(g.part_of(st.rank)))}
            for label, g in self.groups.items()
            if label in st.pg_ids
        }


def _compat(a: _Arrival) -> tuple[Any, ...]:
    """What must agree for a call to complete (sizes of rooted and all_to_all calls may differ)."""
    if not a.call.op.is_collective:
        return ()  # a send and its recv: the sizes are the program's on both sides
    if a.call.payload.kind in _VARYING:
        return tuple(e.rec.name for e in a.entries)
    return tuple((e.rec.name, e.rec.input_dtypes, e.rec.input_sizes, e.rec.output_sizes) for e in a.entries)
