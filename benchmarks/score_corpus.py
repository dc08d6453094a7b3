"""Score frwatch and PyTorch's fr_trace on the conformance corpus, per case class (and per collective type).

For every case of ``frwatch_dev.dumps.corpus`` (every collective type torch records crossed with
the ways a job goes wrong, each with its truth):

- frwatch: ``analyze_dumps`` on the case's files (through the files on disk, ``analyze(DIR)``, for a case that
  is about the files themselves: ``corpus_evidence.verdict_of``); right when :func:`check` finds no difference from the
  truth (status, category, culprits, culprit kind, hardware class, earliest branch, files listed);
- fr_trace: torch's own ``build_db`` on the same dumps, as ``torchfrtrace DIR --allow-incomplete-ranks``
  reads them (a rank with two files: the one its directory walk reads last wins). fr_trace has no
  categories, so it is right when the first problem it reports names exactly the truth's culprit ranks
  (a healthy case: when it reports nothing). A crash of fr_trace counts as wrong.

    .venv/bin/python benchmarks/score_corpus.py [--by-type] [--show-wrong N] [--markdown]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyzers"))

from frwatch_analyzers.verdict import Status
from frwatch_dev.dumps.corpus import Case, Truth, cases, check
from frwatch_dev.dumps.corpus_evidence import verdict_of

_NUM = re.compile(r"\d+")


def frtrace_culprits(case: Case) -> tuple[set[int] | None, str]:
    """The ranks the first problem fr_trace reports names (set() for none), or None when it crashed."""
    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig

    files = sorted(
        case.files(), key=lambda f: ("/" in f[0], f[0])
    )  # os.walk: a folder's files, then subfolders
    details: dict[str, dict[str, Any]] = {}
    version = ""
    if case.garbage:  # a file that is no dump: torchfrtrace's pickle.load raises on it
        return None, "crashed: a file is no pickle"
    for name, rank, dump in files:
        details[name] = {
            "host_name": f"host_rank{rank}",
            "rank": rank,
            "entries": dump["entries"],
            "version": dump["version"],
            "pg_config": dump["pg_config"],
        }
        version = version or str(dump["version"])
    log = logging.getLogger("Flight Recorder")
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    saved = log.handlers[:]
    log.handlers = [handler]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            build_db(details, JobConfig().parse_args(["unused", "--allow-incomplete-ranks"]), version)
    except Exception as exc:  # fr_trace asserts on what it cannot read
        return None, f"crashed: {type(exc).__name__}: {str(exc)[:80]}"
    finally:
        log.handlers = saved
    return _first_finding(buf.getvalue())


def _first_finding(text: str) -> tuple[set[int], str]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Not all ranks joining collective"):
            for follow in lines[i : i + 12]:
                if follow.startswith("missing ranks:"):
                    return {int(x) for x in _NUM.findall(follow)}, line
            return set(), line
        if "has errors" in line or line.startswith("Input/output mismatch"):
            for follow in lines[i : i + 16]:
                if follow.startswith("error msg:"):
                    return {int(x) for x in re.findall(r"Culprit rank (\d+)", follow)}, line
            return set(), line
    return set(), "(no problem reported)"


def frtrace_right(truth: Truth, culprits: set[int] | None, said: str) -> bool:
    if culprits is None:
        return False
    if truth.status == Status.healthy:
        return said == "(no problem reported)"
    return culprits == set(truth.culprits) and (bool(culprits) or said != "(no problem reported)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--by-type", action="store_true", help="also a table per collective type")
    p.add_argument("--show-wrong", type=int, default=0, help="print this many cases frwatch gets wrong")
    p.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    p.add_argument("--skip-frtrace", action="store_true")
    args = p.parse_args(argv)
    start = time.perf_counter()
    rows: list[tuple[Case, bool, bool | None]] = []
    shown = 0
    for case in cases():
        v = verdict_of(case)
        wrong = check(v, case.truth)
        if wrong and shown < args.show_wrong:
            shown += 1
            print(f"frwatch wrong: {case.name}: {'; '.join(wrong)}\n  {v.headline}")
        ft = None if args.skip_frtrace else frtrace_right(case.truth, *frtrace_culprits(case))
        rows.append((case, not wrong, ft))
    took = time.perf_counter() - start
    _table("case class", [(c.klass, fw, ft) for c, fw, ft in rows], args.markdown)
    if args.by_type:
        _table("collective", [(c.collective, fw, ft) for c, fw, ft in rows], args.markdown)
    print(f"\n{len(rows)} cases in {took:.1f} s")
    return 0 if all(fw for _, fw, _ in rows) else 1


def _table(title: str, rows: list[tuple[str, bool, bool | None]], markdown: bool) -> None:
    total: Counter[str] = Counter()
    fw: Counter[str] = Counter()
    ft: Counter[str] = Counter()
    for key, a, b in rows:
        total[key] += 1
        fw[key] += int(a)
        ft[key] += int(bool(b))
    keys = [*dict.fromkeys(k for k, _, _ in rows), "all"]
    total["all"], fw["all"], ft["all"] = sum(total.values()), sum(fw.values()), sum(ft.values())
    print()
    if markdown:
        print(f"| {title} | cases | frwatch right | fr_trace right |")
        print("|---|---|---|---|")
        for k in keys:
            print(
                f"| {k} | {total[k]} | {fw[k]} ({fw[k] / total[k]:.0%}) | {ft[k]} ({ft[k] / total[k]:.0%}) |"
            )
        return
    print(f"{title:<34} {'cases':>5}  {'frwatch right':>15}  {'fr_trace right':>15}")
    for k in keys:
        print(
            f"{k:<34} {total[k]:>5}  {fw[k]:>8} ({fw[k] / total[k]:>4.0%})  {ft[k]:>8} ({ft[k] / total[k]:>4.0%})"
        )


if __name__ == "__main__":
    sys.exit(main())
