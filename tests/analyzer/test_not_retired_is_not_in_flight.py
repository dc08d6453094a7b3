"""A collective followed by completed ones on the same rank and group is done, whatever its own row says
(issue 24, principle 2): gloo (and torchcomms before its April 2026 fix) can leave an entry ``retired=False``
while later entries completed and ``pg_status`` says the last collective completed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.verdict import Category, CulpritKind, Status
from frwatch_dev.dumps.program import world
from frwatch_dev.ports import free_port
from realdumps import load_dump

WORLD = 4


def _gloo_steps() -> object:
    return world(WORLD, backend="gloo").repeat(6, lambda x: x.all_reduce().all_gather().barrier())


def _files(dumps: dict[int, dict]) -> list[tuple[str, int, dict]]:  # type: ignore[type-arg]
    return [(f"nccl_trace_rank_{r}", r, d) for r, d in sorted(dumps.items())]


def test_an_unretired_entry_before_retired_ones_is_done() -> None:
    dumps = _gloo_steps().dumps()  # type: ignore[attr-defined]
    dumps[2]["entries"][-3]["retired"] = False  # all_reduce #16; #17 and #18 retired, pg_status says 18
    v = analyze_dumps(_files(dumps), world_size=WORLD)
    assert (v.status, v.category) == (Status.healthy, Category.healthy), v.headline


def test_a_stale_unretired_entry_does_not_hide_the_real_hang() -> None:
    w = world(WORLD, backend="gloo").repeat(6, lambda x: x.all_reduce().all_gather().barrier())
    dumps = w.rank(1).stops_at(13).dumps()
    dumps[3]["entries"][3]["retired"] = False  # #4, long before the hang
    v = analyze_dumps(_files(dumps), world_size=WORLD)
    assert v.category == Category.missing_rank and v.culprit_ranks == [1], v.headline
    assert v.culprit_kind == CulpritKind.cpu_stuck
    assert v.earliest_branch is not None and v.earliest_branch.seq == 13


def test_the_last_entry_in_flight_is_still_in_flight() -> None:
    """The rule reads only calls that finished after the entry: a rank stuck in its newest call stays stuck."""
    w = world(WORLD, backend="gloo").repeat(6, lambda x: x.all_reduce().all_gather().barrier())
    v = analyze_dumps(_files(w.rank(1).stops_at(13).dumps()), world_size=WORLD)
    assert v.status == Status.problem and v.culprit_ranks == [1]


@pytest.mark.slow
def test_real_gloo_ranks_overtaken_collective_is_healthy_through_the_cli(tmp_path: Path) -> None:
    """Real torch gloo ranks: a large async all_reduce overtaken by a tiny one is unretired in every dump,
    the tiny one retired and pg_status at it; ``frwatch analyze`` on the folder says healthy."""
    port = free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "frwatch_dev.workloads.overtaken_gloo", str(r), str(WORLD), str(port), str(tmp_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for r in range(WORLD)
    ]  # fmt: skip
    for p in procs:
        _, err = p.communicate(timeout=600)  # torch imports take minutes on a loaded machine
        assert p.returncode == 0, err.decode(errors="replace")[-2000:]
    overtaken = 0
    for r in range(WORLD):
        d = load_dump(tmp_path / f"nccl_trace_rank_{r}")
        last = d["entries"][-1]
        assert last["retired"] is True and last["input_sizes"] == [[4]]
        assert d["pg_status"]["0"]["last_completed_collective"] == last["collective_seq_id"]
        overtaken += d["entries"][-2]["retired"] is False
    assert overtaken >= 1, "no dump shows the large call unretired after the tiny one: the case did not occur"
    out = subprocess.run(
        [sys.executable, "-m", "frwatch_operator.cli", "analyze", str(tmp_path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    v = json.loads(out.stdout)
    assert (v["status"], v["category"]) == ("healthy", "healthy"), v["headline"]
