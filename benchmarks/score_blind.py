"""Scores frwatch and PyTorch's fr_trace on the blind cases (tests/blind/cases/*/, issue 24).

    .venv/bin/python benchmarks/score_blind.py [--cases DIR] [--only NAME ...] [--json OUT]

Each case folder is copied without its truth.json (the truth is not evidence) and given to
`frwatch analyze COPY --format json` (the CLI in the venv) and to fr_trace (`torch.distributed.flight_recorder`,
run in its own process on the pickles, prefix `nccl_trace_rank_`). A case counts as right when status, category,
culprit ranks and hardware_class agree with the truth (or one of the values its `accept` lists) and, when the
truth is a problem with a branch, the branch's group, seq and collective type agree too (p2p: send and recv are
one transfer; the seq may be either end's p2p_seq_id where `accept.seq` says so).

fr_trace reports only mismatches: its answer is read as "problem" at its first failing collective (the category
from its MatchState, the culprits from its per-rank errors and missing ranks), else "healthy"; it never says
hardware, so that field is False; a crash is a miss.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "blind" / "cases"
VENV_BIN = Path(sys.executable).parent
STATE_TO_CATEGORY = {
    "COLLECTIVE_TYPE_MISMATCH": "desync",
    "SIZE_OR_SYNTAX_MISMATCH": "size_mismatch",
    "COLLECTIVE_DTYPE_MISMATCH": "dtype_mismatch",
    "COLLECTIVE_STATE_MISMATCH": "state_mismatch",
    "UNDECIDED": "inconclusive",
}

FR_TRACE_PROBE = r"""
import json, sys, types
from torch.distributed.flight_recorder.components.builder import build_db
from torch.distributed.flight_recorder.components.config_manager import JobConfig
from torch.distributed.flight_recorder.components.loader import read_dir
args = JobConfig().parse_args([sys.argv[1], "-p", "nccl_trace_rank_", *sys.argv[2:]])
details, version = read_dir(args)
db = build_db(details, args, version)
bad = [c for c in db.collectives if not c.pass_check]
out = {"status": "problem" if bad else "healthy", "category": "healthy", "culprit_ranks": [],
       "branch": None, "hardware_class": False}
if bad:
    c = bad[0]
    culprits = set(c.missing_ranks or ())
    states = set()
    for rank, m in (c.mismatch_collectives or {}).items():
        culprits.add(int(rank))
        if m.type_of_mismatch is not None:
            states.add(m.type_of_mismatch.state.name)
    out["culprit_ranks"] = sorted(culprits)
    out["fr_states"] = sorted(states)
    out["branch"] = {"pg": str(c.group_id), "seq": int(c.collective_seq_id), "op": c.collective_name}
    if c.missing_ranks and not states:
        out["category"] = "missing_rank"
    else:
        out["category"] = sorted(states)[0] if states else "inconclusive"
print("FRJSON " + json.dumps(out))
"""


def evidence_copy(case: Path, into: Path) -> Path:
    dest = into / case.name
    shutil.copytree(case, dest, ignore=shutil.ignore_patterns("truth.json"))
    return dest


def run_frwatch(folder: Path) -> dict[str, Any]:
    proc = subprocess.run([str(VENV_BIN / "frwatch"), "analyze", str(folder), "--format", "json"],
                          capture_output=True, text=True, timeout=300)
    try:
        v = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"}
    b = v.get("earliest_branch")
    return {
        "status": v.get("status"), "category": v.get("category"), "culprit_ranks": sorted(v.get("culprit_ranks") or []),
        "hardware_class": bool(v.get("hardware_class")),
        "branch": None if not b else {"pg": str(b["process_group"]["name"]), "seq": b.get("seq"), "op": b.get("op")},
        "headline": v.get("headline", ""),
    }


def run_fr_trace(folder: Path, *extra: str) -> dict[str, Any]:
    """fr_trace's answer; a run refused for missing dump files is retried with its own --allow-incomplete-ranks."""
    proc = subprocess.run([sys.executable, "-c", FR_TRACE_PROBE, str(folder), *extra], capture_output=True,
                          text=True, timeout=300)
    if not extra and "Missing dump files" in proc.stderr:
        return run_fr_trace(folder, "--allow-incomplete-ranks")
    for line in proc.stdout.splitlines():
        if line.startswith("FRJSON "):
            out = json.loads(line[len("FRJSON "):])
            cat = out["category"]
            out["category"] = STATE_TO_CATEGORY.get(cat, cat)
            return dict(out)
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"crashed: {last[:160]}"}


def op_type(op: str | None) -> str:
    """'nccl:send 1->2' -> 'p2p'; 'gloo:all_reduce' -> 'all_reduce'; 'nccl:all_reduce+coalesced' stays joined."""
    names = []
    for part in (op or "").split("+"):
        name = part.split(":", 1)[-1].split(" ", 1)[0]
        names.append("p2p" if name in ("send", "recv") else name)
    return "+".join(names)


def same_op(got: str | None, want: list[str]) -> bool:
    """True when a name the answer gives (one, or several joined by '+') is one the truth allows."""
    wanted = {op_type(o) for o in want}
    return bool(set(op_type(got).split("+")) & wanted)


def judge(truth: dict[str, Any], got: dict[str, Any]) -> tuple[bool, list[str]]:
    """(right, the fields that differ)."""
    if "error" in got:
        return False, ["error"]
    acc = truth.get("accept", {})
    wrong = []
    if got["status"] not in [truth["status"], *acc.get("status", [])]:
        wrong.append("status")
    if got["category"] not in [truth["category"], *acc.get("category", [])]:
        wrong.append("category")
    if got["culprit_ranks"] not in [truth["culprit_ranks"], *acc.get("culprit_ranks", [])]:
        wrong.append("culprits")
    if got["hardware_class"] != truth["hardware_class"]:
        wrong.append("hardware")
    tb = truth.get("earliest_branch")
    if truth["status"] == "problem" and tb:
        gb = got.get("branch")
        if not gb:
            wrong.append("branch")
        else:
            ops = [tb["op"], *acc.get("op", [])]
            if (gb["pg"] != tb["pg"] or gb["seq"] not in [tb["seq"], *acc.get("seq", [])]
                    or not same_op(gb["op"], ops)):
                wrong.append("branch")
    return not wrong, wrong


def fmt(got: dict[str, Any]) -> str:
    if "error" in got:
        return got["error"][:60]
    b = got.get("branch")
    where = f" {b['pg']}#{b['seq']} {op_type(b['op'])}" if b else ""
    return f"{got['status'][:5]} {got['category']} {got['culprit_ranks']}{' hw' if got['hardware_class'] else ''}{where}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--json", type=Path, default=None, help="write every case's truth and answers here")
    ap.add_argument("--tools", default="frwatch,fr_trace", help="which to run (comma-separated)")
    args = ap.parse_args()
    cases = sorted(p for p in args.cases.iterdir() if (p / "truth.json").is_file())
    if args.only:
        cases = [c for c in cases if c.name in args.only]
    rows, totals = [], {"frwatch": 0, "fr_trace": 0}
    with tempfile.TemporaryDirectory(prefix="blind-") as tmp:
        for case in cases:
            truth = json.loads((case / "truth.json").read_text())
            folder = evidence_copy(case, Path(tmp))
            tools = args.tools.split(",")
            skipped = {"error": "not run"}
            fw = run_frwatch(folder) if "frwatch" in tools else skipped
            ft = run_fr_trace(folder) if "fr_trace" in tools else skipped
            ok_fw, why_fw = judge(truth, fw)
            ok_ft, why_ft = judge(truth, ft)
            totals["frwatch"] += ok_fw
            totals["fr_trace"] += ok_ft
            tb = truth.get("earliest_branch")
            t_where = f" {tb['pg']}#{tb['seq']} {op_type(tb['op'])}" if tb else ""
            t_line = (f"{truth['status'][:5]} {truth['category']} {truth['culprit_ranks']}"
                      f"{' hw' if truth['hardware_class'] else ''}{t_where}")
            rows.append({"case": case.name, "principle": truth.get("principle"), "truth": t_line,
                         "frwatch": fw, "frwatch_ok": ok_fw, "frwatch_wrong": why_fw,
                         "fr_trace": ft, "fr_trace_ok": ok_ft, "fr_trace_wrong": why_ft})
            print(f"{case.name:44} P{truth.get('principle', '?'):<2} truth: {t_line}\n"
                  f"{'':48} frwatch  {'OK ' if ok_fw else 'MISS'} {fmt(fw)}"
                  f"{'' if ok_fw else '  (' + ','.join(why_fw) + ')'}\n"
                  f"{'':48} fr_trace {'OK ' if ok_ft else 'MISS'} {fmt(ft)}"
                  f"{'' if ok_ft else '  (' + ','.join(why_ft) + ')'}", flush=True)
    n = len(rows)
    print(f"\nfrwatch {totals['frwatch']}/{n}   fr_trace {totals['fr_trace']}/{n}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "totals": totals, "cases": n}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
