"""The reduce from summaries at scale: N ranks' summaries decoded, aligned and diagnosed, in one process.

Summaries are fabricated from the varied set (``frwatch_dev.dumps.varied``): a few real ranks are
summarised (the culprit, its TP peers and a few others), and every other rank's summary is derived from the
summary of a rank in the same position: its rank, its TP and DP groups (names and members) and its times
(each column's first difference and the tail's times shifted) replaced, the columns compressed again. So
each rank's summary is its own bytes, as agents would write them. Then, timed in this process (CPU, wall,
peak RSS): reading every summary file, decoding it (:class:`Reader`), interning the arrays, and the rest of
the analysis (consistency, merge, alignment, diagnosis)::

    .venv/bin/python benchmarks/bench_reduce.py --ranks 16384,131072 --keep /tmp/frreduce

``--formats json,binary`` times the JSON summaries (version 2, derived as above) and the binary ones
(version 3, made by ``make_summaries.py``) of the same world side by side in one run, each reduce in a fresh
process, alternating ``--repeat`` times; ``--smoke`` is a tiny run for the test suite.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from array import array
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyzers"))

from frwatch_dev.dumps import varied  # noqa: E402
from frwatch_dev.dumps.fabricated import cached_set  # noqa: E402

ENTRIES = 2000
TEMPLATE_WORLD = 64  # the world the template ranks are summarised in (then renamed)


def _column_shift(text: str, shift: int) -> str:
    """A delta-encoded column with its first value moved by ``shift``."""
    if not text or text.startswith("r") or not shift:
        return text
    col = array("q")
    col.frombytes(zlib.decompress(base64.b64decode(text)))
    if col:
        col[0] += shift
    return base64.b64encode(zlib.compress(col.tobytes(), 6)).decode("ascii")


def _templates(world: int) -> dict[str, dict[str, Any]]:
    """Summaries of a waiting rank (rank 0, TP group 0) and of the culprit, in a world of ``world`` ranks."""
    from frwatch_analyzers.summaries.writer import summary_of

    out = {}
    culprit = varied.culprit(world)
    for kind, rank in (("waiting", 0), ("culprit", culprit)):
        import pickle

        data = pickle.dumps(varied.rank_dump(rank, world, ENTRIES), protocol=2)
        out[kind] = json.loads(summary_of(data, rank).data)
        out[kind]["_rank"] = rank
    return out


def _derive(template: dict[str, Any], rank: int, world: int) -> bytes:
    base_rank = template["_rank"]
    shift = 7_919 * (rank - base_rank)
    body = {k: v for k, v in template.items() if k != "_rank"}
    body["rank"] = rank
    body["dumped_ns"] = template["dumped_ns"] + shift
    tp, dp = rank // 8, rank % 8
    names = {
        "tp": (str(1 + tp), {"from": 8 * tp, "to": 8 * tp + 7}),
        # a strided range, as the writer stores one (summary version 2): three numbers, not world/8
        "dp": (str(1 + world // 8 + dp), {"from": dp, "to": world - 8 + dp, "step": 8}),
    }
    pgs = []
    for pg in template["pgs"]:
        pg = dict(pg)
        if pg["desc"] in names:
            pg["name"], ranks = names[pg["desc"]]
            pg["config_ranks"] = ranks
        else:
            pg["config_ranks"] = {"from": 0, "to": world - 1}
        pg["created"] = _column_shift(pg["created"], shift)
        tail = array("q")
        tail.frombytes(zlib.decompress(base64.b64decode(pg["tail"])))
        for i in range(len(tail)):
            if i % 8 >= 5 and tail[i] > 0:
                tail[i] += shift
        pg["tail"] = base64.b64encode(zlib.compress(tail.tobytes(), 6)).decode("ascii")
        pgs.append(pg)
    body["pgs"] = pgs
    return json.dumps(body, separators=(",", ":")).encode()


def fabricate(directory: Path, world: int) -> dict[str, Any]:
    from frwatch_analyzers.summaries.rank_summary import VERSION

    wanted = {"ranks": world, "entries": ENTRIES, "schema": f"summaries-v{VERSION}-{varied.SCHEMA}"}

    def make() -> int:
        # the templates are summarised in the real world size: pg_config and the DP group's members say it
        templates = _templates(world)
        culprit = varied.culprit(world)
        total = 0
        for rank in range(world):
            data = _derive(templates["culprit" if rank == culprit else "waiting"], rank, world)
            (directory / f"{rank}.json").write_bytes(data)
            total += len(data)
        return total

    return cached_set(directory, wanted, make)


def reduce_here(directory: Path, world: int, suffix: str = ".json") -> dict[str, Any]:
    """Read, decode and reduce every summary of ``directory`` (run in a fresh process)."""
    from frwatch_analyzers.align.world import World
    from frwatch_analyzers.analyze import _share
    from frwatch_analyzers.diagnose.diagnosis import diagnose
    from frwatch_analyzers.load.consistency import consistent_world
    from frwatch_analyzers.load.loading import ArrayPool
    from frwatch_analyzers.load.merge import merge
    from frwatch_analyzers.summaries.rank_summary import Reader

    cpu0, wall0 = time.process_time(), time.perf_counter()
    reader, pool, traces = Reader(), ArrayPool(), []
    for rank in range(world):
        trace, _digest = reader.decode((directory / f"{rank}{suffix}").read_bytes())
        reader.accept(trace)  # as from_summaries.take does with each summary it uses
        pool.intern(trace)
        traces.append(trace)
    cpu_decode, wall_decode = time.process_time() - cpu0, time.perf_counter() - wall0
    checked = consistent_world(traces, [], None, world, "manifest")
    merged = merge(checked.traces)
    _share(merged.traces)
    verdict = diagnose(
        World(merged.traces, merged.details, checked.problems + merged.problems, checked.manifest,
              checked.world_size, merged.files, merged.notes)
    )  # fmt: skip
    return {
        "ranks": world,
        "decode_cpu_s": round(cpu_decode, 2),
        "decode_wall_s": round(wall_decode, 2),
        "total_cpu_s": round(time.process_time() - cpu0, 2),
        "total_wall_s": round(time.perf_counter() - wall0, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "verdict": f"{verdict.status}/{verdict.category} culprits={verdict.culprit_ranks[:5]}",
    }


def _reduce(directory: Path, world: int, suffix: str) -> dict[str, Any]:
    load = os.getloadavg()[0]
    out = subprocess.run(
        [sys.executable, __file__, "_reduce", str(directory), str(world), suffix], capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    r: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    r["load"] = f"{load:.1f} -> {os.getloadavg()[0]:.1f}"
    r["cpu_ms_per_rank"] = round(1000 * r["total_cpu_s"] / world, 3)
    r["decode_ms_per_rank"] = round(1000 * r["decode_cpu_s"] / world, 3)
    return r


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_reduce"]:
        print(json.dumps(reduce_here(Path(argv[1]), int(argv[2]), *argv[3:4])))
        return 0
    import make_summaries

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", default="16384", help="comma-separated world sizes (multiples of 8)")
    p.add_argument("--keep", type=Path, help="keep the fabricated summaries in DIR and reuse them")
    p.add_argument("--formats", default="json", help="json, binary or json,binary (side by side)")
    p.add_argument("--repeat", type=int, default=1, help="reduces of each format, alternating")
    p.add_argument("--workers", type=int, default=2, help="processes making the binary summaries")
    p.add_argument("--json", type=Path, help="write every row here")
    p.add_argument("--smoke", action="store_true", help="a tiny run (64 ranks) for the test suite")
    args = p.parse_args(argv)
    if args.smoke:
        args.ranks, args.formats = "64", "json,binary"
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    root = args.keep or Path(tempfile.mkdtemp(prefix="frreduce-"))
    rows: list[dict[str, Any]] = []
    for world in [int(x) for x in args.ranks.split(",") if x.strip()]:
        dirs = {}
        for fmt in formats:
            if fmt == "json":
                directory = root / f"summaries-r{world}"
                info = fabricate(directory, world)
                how = "reused" if info["reused"] else f"fabricated in {info['fabricate_s']} s"
                dirs[fmt] = (directory, ".json")
            else:
                directory = root / f"summaries-v3-r{world}"
                if (directory / f"{world - 1}{make_summaries.SUFFIX}").exists():
                    how = "reused"
                else:
                    made = make_summaries.make(directory, world, args.workers)
                    how = f"made in {made['seconds']} s"
                info = {"bytes": sum(f.stat().st_size for f in directory.iterdir())}
                dirs[fmt] = (directory, make_summaries.SUFFIX)
            print(f"== {world} ranks, {fmt}: {info['bytes'] / 1e6:.1f} MB of summaries ({how})", flush=True)
        for run in range(args.repeat):
            for fmt in formats:
                try:
                    r = _reduce(*dirs[fmt][:1], world, dirs[fmt][1])
                except RuntimeError as exc:
                    print(exc)
                    return 1
                r.update(format=fmt, run=run)
                rows.append(r)
                print(
                    f"{fmt}: decode {r['decode_wall_s']} s wall / {r['decode_cpu_s']} s cpu "
                    f"({r['decode_ms_per_rank']} ms a rank); whole reduce {r['total_wall_s']} s wall / "
                    f"{r['total_cpu_s']} s cpu ({r['cpu_ms_per_rank']} ms a rank); peak RSS {r['peak_rss_mb']} MB; "
                    f"load avg {r['load']}; {r['verdict']}",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
