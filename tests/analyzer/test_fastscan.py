"""The compiled common case of the summarizer's per-entry loop (``_fastscan.c``, chosen in fastscan.py) gives
what the pure-Python loop gives, field for field: on the conformance corpus, on varied dumps, on hostile and
randomly mutated entries (the same RankTrace or the same DumpError message, and the same caches after), and
where the extension must have been built (scripts/test says so), it was."""

from __future__ import annotations

import copy
import gc
import os
import random
import sys
import tracemalloc
from typing import Any

import pytest

from frwatch_analyzers.decode import fastscan
from frwatch_analyzers.decode.safe_load import DumpError, decode
from frwatch_analyzers.trace import summarize
from frwatch_analyzers.trace.summarize import RankTrace, Summarizer
from frwatch_dev.dumps import varied
from frwatch_dev.dumps.corpus import cases
from frwatch_dev.dumps.encode import json_bytes

needs_compiled = pytest.mark.skipif(
    fastscan.COMPILED is None, reason="the extension is not built here (no C compiler): Python alone runs"
)


def test_the_extension_is_built_where_it_must_be() -> None:
    """scripts/test sets FRWATCH_REQUIRE_COMPILED=1 where a C compiler and Python's headers are found: a
    build that silently fell back to Python fails here, not in a benchmark."""
    if os.environ.get(fastscan.ENV_REQUIRE_COMPILED) != "1":
        pytest.skip(f"{fastscan.ENV_REQUIRE_COMPILED} is not 1: the pure-Python loop may be all there is")
    assert fastscan.COMPILED is not None, (
        "the extension frwatch_analyzers.decode._fastscan was not built: run scripts/setup and read pip's output"
    )


def test_the_pure_python_switch_is_honoured() -> None:
    assert Summarizer(compiled=False)._c is None
    if os.environ.get(fastscan.ENV_PURE_PYTHON) == "1":
        assert fastscan.DEFAULT is None and Summarizer()._c is None
    else:
        assert fastscan.DEFAULT is fastscan.COMPILED


def _outcome(s: Summarizer, dump: Any, rank: int, fmt: str = "pickle") -> RankTrace | str:
    try:
        return s.summarize(dump, rank, f"r{rank}", fmt)
    except DumpError as exc:
        return f"DumpError: {exc}"


def _state(s: Summarizer) -> tuple[Any, ...]:
    return (s.details, s._key_cache, s._by_site, s._plain_of, s._emitted, s._ranks_cache)


class _Pair:
    """One summarizer a path, fed the same files in the same order (their caches live across files, as a
    worker's do): every outcome and every cache must be the same."""

    def __init__(self) -> None:
        self.c, self.py = Summarizer(compiled=True), Summarizer(compiled=False)
        self.errors = 0

    def same(self, dump: Any, rank: int, fmt: str = "pickle") -> RankTrace | str:
        got_c, got_py = _outcome(self.c, dump, rank, fmt), _outcome(self.py, dump, rank, fmt)
        assert got_c == got_py
        assert _state(self.c) == _state(self.py)
        self.errors += isinstance(got_c, str)
        return got_c


class _Counting:
    """COMPILED with a count of the entries its step handled (so the tests know C did the work)."""

    def __init__(self, real: fastscan.Compiled) -> None:
        self.real, self.handled, self.calls = real, 0, 0
        self.created, self.detail = real.created, real.detail

    def step(self, ctx: tuple[Any, ...], start: int, has_states: bool, last: int) -> tuple[int, bool, int]:
        out = self.real.step(ctx, start, has_states, last)
        self.calls += 1
        self.handled += out[0] - start
        return out


def _counted_pair() -> tuple[_Pair, _Counting]:
    """A pair whose compiled side counts the entries its step handled."""
    assert fastscan.COMPILED is not None
    pair = _Pair()
    counting = _Counting(fastscan.COMPILED)
    pair.c._c = counting  # type: ignore[assignment]
    return pair, counting


@needs_compiled
def test_varied_dumps_give_the_same_traces_and_most_entries_are_read_in_c() -> None:
    pair, counting = _counted_pair()
    world, entries = 16, 400
    for rank in range(world):
        trace = pair.same(varied.rank_dump(rank, world, entries), rank)
        assert isinstance(trace, RankTrace) and trace.pgs
    assert counting.handled >= 0.9 * world * entries, (counting.handled, counting.calls)


@needs_compiled
def test_json_dumps_without_frames_are_read_in_c() -> None:
    """torch's JSON (the live answer ``fr_trace_json``, ``_dump_fr_trace_json``) as ``decode`` gives it: every
    entry's group one shared ``(name, description)`` tuple and its short strings shared, as in the pickle, so
    the compiled step takes the entries (with a fresh list an entry it took none) and gives what Python gives."""
    pair, counting = _counted_pair()
    world, entries = 8, 400
    for rank in range(world):
        dump, fmt = decode(json_bytes(varied.rank_dump(rank, world, entries)))
        assert fmt == "json"
        groups = {id(e["process_group"]): e["process_group"] for e in dump["entries"]}
        assert {type(g) for g in groups.values()} == {tuple} and len(groups) == len(set(groups.values()))
        trace = pair.same(dump, rank, fmt)
        assert isinstance(trace, RankTrace) and trace.pgs
    assert counting.handled >= 0.9 * world * entries, (counting.handled, counting.calls)


@needs_compiled
@pytest.mark.parametrize("bound", [summarize._CACHE_KEYS, 40])
def test_the_conformance_corpus_gives_the_same_traces(monkeypatch: pytest.MonkeyPatch, bound: int) -> None:
    """Every file of every corpus case (p2p, coalesced batches, gloo, JSON-shaped, two dumps a rank...),
    through one summarizer a path, as a worker reads them; with the caches cleared often (bound 40) too."""
    monkeypatch.setattr(summarize, "_CACHE_KEYS", bound)
    pair = _Pair()
    files = 0
    for case in cases():
        for _name, rank, dump in case.files():
            pair.same(dump, rank)
            files += 1
    assert files > 1000


@needs_compiled
@pytest.mark.slow
def test_real_gloo_dumps_give_the_same_traces(real_dumps: Any) -> None:
    """Dumps real torch gloo ranks wrote (pickles, and a JSON one beside them)."""
    pair = _Pair()
    read = 0
    for scenario, extra in (("skip", ()), ("moe", ()), ("subgroup", ()), ("skip", ("--json-ranks", "3"))):
        folder = real_dumps(scenario, *extra)
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name[-1:].isdigit():
                dump, fmt = decode(path.read_bytes())
                rank = int("".join(ch for ch in path.name.rsplit("_", 1)[-1] if ch.isdigit()))
                assert isinstance(pair.same(dump, rank, fmt), RankTrace)
                read += 1
    assert read >= 16


# --- hostile entries ---------------------------------------------------------------------------------------

_LOOP: list[Any] = []
_LOOP.append(_LOOP)  # a list holding itself
_DEEP: list[Any] = [1]
for _ in range(200):
    _DEEP = [_DEEP]

HOSTILE: list[Any] = [
    None, True, False, 0, -1, 7, 1 << 62, 1 << 63, -(1 << 63) - 1, 1 << 70, 1.5, float("nan"), "", "x",
    "nccl:all_reduce", "nccl:send 0->1", "nccl:recv 1<-0", "gloo:all_gather", b"x", bytearray(b"y"),
    [], [[]], [[1, 2]], [[1, -2]], [["a"]], [[True]], [[1.0]], [(1, 2)], ((1, 2),), [[1 << 63]], [[1 << 70]],
    ["Float"], ["BFloat16", "Float"], [1], [None], {"a": 1}, {1, 2}, frozenset({3}), (1, 2), ("a", "b"),
    ("a",), ("a", "b", "c"), ("0", 1), ["0", "default_pg"], ("0", "default_pg"), ("1", "tp"), ("9", "new"),
    "completed", "started", "scheduled", "bogus", _LOOP, [_LOOP], _DEEP, [{"name": "f"}],
    [{"name": "f", "filename": "/app/x.py", "line": 3}], [7, 8], ({"name": "f", "filename": "a", "line": 1},),
]  # fmt: skip
FIELDS = [
    "process_group", "pg_id", "profiling_name", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes",
    "state", "record_id", "is_p2p", "collective_seq_id", "frames", "time_created_ns", "retired",
    "p2p_seq_id", "time_discovered_started_ns", "time_discovered_completed_ns",
]  # fmt: skip


def _mutate(rng: random.Random, dump: dict[str, Any]) -> None:
    ents: list[Any] = dump["entries"]
    for _ in range(rng.randint(1, 3)):
        j = rng.randrange(len(ents))
        e = ents[j]
        how = rng.randrange(12)
        if not isinstance(e, dict):
            ents[j] = copy.copy(ents[(j + 1) % len(ents)])
        elif how <= 3:  # a field of any type
            e[rng.choice(FIELDS)] = rng.choice(HOSTILE)
        elif how == 4:  # a field missing
            e.pop(rng.choice(FIELDS), None)
        elif how == 5:  # not a dict
            ents[j] = rng.choice([None, [], (1, 2), "entry", 5, [e]])
        elif how == 6:  # the same entry twice, or two entries swapped (record ids out of order)
            k = rng.randrange(len(ents))
            if rng.random() < 0.5:
                ents[k] = e
            else:
                ents[j], ents[k] = ents[k], e
        elif how == 7 and j > 0 and isinstance(ents[j - 1], dict):  # a coalesced part, or a repeated id
            prev = ents[j - 1]
            key = rng.choice(["collective_seq_id", "record_id"])
            e[key] = prev.get(key)
            if rng.random() < 0.5:
                e["process_group"], e["pg_id"] = prev.get("process_group"), prev.get("pg_id")
        elif how == 8:  # sizes another rank or step would have (a new candidate) or shared with another
            other = ents[rng.randrange(len(ents))]
            if isinstance(other, dict):
                for key in ("input_sizes", "output_sizes", "input_dtypes", "output_dtypes"):
                    if key in other:
                        e[key] = other[key]
            e["input_sizes"] = [[rng.choice([1, 3, 64, 1 << 20])]]
        elif how == 9:  # frames: another entry's list, a frame that is not a dict, a tuple of frames
            frames = e.get("frames")
            if isinstance(frames, list) and frames:
                frames = list(frames)
                frames[rng.randrange(len(frames))] = rng.choice(HOSTILE)
                e["frames"] = frames if rng.random() < 0.7 else tuple(frames)
        elif how == 10:  # a p2p op
            peer = rng.randrange(4)
            e["profiling_name"] = rng.choice(
                [f"nccl:send 0->{peer}", f"nccl:recv {peer}<-0", "nccl:coalesced"]
            )
            e["is_p2p"] = rng.random() < 0.8
            e["p2p_seq_id"] = rng.choice([1, 2, None, "x"])
        else:  # a JSON-shaped group (a list), or another group
            e["process_group"] = rng.choice([["0", "default_pg"], ("5", "tp"), ("0", "dp"), ("0",)])


def _bases() -> list[tuple[int, dict[str, Any]]]:
    out = [(rank, varied.rank_dump(rank, 16, 60)) for rank in (0, 11)]
    for case in cases()[::37]:
        out += [(rank, dump) for _name, rank, dump in case.files()[:2]]
    return out


@needs_compiled
@pytest.mark.parametrize("seed", range(4))
def test_randomly_mutated_dumps_give_the_same_outcome(seed: int) -> None:
    """Seeded: 1-3 hostile mutations a file (a field of any type, a missing key, an entry that is not a
    dict, one entry twice, entries swapped, coalesced parts, new sizes, broken frames, p2p, JSON-shaped
    groups), 150 files a seed through one pair of summarizers: the same trace or the same DumpError."""
    rng = random.Random(seed)
    bases = _bases()
    pair = _Pair()
    for _ in range(150):
        rank, base = rng.choice(bases)
        dump = copy.deepcopy(base)  # keeps the sharing of frames and strings the base has
        _mutate(rng, dump)
        pair.same(dump, rank)
    assert 0 < pair.errors < 150  # both kinds of outcome were compared


@needs_compiled
def test_each_hostile_value_in_each_field_gives_the_same_outcome() -> None:
    """Every hostile value in every field of one entry in the middle of a varied dump (after entries that
    filled the caches), and the entry missing each field."""
    base = varied.rank_dump(3, 16, 40)
    pair = _Pair()
    pair.same(copy.deepcopy(base), 3)  # warm: the loop's caches know the sites and sizes
    for name in FIELDS:
        for value in [*HOSTILE, "<missing>"]:
            dump = copy.deepcopy(base)
            entry = dump["entries"][20]
            if value == "<missing>":
                entry.pop(name, None)
            else:
                entry[name] = value
            pair.same(dump, 3)
    assert pair.errors > 0


@needs_compiled
def test_shared_and_out_of_order_entries() -> None:
    base = varied.rank_dump(5, 16, 30)
    pair = _Pair()
    shared = copy.deepcopy(base)
    shared["entries"][10] = shared["entries"][9]  # the same dict twice: its record id repeats
    assert "record_id" in str(pair.same(shared, 5))
    swapped = copy.deepcopy(base)
    ents = swapped["entries"]
    ents[4], ents[12] = ents[12], ents[4]
    assert "does not follow" in str(pair.same(swapped, 5))
    huge = copy.deepcopy(base)
    huge["entries"][3]["record_id"] = 1 << 70  # an int beyond int64 is kept: every later id "does not follow"
    pair.same(huge, 5)
    negative = copy.deepcopy(base)
    for e in negative["entries"]:
        e["record_id"] = -1  # unknown ids: no order to check
    assert isinstance(pair.same(negative, 5), RankTrace)
    no_frames = copy.deepcopy(base)
    for e in no_frames["entries"]:
        del e["frames"]
    assert isinstance(pair.same(no_frames, 5), RankTrace)


@needs_compiled
def test_the_step_refuses_a_context_it_does_not_know() -> None:
    """The step is internal, but a wrong call is an exception, not a crash."""
    assert fastscan.COMPILED is not None
    step = fastscan.COMPILED.step
    with pytest.raises(TypeError):
        step((), 0, False, -1)
    with pytest.raises(TypeError):
        step(([], True, {}, {}, {}, {}, {}, {}, {}, []), 0, False, -1)
    with pytest.raises(TypeError):
        step(([], True, {}, {}, {}, {}, {}, {}, {}, {}), 0, False, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        step(([], True, {}, {}, {}, {}, {}, {}, {}, {}), -1, False, -1)
    assert step(([], True, {}, {}, {}, {}, {}, {}, {}, {}), 5, True, -1) == (5, True, -1)
    assert fastscan.COMPILED.created([{"time_created_ns": 5}, {}]) is not None
    assert fastscan.COMPILED.created([{"time_created_ns": True}]) is None
    assert fastscan.COMPILED.created([{"time_created_ns": 1 << 63}]) is None
    assert fastscan.COMPILED.created(["not a dict"]) is None
    detail, codes = fastscan.COMPILED.detail, summarize.STATE_CODES
    assert detail({}, codes) == (-1, -1, None, 0, 0, 0)
    full = {
        "record_id": 4,
        "state": "started",
        "retired": False,
        "time_created_ns": 1,
        "time_discovered_started_ns": 2,
    }
    assert detail(full, codes) == (4, 1, False, 1, 2, 0)
    assert detail({"state": 3, "retired": 1}, codes) == (-1, -1, None, 0, 0, 0)
    for odd in (
        {"record_id": True},
        {"record_id": 1 << 63},
        {"time_created_ns": 1.0},
        {"time_discovered_started_ns": "7"},
    ):
        assert detail(odd, codes) is None  # Python reads those (_as_int)
    with pytest.raises(TypeError):
        detail([], codes)  # type: ignore[arg-type]


@needs_compiled
@pytest.mark.parametrize("last_state", ["scheduled", "started", "completed", "bogus", None])
def test_states_read_in_c_mark_the_trace_as_having_states(last_state: str | None) -> None:
    """Only the last entry (its call site and sizes seen before: read in C) says anything but 'scheduled'."""
    dump = varied.rank_dump(2, 16, 80)
    for e in dump["entries"]:
        e["state"] = "scheduled"
    dump["entries"][-1]["state"] = last_state
    pair = _Pair()
    for rank in (0, 1, 3):  # a worker's caches after a few ranks: sites and sizes known
        pair.same(varied.rank_dump(rank, 16, 80), rank)
    counting = _Counting(fastscan.COMPILED)  # type: ignore[arg-type]
    pair.c._c = counting  # type: ignore[assignment]
    trace = pair.same(dump, 2)
    assert isinstance(trace, RankTrace)
    assert trace.has_states is (last_state in ("started", "completed"))
    assert counting.handled > 40


def _refcounts(dump: dict[str, Any]) -> list[tuple[int, int]]:
    """The reference counts of every entry and of everything one level inside it (its values and keys),
    but for the objects the interpreter shares everywhere (small ints, None, True, False)."""
    gc.collect()
    objs: list[Any] = [dump["entries"]]
    for e in dump["entries"]:
        objs.append(e)
        if isinstance(e, dict):
            for key, value in e.items():
                objs += [key, value]
                if isinstance(value, list | tuple):
                    objs += value
    shared = (None, True, False)
    return [
        (k, sys.getrefcount(o))
        for k, o in enumerate(objs)
        if not (o in shared or (type(o) is int and -5 <= o <= 256))
    ]


@needs_compiled
def test_the_step_leaves_no_reference_behind() -> None:
    """Summarising a dump again (the worker's caches warm) leaves every object's reference count as it was,
    on the common path and on the paths that give up an entry or raise."""
    good = varied.rank_dump(6, 16, 120)
    bad = copy.deepcopy(good)
    bad["entries"][90]["record_id"] = bad["entries"][89]["record_id"]  # raises at entry 90
    odd = copy.deepcopy(good)
    for j in range(0, 120, 7):
        odd["entries"][j]["is_p2p"] = True  # given up to Python every 7th entry
    s = Summarizer(compiled=True)
    for dump in (good, bad, odd):
        _outcome(s, dump, 6)  # warm: every cache filled, nothing new to keep
        before = _refcounts(dump)
        for _ in range(3):
            _outcome(s, dump, 6)
        assert _refcounts(dump) == before
        # nor any object of its own (a key, an id) that nothing holds: the memory it left stays flat
        tracemalloc.start()
        try:
            gc.collect()
            start = tracemalloc.get_traced_memory()[0]
            for _ in range(20):
                _outcome(s, dump, 6)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - start
        finally:
            tracemalloc.stop()
        assert grown < 16_384, grown
