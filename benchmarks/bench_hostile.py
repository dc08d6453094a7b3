"""What each class of hostile input costs ``frwatch analyze``: wall time and the peak RSS of its process tree.

For each class it writes a folder (ranks 0 and 1 good, rank 2's file hostile, or the folder itself hostile),
runs ``python -m frwatch_analyzers.cli DIR --format json`` under the limits the hostile test suite uses
(``--worker-memory-mb 256 --file-seconds 2``, or the defaults with ``--defaults``), and prints per class the
wall time, the peak RSS (the largest process of the tree, from ``wait4``), the exit code and the reason
given for the hostile file. The payloads are the test suite's (``tests/hostile/payloads.py``)::

    .venv/bin/python benchmarks/bench_hostile.py [--defaults] [--only memo,laughs] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyzers"))
sys.path.insert(0, str(REPO / "tests" / "hostile"))

import payloads as p  # noqa: E402
from hostile_run import analyze  # noqa: E402

from frwatch_dev.dumps import json_bytes, pickle_bytes, world  # noqa: E402

Writer = Callable[[Path], None]


def _with_rank2(content: bytes, name: str = "nccl_trace_rank_2") -> Writer:
    def write(folder: Path) -> None:
        for rank in (0, 1):
            (folder / f"nccl_trace_rank_{rank}").write_bytes(p.good_bytes(rank))
        (folder / name).write_bytes(content)

    return write


def _empties(folder: Path) -> None:
    p.empty_files_and_two_good(folder, world_size=5002)


def _odd_entries(folder: Path) -> None:
    _with_rank2(p.good_bytes(2), "good")(folder)
    os.symlink("/etc/passwd", folder / "nccl_trace_rank_2")
    os.symlink(folder / "nowhere", folder / "nccl_trace_rank_3")
    os.mkfifo(folder / "nccl_trace_rank_4")
    (folder / "nccl_trace_rank_5").mkdir()
    socket.socket(socket.AF_UNIX).bind(str(folder / "nccl_trace_rank_6"))
    (folder / "\x1b[2J\nnccl_trace_rank_7").write_bytes(b"")
    with open(os.path.join(os.fsencode(folder), b"nccl\xff_trace_rank_8"), "wb"):
        pass
    (folder / "nccl_trace_rank_99999999999").write_bytes(b"")


def _manifest(body: bytes | None = None, size: int = 0) -> Writer:
    def write(folder: Path) -> None:
        for rank in range(3):
            (folder / f"nccl_trace_rank_{rank}").write_bytes(p.good_bytes(rank))
        with open(folder / "manifest.json", "wb") as fh:
            if body is not None:
                fh.write(body)
            else:
                fh.truncate(size)

    return write


def _world_262144(folder: Path) -> None:
    for rank, dump in world(2, backend="gloo").all_reduce(steps=3).dumps().items():
        (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle_bytes(dump))
    (folder / "manifest.json").write_text(json.dumps({"world_size": 262_144}))


def _surrogates(folder: Path) -> None:
    evil = "\x1b[2J\nEVIL\u202e\ud800"
    w = (
        world(4)
        .group("tp", ranks=[0, 1, 2, 3], desc=evil)
        .all_reduce(steps=3, group="tp")
        .rank(3)
        .stops_at(3, group="tp")
    )
    for rank, dump in w.dumps().items():
        (folder / f"rank{rank}").write_bytes(json_bytes(dump))


def _one_seq(folder: Path) -> None:
    for rank in range(3):
        (folder / f"nccl_trace_rank_{rank}").write_bytes(p.one_seq_json(20_000))


CLASSES: dict[str, Writer] = {
    "global (os.system)": _with_rank2(p.PROTO2 + b"cos\nsystem\n(S'true'\ntR."),
    "persistent id": _with_rank2(p.PROTO2 + b"Pabc\n."),
    "ext code": _with_rank2(p.PROTO2 + b"\x82\x01."),
    "memo bomb (index 2**32)": _with_rank2(p.memo_index(0xFFFFFFFF)),
    "6 MB of EMPTY_DICT (400 MB decoded)": _with_rank2(p.many_dicts(6_000_000)),
    "BINUNICODE8 claiming 4 EiB": _with_rank2(b"\x80\x04\x8d" + b"\xff" * 7 + b"\x3f."),
    "process_group 200k deep": _with_rank2(
        p.spliced(p.hostile_dump(), ("entries", 0, "process_group"), p.deep_tuple(200_000))
    ),
    "sizes 200k deep": _with_rank2(
        p.spliced(p.hostile_dump(), ("entries", 0, "input_sizes"), p.deep_list(200_000))
    ),
    "pg_config 200k deep": _with_rank2(
        p.spliced(p.hostile_dump(), ("pg_config", "0", "ranks"), p.deep_list(200_000))
    ),
    "dict key 200k deep (segfault)": _with_rank2(p.dict_with_key(p.deep_tuple(200_000))),
    "billion laughs in sizes": _with_rank2(
        p.spliced(p.hostile_dump(), ("entries", 0, "input_sizes"), p.laughs_list(60))
    ),
    "billion laughs as a dict key (hang)": _with_rank2(p.dict_with_key(p.laughs_tuple(60))),
    "entry repeated 200k times": _with_rank2(p.repeated_entries(200_000)),
    "20k JSON entries, one seq (3 ranks)": _one_seq,
    "huge integer (seq 2**100)": _with_rank2(p.with_value(("entries", 0, "collective_seq_id"), 2**100)),
    "sizes [[1.5]] (JSON)": _with_rank2(p.with_value(("entries", 0, "input_sizes"), [[1.5]], "json")),
    "pg_config ranks to 200,000,000": _with_rank2(
        p.with_value(("pg_config", "0", "ranks"), "[0, 1, 200000000]")
    ),
    "surrogates and escapes in names": _surrogates,
    "5000 empty files + 2 good": _empties,
    "links, FIFO, folder, socket, odd names": _odd_entries,
    "manifest world_size 1e9": _manifest(json.dumps({"world_size": 10**9}).encode()),
    "manifest 1 GB (sparse)": _manifest(size=1 << 30),
    "manifest world 262144, gloo dumps": _world_262144,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--defaults", action="store_true", help="run under the default limits, not the suite's")
    ap.add_argument("--only", default="", help="comma-separated substrings of class names")
    ap.add_argument("--json", type=Path, help="also write the figures to FILE")
    args = ap.parse_args(argv)
    wanted = [c for c in CLASSES if not args.only or any(s in c for s in args.only.split(","))]
    rows = []
    print(f"{'class':<42} {'exit':>4} {'wall s':>7} {'peak MB':>8}  reason given for the hostile input")
    for name in wanted:
        with tempfile.TemporaryDirectory(prefix="frwatch-hostile-") as tmp:
            folder = Path(tmp)
            CLASSES[name](folder)
            run = analyze(folder, "--format", "json", limits=[] if args.defaults else None)
        try:
            v = run.verdict
            reasons = [b.reason for b in v.bad_files]
            what = (
                reasons[0]
                if len(reasons) == 1
                else f"{len(reasons)} bad files; {v.status.value}: {v.headline}"
            )
        except Exception:
            what = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "no verdict"
        rows.append(
            {
                "class": name,
                "exit": run.code,
                "seconds": round(run.seconds, 2),
                "peak_mb": round(run.peak_mb),
                "reason": what,
            }
        )
        print(f"{name:<42} {run.code:>4} {run.seconds:>7.2f} {run.peak_mb:>8.0f}  {what[:110]}")
    print(
        f"(limits: {'defaults' if args.defaults else '--worker-memory-mb 256 --file-seconds 2'}; load average {os.getloadavg()[0]:.1f})"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
