"""``python -m frwatch_dev.localcluster.cluster up|down``: a local cluster kept running for kubectl.

Each ``up`` records itself in its own state file (``<temp dir>/frwatch-localcluster/<pid>.json``), so
several clusters can run side by side; ``down`` stops the one ``--workdir`` names, else the one whose
kubeconfig ``$KUBECONFIG`` points at (the shell that ran ``export KUBECONFIG=...``), else the only one up,
and refuses to guess between several.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from frwatch_dev.localcluster.cluster import DEFAULT_NODES, LocalCluster

#: one state file per running `up` (named by its pid): `down` finds the cluster to stop there
STATE_DIR = Path(tempfile.gettempdir()) / "frwatch-localcluster"


def _background(args: argparse.Namespace) -> int:
    """Start ``up`` as a detached process (its output in ``<workdir>/up.log``), print what it printed once the
    cluster is up, and return; ``down`` stops it."""
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="frwatch-localcluster-"))
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "up.log"
    argv = [sys.executable, "-m", "frwatch_dev.localcluster.cluster", "up", "--workdir", str(workdir),
            "--nodes", args.nodes, *(["--no-operator"] if args.no_operator else [])]  # fmt: skip
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if "  stop: " in text:
            summary = text[text.index("frwatch local cluster up"):]
            print(summary.rstrip())
            print(f"  running in the background (pid {proc.pid}, output in {log_path})")
            return 0
        if proc.poll() is not None:
            print(f"the local cluster did not start (exit {proc.returncode}):\n{text[-3000:]}", file=sys.stderr)
            return 1
        time.sleep(0.5)
    print(f"the local cluster was not up within 180 s; see {log_path} (pid {proc.pid})", file=sys.stderr)
    return 1


def _up(args: argparse.Namespace) -> int:
    if args.background:
        return _background(args)
    workdir = Path(args.workdir) if args.workdir else None
    cluster = LocalCluster(
        workdir,
        [n for n in args.nodes.split(",") if n],
        start_operator=not args.no_operator,
        keep_workdir=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster.start()
    state_file = STATE_DIR / f"{os.getpid()}.json"
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps({"pid": os.getpid(), "workdir": str(cluster.workdir), "url": cluster.url,
                                      "kubeconfig": str(cluster.kubeconfig)}))  # fmt: skip
    print(
        f"frwatch local cluster up: API {cluster.url}, S3 {cluster.store.endpoint if cluster.store else '-'}"
    )
    print(f"  nodes: {', '.join(n if isinstance(n, str) else n.name for n in cluster.nodes)}")
    print(f"  operator: {cluster.operator_status}")
    print(f"  operator metrics: {cluster.metrics_url}")
    print(f"  logs: {cluster.logs_dir}")
    if cluster.store is not None:
        print(f"  S3 store: {cluster.store.endpoint}, bucket {cluster.store.bucket}; read a report (the folder of a "
              "job's frwatch.io/report annotation) with:")  # fmt: skip
        print(f"    AWS_ACCESS_KEY_ID={cluster.store.access_key} AWS_SECRET_ACCESS_KEY={cluster.store.secret_key} "
              f"AWS_ENDPOINT_URL_S3={cluster.store.endpoint} AWS_REGION={cluster.store.region} "
              f"frwatch analyze s3://{cluster.store.bucket}/frwatch/NAMESPACE/JOB/UID/ATTEMPT")  # fmt: skip
    print(f"  export KUBECONFIG={cluster.kubeconfig}")
    print(
        "  stop: Ctrl-C, or `python -m frwatch_dev.localcluster.cluster down` "
        f"(--workdir {cluster.workdir} when several are up)",
        flush=True,
    )
    try:
        stop.wait()
    finally:
        cluster.stop()
        state_file.unlink(missing_ok=True)
        print("frwatch local cluster stopped", flush=True)
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # an exited process its parent has not reaped yet is a zombie: gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def running_clusters() -> list[dict[str, Any]]:
    """The state of every `up` still running (state files of dead ones are removed)."""
    found = []
    for path in sorted(STATE_DIR.glob("*.json")):
        try:
            state = json.loads(path.read_text())
            pid = int(state["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid):
            found.append(state)
        else:
            path.unlink(missing_ok=True)
    return found


def choose_cluster(
    states: list[dict[str, Any]], workdir: str | None, kubeconfig: str | None
) -> tuple[dict[str, Any] | None, str]:
    """The cluster `down` stops: the one in ``workdir``, else the one ``kubeconfig`` ($KUBECONFIG) points at,
    else the only one up; (None, why) when there is none or it would be a guess."""
    if workdir:
        wanted = str(Path(workdir).resolve())
        chosen = [s for s in states if str(Path(s["workdir"]).resolve()) == wanted]
        return (chosen[0], "") if chosen else (None, f"no local cluster is up with workdir {workdir}")
    if kubeconfig:
        chosen = [s for s in states if s.get("kubeconfig") == kubeconfig]
        if chosen:
            return chosen[0], ""
    if len(states) == 1:
        return states[0], ""
    if not states:
        return None, f"no local cluster is up (no state file in {STATE_DIR})"
    listed = "; ".join(f"pid {s['pid']} (--workdir {s['workdir']})" for s in states)
    return None, f"{len(states)} local clusters are up, say which with --workdir: {listed}"


def _down(args: argparse.Namespace) -> int:
    state, why = choose_cluster(running_clusters(), args.workdir, os.environ.get("KUBECONFIG"))
    if state is None:
        print(why, file=sys.stderr)
        return 1
    pid = int(state["pid"])
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        (STATE_DIR / f"{pid}.json").unlink(missing_ok=True)
        print(f"the local cluster's process {pid} is gone; state cleared", file=sys.stderr)
        return 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not _alive(pid):
            print(f"local cluster (pid {pid}) stopped; logs kept in {state['workdir']}/logs")
            return 0
        time.sleep(0.2)
    print(f"the local cluster (pid {pid}) did not stop within 60 s", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m frwatch_dev.localcluster.cluster", description="Start or stop a local cluster."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the local cluster in the foreground (Ctrl-C stops it; --background)")
    up.add_argument("--background", action="store_true",
                    help="start it detached and return once it is up (`down` stops it)")  # fmt: skip
    up.add_argument("--workdir", help="folder for state and logs (default: a new temporary folder, kept)")
    up.add_argument("--nodes", default=",".join(DEFAULT_NODES), help="comma-separated node names")
    up.add_argument("--no-operator", action="store_true", help="do not start `frwatch operator`")
    down = sub.add_parser("down", help="stop a cluster `up` started")
    down.add_argument(
        "--workdir", help="the cluster to stop (default: the one $KUBECONFIG names, or the only one)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return _up(args) if args.command == "up" else _down(args)


if __name__ == "__main__":
    sys.exit(main())
