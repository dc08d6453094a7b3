"""One dump entry's fields as the summarizer reads them: signatures (``digest``, ``compat``, ``combine_all``,
``plain_sig``), call sites, p2p profiling names, integers within int64, the creation-time column and the
detail kept for the entries of :data:`TAIL` and :data:`OPEN_KEEP` (``kept``, ``tail_entry``). Called by
:class:`.summarize.Summarizer`'s per-entry loop; no state of its own."""

from __future__ import annotations

import hashlib
import operator
import re
from array import array
from typing import Any

from ..base.limits import MAX_CALL_SITE_FRAMES
from ..decode import fastscan, fields
from .rank_trace import STATE_CODES, EntrySig, Shapes, TailEntry
from .rules import Rule, rule_for
from .rules import numel as _numel

#: How many of a group's last entries keep their full detail (states, times, record ids).
TAIL = 48
#: How many entries from the first one a rank had not completed keep their full detail as well.
OPEN_KEEP = 8

#: Frames from these paths are library plumbing; the first frame outside them is the user's call site.
_LIBRARY_MARKERS = ("/torch/", "\\torch\\", "/site-packages/", "/dist-packages/", "<frozen ", "/threading.py")

_CREATED = operator.methodcaller("get", "time_created_ns", 0)
_P2P_RE = re.compile(r"^(?P<type>send|recv)\s+(?P<a>[0-9]{1,9})\s*(?P<arrow>->|<-)\s*(?P<b>[0-9]{1,9})$")


def digest(obj: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(obj).encode(), digest_size=8).digest(), "little", signed=True)


def as_int(value: Any, default: int = -1) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return number if -fields.I64 <= number < fields.I64 else default


def parse_ranks(value: Any) -> list[int] | None:
    if isinstance(value, list | tuple):
        return list(value) if all(type(v) is int for v in value) else None
    if isinstance(value, str):
        text = value.strip().strip("[]").strip()
        if not text:
            return []
        try:
            return [int(v) for v in text.split(",")]
        except ValueError:
            return None
    return None


def call_site(frames: Any, where: str = "an entry") -> tuple[tuple[str, str, int], ...]:
    if not isinstance(frames, list | tuple) or not frames:
        return ()
    checked = [fields.frame(f, where) for f in frames]  # every frame type-checked, library ones too
    user = [f for f in checked if not any(m in f[1] for m in _LIBRARY_MARKERS)]
    return tuple(user[:MAX_CALL_SITE_FRAMES]) if user else tuple(checked[:1])


def compat(
    rule: Rule, isz: Shapes, idt: tuple[str, ...], osz: Shapes, odt: tuple[str, ...]
) -> tuple[Any, ...]:
    """The fields of an entry its rule says must agree (sizes that may differ keep only their count)."""
    if not rule.varying and rule.input_dtypes and rule.output_dtypes:
        return (isz, idt, osz, odt)
    return (
        isz if rule.inputs else (((),) * len(isz) if rule.input_count else ()),
        idt if rule.input_dtypes else (),
        osz if rule.outputs else (((),) * len(osz) if rule.output_count else ()),
        odt if rule.output_dtypes else (),
    )


def parse_p2p(op: str) -> tuple[str, int, int] | None:
    """``'nccl:send 1->2'`` -> ``('send', 1, 2)``; ``'nccl:recv 3<-0'`` -> ``('recv', 0, 3)`` as (kind, src, dst)."""
    name = op.split(":", 1)[-1].strip()
    m = _P2P_RE.match(name)
    if not m:
        return None
    a, b = int(m["a"]), int(m["b"])
    if m["type"] == "send":
        return "send", a, b
    return "recv", (b if m["arrow"] == "<-" else a), (a if m["arrow"] == "<-" else b)


def created_column(ents: list[Any], compiled: fastscan.Compiled | None = None) -> array[int]:
    """``time_created_ns`` of each entry (0 unknown: missing, not an integer, beyond int64)."""
    plain = compiled.created(ents) if compiled is not None else None
    if plain is not None:  # every time a plain int64, read in C
        column = array("q")
        column.frombytes(plain)
        return column
    times = list(map(_CREATED, ents))
    if set(map(type, times)) <= {int}:  # the usual case, in C (a bool is not a time: it reads as 0 below)
        try:
            return array("q", times)
        except OverflowError:
            pass
    try:
        return array("q", [t if type(t) is int else 0 for t in times])
    except OverflowError:  # a time beyond int64 reads as unknown
        return array("q", [as_int(t, 0) for t in times])


def done(e: dict[str, Any]) -> bool:
    return e.get("state") == "completed" or e.get("retired") is True


def kept(ents: list[Any]) -> list[int]:
    """Indices whose detail is kept: the first OPEN_KEEP from the first entry not done (read backwards:
    only the open end is walked), and the last TAIL."""
    n = len(ents)
    first_open = n
    while first_open > 0 and not done(ents[first_open - 1]):
        first_open -= 1
    keep = set(range(max(0, n - TAIL), n))
    keep.update(range(first_open, min(n, first_open + OPEN_KEEP)))
    return sorted(keep)


def tail_entry(seq: int, sig: int, e: dict[str, Any], compiled: fastscan.Compiled | None = None) -> TailEntry:
    splits = None
    ins, outs = e.get("input_sizes"), e.get("output_sizes")
    if (
        type(ins) is list
        and type(outs) is list
        and len(ins) > 1
        and len(ins) == len(outs)
        and len(ins) <= 65_536
    ):
        name = e.get("profiling_name")
        if isinstance(name, str) and rule_for(name).varying:  # the sizes were type-checked in the loop
            splits = (tuple(_numel((s,)) for s in ins), tuple(_numel((s,)) for s in outs))
    row = compiled.detail(e, STATE_CODES) if compiled is not None else None
    if row is not None:  # every value plain, read in C
        record_id, state, retired_flag, created, started, completed = row
        return TailEntry(seq, record_id, sig, state, retired_flag, created, started, completed, splits)
    st = e.get("state")
    retired = e.get("retired")
    return TailEntry(
        seq=seq,
        record_id=as_int(e.get("record_id")),
        sig=sig,
        state=STATE_CODES.get(st, -1) if isinstance(st, str) else -1,
        retired=retired if isinstance(retired, bool) else None,
        created_ns=as_int(e.get("time_created_ns"), 0),
        started_ns=as_int(e.get("time_discovered_started_ns"), 0),
        completed_ns=as_int(e.get("time_discovered_completed_ns"), 0),
        splits=splits,
    )


def derived_completed(tail: list[TailEntry]) -> int:
    done = -1
    for t in tail:
        if t.state == STATE_CODES["completed"] or t.retired:
            done = max(done, t.seq)
    return done


def plain_sig(sig: EntrySig, local: dict[int, EntrySig]) -> int:
    if not sig.call_site:
        return digest(sig)
    bare = EntrySig(
        sig.op,
        sig.input_sizes,
        sig.input_dtypes,
        sig.output_sizes,
        sig.output_dtypes,
        (),
        sig.parts,
        sig.varying,
    )
    key = digest(bare)
    local.setdefault(key, bare)
    return key


def combine_all(parts: list[EntrySig]) -> EntrySig:
    """One signature for a coalesced region: ops joined with '+' (once they differ), fields concatenated.
    Linear in the parts (a region of 20k entries must not cost 20k^2)."""
    first = parts[0]
    ops = [first.op]
    for p in parts[1:]:
        if len(ops) > 1 or p.op != first.op:
            ops.append(p.op.split(":", 1)[-1])
    op = "+".join(ops)
    if len(op) > 200:
        op = f"{op[:200]}+... ({len(parts)} parts)"
    return EntrySig(
        op=op,
        input_sizes=tuple(s for p in parts for s in p.input_sizes),
        input_dtypes=tuple(d for p in parts for d in p.input_dtypes),
        output_sizes=tuple(s for p in parts for s in p.output_sizes),
        output_dtypes=tuple(d for p in parts for d in p.output_dtypes),
        call_site=first.call_site,
        parts=sum(p.parts for p in parts),
        varying=any(p.varying for p in parts),
    )
