"""frwatch and PyTorch's fr_trace on the same REAL dumps, scenario by scenario.

For every fault gloo can produce, 4 real torch gloo ranks run (``frwatch_dev.workloads``), then:
- ``torchfrtrace DIR -p nccl_trace_rank_ --allow-incomplete-ranks`` on the dumps as written;
- the same on a copy whose ``pg_config`` was repaired (gloo writes it broken: FACTS.md), so fr_trace gets
  a fair chance; membership of every group is taken from the entries, as frwatch infers it;
- ``frwatch analyze DIR`` on the dumps as written.
It prints, per scenario, the truth (the workload's culprit and fault), fr_trace's first lines and
frwatch's headline.

    .venv/bin/python benchmarks/compare_frtrace.py [--scenarios skip,type] [--keep DIR]
"""

from __future__ import annotations

import argparse
import io
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.decode.safe_load import decode
from frwatch_dev.workloads.local_launch import run_local_job
from frwatch_dev.workloads.scenarios import DEFAULTS, Scenario

VENV_BIN = Path(sys.executable).parent


def repaired_copy(src: Path, dst: Path) -> None:
    """Copy the dumps, writing a sane pg_config (group name -> members seen in any rank's entries)."""
    dumps = {}
    for f in sorted(src.iterdir()):
        if f.name.startswith("nccl_trace_rank_") and f.is_file():
            dumps[f.name] = decode(f.read_bytes())[0]
    members: dict[str, set[int]] = {}
    descs: dict[str, str] = {}
    for name, d in dumps.items():
        rank = int(name.rsplit("_", 1)[-1])
        for e in d["entries"]:
            pg, desc = e["process_group"][0], e["process_group"][1]
            members.setdefault(pg, set()).add(rank)
            descs.setdefault(pg, desc)
    world = sorted({int(n.rsplit("_", 1)[-1]) for n in dumps})
    members["0"] = set(world)
    config = {
        pg: {"name": pg, "desc": descs.get(pg, ""), "ranks": str(sorted(r))} for pg, r in members.items()
    }
    dst.mkdir(parents=True, exist_ok=True)
    for name, d in dumps.items():
        d["pg_config"] = config
        buf = io.BytesIO()
        pickle.dump(d, buf, protocol=2)
        (dst / name).write_bytes(buf.getvalue())


def frtrace(folder: Path, lines: int = 4) -> str:
    out = subprocess.run(
        [str(VENV_BIN / "torchfrtrace"), str(folder), "-p", "nccl_trace_rank_", "--allow-incomplete-ranks"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    text = (out.stdout + out.stderr).splitlines()
    keep = [
        ln.strip()
        for ln in text
        if ln.strip()
        and "UserWarning" not in ln
        and "_conversion_method_template" not in ln
        and "tabulate" not in ln
    ]
    if any(ln.startswith("Traceback") for ln in keep):
        return "CRASH: " + keep[-1]
    head = [ln for ln in keep if "sequence number" in ln][:1]
    verdicts = [
        ln for ln in keep if "Culprit rank" in ln or "missing ranks" in ln.lower() or "Error type" in ln
    ]
    return " | ".join(head + verdicts[:2]) or " | ".join(keep[:lines]) or "(prints nothing: no finding)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", default=",".join(s.value for s in Scenario))
    p.add_argument("--keep", type=Path, help="keep the dumps here")
    args = p.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="frwatch-vs-frtrace-"))
    for name in args.scenarios.split(","):
        scenario = Scenario(name)
        folder = root / name
        if folder.exists():
            shutil.rmtree(folder)
        result = run_local_job(scenario, 4, folder, deadline_s=120.0)
        dumped = [r.rank for r in result.ranks if r.dump]
        truth = DEFAULTS[scenario]
        print(
            f"== {name}: culprit rank {truth.culprit}, fault at step {truth.fault_step}; dumps from ranks {dumped}"
        )
        print(f"   fr_trace (as written):      {frtrace(folder)}")
        fixed = root / f"{name}.pgconfig-repaired"
        if fixed.exists():
            shutil.rmtree(fixed)
        repaired_copy(folder, fixed)
        print(f"   fr_trace (pg_config fixed): {frtrace(fixed)}")
        v = analyze(str(folder), world_size=4)
        print(f"   frwatch: {v.status.value}/{v.category.value} culprits {v.culprit_ranks}: {v.headline}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
