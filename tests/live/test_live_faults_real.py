"""Live watch's faults with real parts: real torch gloo ranks, the real bootstrap, the real agent process.

- A rank whose torch has no ``_WorkerServer`` and a rank that never opens its socket: each is one log line
  (the rank's own ``frwatch-live:`` line, the sampler's one warning), not one a round; the other ranks are
  still read and judged (a desync among them is found while every rank runs).
- An agent restart (the agent killed and started again on the same volume): the ranks keep their sockets
  and train on untouched; the new agent reads the same ranks again.
- The bootstrap adds no network listener: the listening sockets of a real rank before and after the
  bootstrap starts its server differ by one Unix socket, the rank's own, owned by the rank's user.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import time
from pathlib import Path

import pytest
from live_ranks import LiveJob, live_job, with_pythonpath_appended

from frwatch_analyzers.live.watch import LiveKind, LiveWatch
from frwatch_dev.testing.agent_process import TOKEN, start_agent
from frwatch_operator import constants as c
from frwatch_operator.agent.live_sampler import LiveSampler, SamplerSettings
from frwatch_operator.agent.livebootstrap import install
from frwatch_operator.agent.worker_client import WorkerCallError, call
from frwatch_operator.constants import ENV_LIVE_DIR

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # torch ranks' start (up to START_S) and the rounds
START_S = 180.0  # torch ranks start slowly on a loaded 2-core machine


def wait_for(predicate, what: str, job: LiveJob | None = None, timeout_s: float = START_S):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        got = predicate()
        if got:
            return got
        if job is not None:
            assert all(job.running()), f"a rank ended early while waiting for {what}:\n" + job.log(0)
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def answers(path: Path) -> bool:
    try:
        return call(str(path), "ping", timeout_s=5.0, max_bytes=1024).status == 200
    except WorkerCallError:
        return False


def test_ranks_without_a_server_degrade_alone_and_the_others_are_still_judged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """5 ranks: rank 3's torch has no _WorkerServer, rank 4 never loads the bootstrap (as with python -S or an
    earlier sitecustomize of the user's), rank 1 calls broadcast where the others all_reduce (step 5)."""
    code_dir, live_dir = install(tmp_path)
    env = with_pythonpath_appended(os.environ, code_dir)
    env[ENV_LIVE_DIR] = str(live_dir)
    args = ["--mode", "skip", "--fault-step", "5", "--steps", "50", "--no-worker-server-ranks", "3"]
    with live_job(5, tmp_path, args, env, rank_env={4: {ENV_LIVE_DIR: None}}) as job:
        sampler = LiveSampler(
            live_dir, "pod", SamplerSettings(period_s=1.0, startup_grace_s=0.0), expected=frozenset(range(5))
        )
        # rank 3's bootstrap gave up (its one line): from then on no socket of rank 3 can appear
        wait_for(lambda: "frwatch-live:" in job.log(3), "rank 3's bootstrap line", job)
        wait_for(lambda: len(sampler.sockets()) == 3, "the sockets of ranks 0, 1, 2", job)
        watch = LiveWatch(range(5))
        found = None
        rounds_after = 0
        with caplog.at_level(logging.INFO, logger="frwatch.agent.live"):
            deadline = time.monotonic() + 120
            while rounds_after < 3:  # three more rounds once found: a degraded rank is not said again
                assert time.monotonic() < deadline, "no desync among the readable ranks within 120 s"
                assert all(job.running()), "a rank ended early"
                report = watch.observe(sampler.sample_once().ranks, now=time.monotonic())
                if found is not None:
                    rounds_after += 1
                elif report.findings:
                    found = report
                time.sleep(1.0)
        assert all(job.running())  # the finding came while every rank runs (they wait for 300 s)
        logs = [job.log(rank) for rank in range(5)]
    (f,) = found.findings
    assert (f.kind, f.seq, f.ranks, f.peers) == (LiveKind.desync, 5, [1], [0, 2])
    assert sorted(found.unreadable) == [3, 4], found.unreadable
    assert "no socket" in found.unreadable[3] and "no socket" in found.unreadable[4]
    lines = [r.getMessage() for r in caplog.records]
    for rank in (3, 4):
        assert sum(f"rank {rank}:" in line for line in lines) == 1, (rank, lines)
    assert not any(f"rank {rank}:" in line for rank in (0, 1, 2) for line in lines), lines
    # the ranks' own words: rank 3 says once why it serves nothing; rank 4's bootstrap never ran
    assert logs[3].count("frwatch-live:") == 1, logs[3]
    assert "live watch is off for this process" in logs[3] and "_WorkerServer" in logs[3], logs[3]
    assert "frwatch-live:" not in logs[4], logs[4]
    for rank in (0, 1, 2):
        assert logs[rank].count("frwatch-live:") == 1 and "worker server answers on" in logs[rank], logs[rank]


def test_an_agent_restart_reads_the_same_ranks_again_and_training_goes_on(s3, tmp_path: Path) -> None:
    """The real agent (live on) samples 2 real ranks; it is killed (SIGKILL: no goodbye) and a new one starts
    on the same volume, as a restarted sidecar does: it places the bootstrap again over the running ranks'
    copy, reads the same sockets, and the ranks never notice (one bootstrap line each, exit 0)."""
    live_env = {"FRWATCH_AGENT_LIVE": "true", "FRWATCH_AGENT_LIVE_PERIOD_SECONDS": "0.5",
                "FRWATCH_AGENT_LIVE_RANKS": "0-1"}  # fmt: skip
    first = start_agent(tmp_path, s3.env(), **live_env)
    dump_dir = first.dump_dir
    env = with_pythonpath_appended(os.environ, dump_dir / c.LIVE_BOOTSTRAP_SUBDIR)
    env[ENV_LIVE_DIR] = str(dump_dir / c.LIVE_SOCKET_SUBDIR)
    stop = tmp_path / "stop"
    second = None

    def progress(agent) -> dict[int, int] | None:  # type: ignore[no-untyped-def]
        status, body = agent.request("GET", "/live", TOKEN)
        assert status == 200, body
        got = {r["rank"]: r["groups"][0]["last_enqueued"] for r in body["ranks"] if r["groups"] and not r["error"]}
        return got if sorted(got) == [0, 1] else None

    try:
        args = ["--mode", "healthy", "--steps", "1000000", "--step-s", "0.05", "--until-file", str(stop)]
        with live_job(2, tmp_path, args, env) as job:
            before = wait_for(lambda: progress(first), "the first agent to read both ranks", job)
            os.kill(first.proc.pid, signal.SIGKILL)
            assert first.proc.wait(timeout=60) == -signal.SIGKILL
            second = start_agent(tmp_path, s3.env(), n=1, dump_dir=dump_dir, **live_env)
            after = wait_for(
                lambda: (p := progress(second)) and all(p[r] > before[r] for r in (0, 1)) and p,
                "the new agent to read both ranks, further on",
                job,
            )
            assert all(job.running())
            stop.touch()
            assert job.wait(timeout_s=START_S) == [0, 0]
            for rank in range(2):
                assert job.log(rank).count("frwatch-live:") == 1, job.log(rank)  # served once, never again
        log = second.log.read_text()
        assert log.count("live watch on: sampling") == 1, log
        assert "live watch: rank" not in log, log  # no rank fault said after the restart
        print(f"before the restart: {before}, after: {after}")
    finally:
        for agent in (first, second):
            if agent is not None and agent.proc.poll() is None:
                agent.proc.kill()


# --- no network listener -----------------------------------------------------------------------------------------

#: A rank that initialises gloo, runs a few collectives, says so, and starts the real bootstrap only once told
#: (so the test lists its sockets before and after): the bootstrap as sitecustomize starts it, but later.
RANK_PROGRAM = """
import os, sys, time
from datetime import timedelta
import torch, torch.distributed as dist
code_dir, live_dir, ready, go, stop = sys.argv[1:6]
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]), timeout=timedelta(seconds=300))
for _ in range(3):
    dist.all_reduce(torch.ones(8))
open(f"{ready}{rank}", "w").close()
while not os.path.exists(go):
    dist.all_reduce(torch.ones(8)); time.sleep(0.05)
sys.path.append(code_dir)
import frwatch_live_boot
frwatch_live_boot.start({"FRWATCH_LIVE_DIR": live_dir})
while not os.path.exists(stop):
    dist.all_reduce(torch.ones(8)); time.sleep(0.05)
dist.barrier()
os._exit(0)
"""


def socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def listeners(pid: int) -> dict[str, set[str]]:
    """The process's listening sockets: TCP in LISTEN, every bound UDP socket, Unix sockets accepting."""
    mine = socket_inodes(pid)
    found: dict[str, set[str]] = {"inet": set(), "unix": set()}
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if inode in mine and (state == "0A" if table.startswith("tcp") else True):
                found["inet"].add(f"{table} {local} port {int(local.rsplit(':', 1)[1], 16)}")
    for line in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]:
        cols = line.split()
        flags, inode = int(cols[3], 16), cols[6]
        if inode in mine and flags & 0x10000:  # __SO_ACCEPTCON: listening
            found["unix"].add(cols[7] if len(cols) > 7 else f"(unnamed {inode})")
    return found


def test_the_bootstrap_adds_no_network_listener(tmp_path: Path) -> None:
    code_dir, live_dir = install(tmp_path)
    program = tmp_path / "rank.py"
    program.write_text(RANK_PROGRAM)
    ready, go, stop = str(tmp_path / "ready-"), tmp_path / "go", tmp_path / "stop"
    env = {k: v for k, v in os.environ.items() if k != ENV_LIVE_DIR}
    with live_job(2, tmp_path, [str(code_dir), str(live_dir), ready, str(go), str(stop)], env, program=program) as job:
        wait_for(lambda: all(os.path.exists(f"{ready}{r}") for r in range(2)), "both ranks initialised", job)
        pids = [p.pid for p in job.procs]
        master_port = job_port(job)
        before = [listeners(pid) for pid in pids]
        go.touch()
        socks = [live_dir / f"rank-{r}.sock" for r in range(2)]
        wait_for(lambda: all(answers(s) for s in socks), "both ranks' sockets to answer ping", job)
        after = [listeners(pid) for pid in pids]
        stats = [os.stat(s) for s in socks]
        uids = [int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0]) for pid in pids]
        stop.touch()
        assert job.wait(timeout_s=START_S) == [0, 0]
    # the scan sees the rank's own network listeners: rank 0 serves gloo's TCPStore (MASTER_PORT)
    assert any(line.endswith(f"port {master_port}") for line in before[0]["inet"]), before[0]
    for rank in range(2):
        assert after[rank]["inet"] == before[rank]["inet"], (rank, before[rank], after[rank])
        assert after[rank]["unix"] - before[rank]["unix"] == {str(socks[rank])}, (rank, before[rank], after[rank])
        st = stats[rank]
        assert stat.S_ISSOCK(st.st_mode) and st.st_uid == uids[rank], st
        # torch binds it 0777 minus the umask (0755 with 022: only its owner could connect, since connecting
        # needs write permission); the bootstrap gives it the folder's group, the agent's, and mode 0770
        assert stat.S_IMODE(st.st_mode) == 0o770 and st.st_gid == os.stat(live_dir).st_gid, oct(st.st_mode)
        print(f"rank {rank}: network listeners {sorted(before[rank]['inet'])} before and after; socket "
              f"{socks[rank].name} mode {oct(stat.S_IMODE(st.st_mode))} uid {st.st_uid}")  # fmt: skip
    assert stat.S_IMODE(os.stat(live_dir).st_mode) == 0o1777


def job_port(job: LiveJob) -> int:
    """MASTER_PORT of the job (rank 0's TCPStore), from rank 0's environment."""
    environ = Path(f"/proc/{job.procs[0].pid}/environ").read_bytes().split(b"\0")
    return int(next(e for e in environ if e.startswith(b"MASTER_PORT=")).split(b"=", 1)[1])


# --- the agent is another user ----------------------------------------------------------------------------------

#: The agent sidecar's user and group (frwatch_operator.capture.sidecar.IMAGE_UID): non-root, no capabilities.
AGENT_UID = 65532
#: Standard library only, run as another user: POST /handler/ping on the socket, print the answer or the error.
PING = """
import socket, sys
c = socket.socket(socket.AF_UNIX)
c.settimeout(10)
try:
    c.connect(sys.argv[1])
    c.sendall(b"POST /handler/ping HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n")
    print(c.recv(4096).decode(errors="replace").split("\\r\\n")[0])
except OSError as exc:
    print("error", exc)
"""
SYSTEM_PYTHON = "/usr/bin/python3"  # the test's own interpreter may sit where another user cannot read


def as_user(uid: int, *argv: str) -> str:
    import subprocess

    out = subprocess.run([SYSTEM_PYTHON, "-S", *argv], user=uid, group=uid, extra_groups=[], capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    return out.stdout + out.stderr


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON), reason="switches users: needs root and a system python"
)


@needs_root
def test_the_agent_as_another_user_reaches_a_root_rank() -> None:
    """The ranks run as root with umask 022 (most training images), the agent as 65532 without capabilities:
    the agent made the socket folder (so its group is the agent's) and must be able to connect."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="frwatch-live-uid-"))  # not pytest's tmp_path: 0700, closed to 65532
    try:
        os.chmod(base, 0o755)
        code_dir, live_dir = install(base)
        os.chown(live_dir, AGENT_UID, AGENT_UID)  # as the agent would have made it
        env = with_pythonpath_appended(os.environ, code_dir)
        env[ENV_LIVE_DIR] = str(live_dir)
        stop = base / "stop"
        old = os.umask(0o022)
        try:
            cm = live_job(2, base, ["--mode", "healthy", "--steps", "1000000", "--until-file", str(stop)], env)
            job = cm.__enter__()
        finally:
            os.umask(old)
        try:
            socks = [live_dir / f"rank-{r}.sock" for r in range(2)]
            wait_for(lambda: all(answers(s) for s in socks), "both ranks' sockets to answer ping", job)
            wait_for(lambda: all("frwatch-live:" in job.log(r) for r in range(2)), "the bootstrap's lines", job)
            said = [as_user(AGENT_UID, "-c", PING, str(s)) for s in socks]
            stop.touch()
            assert job.wait(timeout_s=START_S) == [0, 0]
            logs = [job.log(r) for r in range(2)]
        finally:
            cm.__exit__(None, None, None)
        for rank in range(2):
            assert said[rank].startswith("HTTP/1.1 200"), said[rank]
            assert f"(mode 0770, group {AGENT_UID})" in logs[rank], logs[rank]
    finally:
        shutil.rmtree(base, ignore_errors=True)


SHARE = """
import os, socket, sys
sys.path.insert(0, sys.argv[1])
import frwatch_live_boot
path = os.path.join(sys.argv[2], "rank-0.sock")
s = socket.socket(socket.AF_UNIX)
os.umask(0o022)
s.bind(path)
print(frwatch_live_boot._share_with_agent(path, sys.argv[2]), oct(os.stat(path).st_mode & 0o777))
"""


@needs_root
def test_a_rank_that_cannot_give_the_agents_group_opens_its_socket_to_the_pod() -> None:
    """A non-root rank (uid 65534) that is not in the folder's group (root's here): the socket is 0777."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="frwatch-live-uid-"))
    try:
        os.chmod(base, 0o755)
        code_dir, live_dir = install(base)  # root's folder, mode 1777
        said = as_user(65534, "-c", SHARE, str(code_dir), str(live_dir))
        assert said.split() == ["mode", "0777:", "the", "folder's", "group", "could", "not", "be", "given", "0o777"], said
    finally:
        shutil.rmtree(base, ignore_errors=True)
