"""Do forked ranks (`rank_zygote`) leave the same evidence as spawned ones? One job each way per scenario.

    python benchmarks/fork_vs_spawn.py [OUT] [--only SCENARIO]   # every scenario tests/realdumps.py makes

For each scenario it runs the job with `spawn=True` and with `spawn=False`, then compares what the analyzer
reads: each rank's ending and dump presence, each dump's entries (ids, seq ids, op, sizes, dtypes, state,
retired, p2p), pg_config, pg_status, the frames of each entry above runpy's (below them: `python -m`'s
`_run_module_as_main` against the forked child's `run_module`, library frames either way), and the verdict
of `analyze` (its times and byte counts left out, each job's folder named <dir>). Prints one line per scenario and every difference; exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.decode.safe_load import decode
from frwatch_dev.workloads.local_launch import LocalJobResult, run_local_job

SCENARIOS: tuple[tuple[str, ...], ...] = (
    ("healthy",),
    ("skip",),
    ("skip", "--json-ranks", "3"),
    ("skip", "--late-rank", "0"),
    ("type",),
    ("subgroup",),
    ("crash",),
    ("killed",),
    ("extra_same_shape",),
    ("cpu_stuck",),
    ("cpu_stuck", "--ondemand-at-step", "2"),
)
ENTRY_KEYS = (
    "record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
    "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "state", "retired", "is_p2p",
)  # fmt: skip
VOLATILE = ("time_", "_ns", "duration", "seconds", "bytes")  # verdict.stats: how long, how much read


def user_frames(entry: dict[str, Any]) -> list[tuple[str, str, int]]:
    frames = [(f["name"], Path(f["filename"]).name, f["line"]) for f in entry.get("frames") or ()]
    cut = next((i for i, f in enumerate(frames) if "runpy" in f[1]), len(frames))
    return frames[:cut]


def dump_view(path: Path) -> dict[str, Any]:
    data = decode(path.read_bytes())[0]
    return {
        "entries": [{k: e.get(k) for k in ENTRY_KEYS} for e in data.get("entries", ())],
        "frames": [user_frames(e) for e in data.get("entries", ())],
        "pg_config": data.get("pg_config"),
        "pg_status": data.get("pg_status"),
    }


def steady(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if not any(w in str(k) for w in VOLATILE)}
    if isinstance(value, list | tuple):
        return [steady(v) for v in value]
    return value


def job_view(result: LocalJobResult) -> dict[str, Any]:
    verdict = analyze(str(result.dump_dir), world_size=result.world_size)
    return {
        "endings": [(r.rank, r.ended, r.dump is not None) for r in result.ranks],
        "dumps": {r: dump_view(p) for r, p in sorted(result.dumps.items())},
        # the two jobs' folders differ by name: the verdict names its dump files under <dir>
        "verdict": steady(json.loads(verdict.model_dump_json().replace(str(result.dump_dir), "<dir>"))),
    }


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")
        ]
    return [] if a == b else [f"{where}: spawn={a!r:.200} fork={b!r:.200}"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", help="where the jobs' folders go (default: a new temporary folder)")
    parser.add_argument("--only", action="append", default=[], help="run only this scenario (repeatable)")
    args = parser.parse_args(argv[1:])
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="fork_vs_spawn_"))
    failed = 0
    for scenario, *extra in SCENARIOS:
        if args.only and scenario not in args.only:
            continue
        name = " ".join([scenario, *extra])
        views = {}
        for how in ("spawn", "fork"):
            out = root / name.replace(" ", "_") / how
            result = run_local_job(scenario, 4, out, extra_args=extra, deadline_s=90.0, spawn=how == "spawn")
            assert result.started_by == how, (how, result.fork_refused)
            views[how] = job_view(result)
        diff = differences(views["spawn"], views["fork"])
        failed += bool(diff)
        print(f"{name}: {'same' if not diff else f'{len(diff)} differences'}", flush=True)
        for line in diff[:30]:
            print("   ", line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
