"""Every file of every rank, merged by content; group keys that stay unique across recorders and splits.

A rank can leave several files: a job with gloo and NCCL groups writes one per recorder; an on-demand
dump precedes the timeout dump; a write is retried. What a file is comes from its content (backends,
groups, record ids, timestamps), never from its name:

- another recorder (other backends): both are used; a group name both recorders use is told apart by its
  backend (``0@gloo``, ``0@nccl``), since each recorder numbers its own collectives;
- the same recorder at two times: the later one (more records, later timestamps) is used; the entries
  the later ring buffer no longer holds are taken from the earlier one;
- the same content twice: one is used, the other is named identical;
- the same recorder disagreeing on a collective both hold: a conflict, explained in the verdict; the later
  file is used.

Split groups (``dist.split_group``) share one name across disjoint member sets; their pg_config member
lists tell them apart (``3/r2``: group 3, the part whose lowest rank is 2).
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter
from dataclasses import dataclass, field, replace

from ..trace.summarize import EntrySig, PgTrace, Ranks, RankTrace
from ..trace.tail_rows import done_count
from ..verdict import DumpFile, FileProblem


@dataclass
class Merged:
    traces: dict[int, RankTrace]
    details: dict[int, EntrySig]
    problems: list[FileProblem] = field(default_factory=list)
    files: list[DumpFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def merge(raw: list[RankTrace]) -> Merged:
    details: dict[int, EntrySig] = {}
    by_rank: dict[int, list[RankTrace]] = {}
    for t in raw:
        details.update(t.sig_details)
        t.sig_details = {}
        by_rank.setdefault(t.rank, []).append(t)
    out = Merged({}, details)
    for rank in sorted(by_rank):
        files = by_rank[rank]
        if len(files) > 1:
            files = sorted(files, key=_progress)
        if len(files) == 1:
            out.traces[rank] = files[0]
            continue
        out.traces[rank] = _fold(files, out)
    _rekey_backends(out.traces)
    _rekey_splits(out.traces)
    return out


def _progress(t: RankTrace) -> tuple[int, int, int, bool, int, str]:
    """How far a dump of a rank goes: its last record id, how many of its entries were completed, its latest
    timestamp; at equal content the one with call sites (a pickle) comes last, so it is the one used. The
    file name only orders files that are equal in all of this."""
    done = sum(done_count(pg.tail) for pg in t.pgs.values())
    return (t.last_record_id, done, t.dumped_ns, t.has_frames, t.entries, t.file)


def _backends(t: RankTrace) -> set[str]:
    return {pg.backend for pg in t.pgs.values()} | ({t.backend} if t.backend else set())


def _fold(files: list[RankTrace], out: Merged) -> RankTrace:
    """Merge one rank's files, earliest first; record each file's role."""
    roles: dict[str, tuple[str, str]] = {}
    acc = files[0]
    roles[acc.file] = ("used", "")
    for t in files[1:]:
        if not (_backends(acc) & _backends(t)):
            acc = _union(acc, t)
            roles[t.file] = (
                "merged",
                f"another recorder ({', '.join(sorted(_backends(t)))}): its groups are used too",
            )
            continue
        conflict = _conflict(acc, t)
        if conflict:
            roles[acc.file] = ("conflict", f"disagrees with {t.file} {conflict}; the later file is used")
            roles[t.file] = ("used", f"disagrees with {acc.file} {conflict}")
            out.notes.append(
                f"Rank {t.rank} left two dumps of the same recorder that disagree {conflict} ({acc.file}, "
                f"{t.file}): they cannot both be this rank's record; the later one, {t.file}, is used."
            )
            acc = replace(t, files=[*acc.files, *t.files])
            continue
        if _same(acc, t):  # the same records: the later one (with call sites, if either has them) is used
            for f in acc.files:
                if roles.get(f, ("used",))[0] == "used":
                    roles[f] = ("identical", f"the same records as {t.file}")
            roles[t.file] = ("used", "")
            acc = replace(t, files=[*acc.files, *t.files])
            continue
        older = _older_entries(acc, t) if acc.has_frames == t.has_frames else 0
        note = (
            f"an earlier dump of the same recorder (records {acc.first_record_id}-{acc.last_record_id}, then "
            f"{t.first_record_id}-{t.last_record_id} in {t.file}): the later one is used"
        )
        if older:
            note += f", with {older} older entries its ring buffer no longer held"
        for f in acc.files:
            roles[f] = ("superseded", note) if roles.get(f, ("used",))[0] == "used" else roles[f]
        roles[t.file] = ("used", "")
        acc = _prepend(acc, t) if older else replace(t, files=[*acc.files, *t.files])
    for t in files:
        role, note = roles.get(t.file, ("used", ""))
        out.files.append(
            DumpFile(
                file=t.file,
                rank=t.rank,
                role=role,
                backend=",".join(sorted(_backends(t))),
                groups=sorted(t.pgs),
                entries=t.entries,
                record_ids=[t.first_record_id, t.last_record_id],
                dumped_at_ns=t.dumped_ns,
                note=note,
            )
        )
    return acc


def _union(a: RankTrace, b: RankTrace) -> RankTrace:
    pgs = dict(a.pgs)
    for key, pg in b.pgs.items():
        pgs[f"{key}@{pg.backend}" if key in pgs else key] = pg
    return replace(
        a,
        pgs=pgs,
        p2p=[*a.p2p, *b.p2p],
        entries=a.entries + b.entries,
        has_states=a.has_states or b.has_states,
        has_frames=a.has_frames and b.has_frames,
        has_timing=a.has_timing or b.has_timing,
        dumped_ns=max(a.dumped_ns, b.dumped_ns),
        world_ranks=a.world_ranks or b.world_ranks,
        files=[*a.files, *b.files],
    )


def _conflict(a: RankTrace, b: RankTrace) -> str:
    """Where two dumps of one recorder record different collectives at the same point ("" when they agree)."""
    for key in sorted(set(a.pgs) & set(b.pgs)):
        pa, pb = a.pgs[key], b.pgs[key]
        at_b = dict(zip(pb.seqs, pb.plain, strict=True))
        for s, sig in zip(pa.seqs, pa.plain, strict=True):
            other = at_b.get(s)
            if other is not None and other != sig:
                return f"at pg {pa.name} #{s}"
    return ""


def _same(a: RankTrace, b: RankTrace) -> bool:
    return (
        a.last_record_id == b.last_record_id
        and a.pgs.keys() == b.pgs.keys()
        and all(
            a.pgs[k].plain_digest == b.pgs[k].plain_digest
            and [(x.seq, x.state, x.retired) for x in a.pgs[k].tail]
            == [(x.seq, x.state, x.retired) for x in b.pgs[k].tail]
            for k in a.pgs
        )
    )


def _older_entries(old: RankTrace, new: RankTrace) -> int:
    return sum(
        sum(1 for s in pg.seqs if not new.pgs.get(k) or s < new.pgs[k].seqs[0])
        for k, pg in old.pgs.items()
        if len(pg.seqs)
    )


def _prepend(old: RankTrace, new: RankTrace) -> RankTrace:
    """The later dump, with the older entries only the earlier dump still held."""
    pgs = dict(new.pgs)
    for key, pg in old.pgs.items():
        cur = pgs.get(key)
        if cur is None:
            pgs[key] = pg
            continue
        if not len(pg.seqs) or not len(cur.seqs) or pg.seqs[0] >= cur.seqs[0]:
            continue
        n = sum(1 for s in pg.seqs if s < cur.seqs[0])
        seqs = array("q", pg.seqs[:n]) + cur.seqs
        sigs = array("q", pg.sigs[:n]) + cur.sigs
        plain = array("q", pg.plain[:n]) + cur.plain
        created = array("q", pg.created[:n]) + cur.created
        pgs[key] = replace(
            cur,
            seqs=seqs,
            sigs=sigs,
            plain=plain,
            created=created,
            seq_digest=hashlib.blake2b(seqs.tobytes() + sigs.tobytes(), digest_size=16).digest(),
            plain_digest=hashlib.blake2b(seqs.tobytes() + plain.tobytes(), digest_size=16).digest(),
            first_record_id=pg.first_record_id,
        )
    return replace(new, pgs=pgs, files=[*old.files, *new.files], first_record_id=old.first_record_id)


def _rekey_backends(traces: dict[int, RankTrace]) -> None:
    """A group name recorded by two backends names two groups: key each by its backend everywhere."""
    backends: dict[str, set[str]] = {}
    for t in traces.values():
        for key, pg in t.pgs.items():
            backends.setdefault(key.split("@", 1)[0], set()).add(pg.backend)
    shared = {name for name, b in backends.items() if len(b) > 1}
    if not shared:
        return
    for t in traces.values():
        renamed = {}
        for key, pg in t.pgs.items():
            base = key.split("@", 1)[0]
            renamed[f"{base}@{pg.backend}" if base in shared else key] = pg
        t.pgs = renamed
        p2p_backend = sorted(
            pg.backend for pg in t.pgs.values() if pg.backend != "gloo"
        )  # gloo records no p2p
        for e in t.p2p:
            if e.pg in shared and p2p_backend:
                e.pg = f"{e.pg}@{p2p_backend[0]}"


def _rekey_splits(traces: dict[int, RankTrace]) -> None:
    """One name, disjoint member lists in pg_config: split groups. Key each part by its lowest member."""
    members: dict[str, Counter[Ranks]] = {}
    for t in traces.values():
        for key, pg in t.pgs.items():
            if pg.config_ranks:
                members.setdefault(key, Counter())[pg.config_ranks] += 1  # ranges hash in O(1), not O(ranks)
    split = {k for k, c in members.items() if len(c) > 1 and _disjoint(list(c))}
    if not split:
        return
    for t in traces.values():
        renamed: dict[str, PgTrace] = {}
        for key, pg in t.pgs.items():
            if key in split and pg.config_ranks:
                renamed[f"{key}/r{min(pg.config_ranks)}"] = pg
            else:
                renamed[key] = pg
        for e in t.p2p:
            if e.pg in split and t.pgs.get(e.pg) is not None and t.pgs[e.pg].config_ranks:
                e.pg = f"{e.pg}/r{min(t.pgs[e.pg].config_ranks or [0])}"
        t.pgs = renamed


def _disjoint(sets: list[Ranks]) -> bool:
    seen: set[int] = set()
    for s in sets:
        if seen & set(s):
            return False
        seen |= set(s)
    return True
