"""``frwatch agent``: the per-pod sidecar. Uploads every complete dump to S3; serves the control endpoint.

Configuration comes from the environment the webhook injects (``frwatch_operator.config``): the pod and
job identity (``FRWATCH_POD_*``, ``FRWATCH_JOB_*``), the store (``FRWATCH_S3_*``, ``AWS_*``), the dump
folder (``FRWATCH_FR_*``) and the agent's settings (``FRWATCH_AGENT_*``).

The attempt (S3 layout component) is ``FRWATCH_JOB_ATTEMPT``, fixed when the pod was created (the JobSet
restart-attempt label, or the job's ``frwatch.io/attempt`` annotation kept by the operator). A container
restarted in place keeps its pod, hence its attempt: later dumps of a rank then go to ``ranks-later/``.

NCCL's debug file in the same folder (the webhook sets ``NCCL_DEBUG_FILE`` there) goes to ``nccl/<rank>.txt``,
its tail, each time it grows (``agent.nccl_files``).

On SIGTERM/SIGINT it stops its control endpoint and keeps watching the folder and uploading until every
dump file there is uploaded, for at most ``agent.drain_seconds`` (the grace budget, counted from the
signal; the webhook keeps the pod's ``terminationGracePeriodSeconds`` above it). A dump written just
before the signal is still taken. Exit 0 when nothing is left, 1 when dumps remain unuploaded (they stay
on disk; the log names them), 2 on a configuration error.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import resource
import signal
import sys
import threading
import time
from pathlib import Path

from aiohttp import web

from frwatch_analyzers.live.summary import LivePod
from frwatch_analyzers.store.layout import AttemptKey, segment_problem
from frwatch_analyzers.store.pod_record import StoredPodRecord
from frwatch_operator import constants as c
from frwatch_operator.agent.control import make_app
from frwatch_operator.agent.dumpfiles import DumpWatcher
from frwatch_operator.agent.live_dump import KnownStack, dump_live
from frwatch_operator.agent.live_sampler import LiveSampler, SamplerSettings, parse_rank_span
from frwatch_operator.agent.livebootstrap import install as install_live_bootstrap
from frwatch_operator.agent.nccl_files import NcclFiles
from frwatch_operator.agent.torchcomms_dump import ask_torchcomms_dump
from frwatch_operator.agent.uploader import Uploader
from frwatch_operator.cli import parser_for
from frwatch_operator.config import Config, load_config
from frwatch_operator.errors import FatalError, FrwatchError
from frwatch_operator.logsetup import setup_logging
from frwatch_operator.store.s3 import S3Store

logger = logging.getLogger("frwatch.agent")
#: While draining, a failed upload is retried at least this often (seconds), whatever its backoff.
DRAIN_RETRY_SECONDS = 1.0


def peak_rss_mib(status: str = "/proc/self/status") -> float:
    """This process's peak resident memory (MiB) since it started: ``VmHWM`` of its own address space.
    Not ``ru_maxrss``: Linux carries that across ``fork`` and ``execve``, so a sidecar started by a large
    process (a kubelet, a test runner) would report its parent's size. ``ru_maxrss`` only where there is
    no /proc."""
    try:
        with open(status, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


#: glibc's ``mallopt`` parameter M_ARENA_MAX.
_M_ARENA_MAX = -8


def one_malloc_arena() -> bool:
    """Make glibc's malloc keep one arena for every thread (``MALLOC_ARENA_MAX=1``, unless the environment
    sets it). By default each thread that allocates gets an arena of its own (up to 8 a core): the upload
    thread and the transfer's part threads each kept one, 6 MiB of the agent's peak on 8 x 40 MB dumps
    (benchmarks/README.md). The agent waits on the network, not on malloc's lock. False where there is no
    glibc (musl, macOS): nothing changes."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1))
    except (OSError, AttributeError):
        return False


def attempt_key(config: Config) -> AttemptKey:
    return AttemptKey(
        prefix=config.s3.prefix,
        namespace=config.pod.namespace,
        job=config.job.name,
        job_uid=config.job.uid,
        attempt=config.job.attempt,
    )


def check_identity(config: Config) -> list[str]:
    """What is missing or unusable for the agent to know where to upload (each names its variable). The
    values become object-key segments: a ``..`` or ``/`` would put dumps outside the attempt's prefix (or
    make every upload fail, retried forever), so the agent refuses to start instead."""
    problems = []
    for var, value in (
        (c.ENV_POD_NAME, config.pod.name),
        (c.ENV_POD_NAMESPACE, config.pod.namespace),
        (c.ENV_JOB_NAME, config.job.name),
        (c.ENV_JOB_UID, config.job.uid),
        (c.ENV_JOB_ATTEMPT, config.job.attempt),
    ):
        if not value:
            problems.append(f"{var} is not set")
        elif (why := segment_problem(value)) is not None:
            problems.append(f"{var}: {why}")
    return problems


class Agent:
    """The upload loop (a thread) and the control endpoint (asyncio), stopped together."""

    def __init__(self, config: Config) -> None:
        self.config = config
        a = config.agent
        self.dump_dir = Path(config.fr.dump_dir)
        self.watcher = DumpWatcher(
            self.dump_dir, config.fr.file_prefix, a.stable_seconds, a.corrupt_after_seconds
        )
        record = StoredPodRecord(
            pod=config.pod.name, namespace=config.pod.namespace, node=config.pod.node, uid=config.pod.uid,
            job=config.job.name, job_uid=config.job.uid, attempt=config.job.attempt, agent_started_at=time.time(),
        )  # fmt: skip
        self.uploader = Uploader(
            S3Store(config.s3), attempt_key(config), record, bucket=config.s3.bucket,
            backoff_initial=a.upload_backoff_initial_seconds, backoff_max=a.upload_backoff_max_seconds,
        )  # fmt: skip
        self.nccl = NcclFiles(self.dump_dir, config.evidence.nccl_max_bytes, a.stable_seconds)
        self.stopping = threading.Event()
        self.live: LiveSampler | None = None
        if a.live:
            self.live = self._start_live(config)
        self.stop_requested_at: float | None = None  #: when SIGTERM/SIGINT arrived (monotonic)

    def _start_live(self, config: Config) -> LiveSampler | None:
        """Place the bootstrap in the dump volume and sample the ranks' sockets (a thread); a failure turns
        live watch off for this pod, with one log line, and the agent goes on as before."""
        try:
            _, live_dir = install_live_bootstrap(self.dump_dir)
        except OSError as exc:
            logger.warning("live watch off: cannot place the bootstrap in %s: %s", self.dump_dir, exc)
            return None
        sampler = LiveSampler(
            live_dir,
            config.pod.name,
            SamplerSettings(period_s=config.agent.live_period_seconds),
            expected=parse_rank_span(config.agent.live_ranks),
        )
        threading.Thread(target=sampler.run, args=(self.stopping,), name="live", daemon=True).start()
        logger.info("live watch on: sampling %s every %gs", live_dir, config.agent.live_period_seconds)
        return sampler

    def live_json(self) -> str:
        pod = self.live.latest() if self.live is not None else LivePod(pod=self.config.pod.name, ranks=[])
        return pod.model_dump_json(by_alias=True)

    def live_dump(self, wanted: set[int] | None) -> tuple[list[int], dict[str, str]]:
        """``POST /live-dump``: dump the running ranks from their live buffers (``agent.live_dump``)."""
        assert self.live is not None
        latest = {r.rank: r for r in self.live.latest().ranks}

        def known(rank: int) -> KnownStack:
            found = latest.get(rank)
            if found is None:
                return KnownStack()
            return KnownStack(stack=found.stack, pending=found.stack_error is not None)

        dumped, failed = dump_live(self.live.sockets(), wanted, self.dump_dir, self.config.fr.file_prefix, known)
        tc_asked, tc_failed = ask_torchcomms_dump(self.live.sockets(), wanted)  # its file: the watcher's
        if tc_asked or tc_failed:
            logger.info("torchcomms dump asked: rank(s) %s%s", tc_asked,
                        "".join(f"; rank {r}: {why}" for r, why in sorted(tc_failed.items())))  # fmt: skip
        logger.info("live dump asked: rank(s) %s written from their live buffers%s", dumped,
                    "".join(f"; rank {r}: {why}" for r, why in sorted(failed.items())))  # fmt: skip
        return dumped, failed

    def tick(self) -> None:
        now = time.monotonic()
        for dump in self.watcher.poll(now):
            logger.info("dump of rank %d complete (%d bytes, %s)", dump.rank, dump.size, dump.fmt)
            self.uploader.submit(dump)
        self.upload_nccl(now)
        self.uploader.note_skipped(self.watcher.skipped.report() + self.nccl.skipped())
        self.uploader.step(now)

    def upload_nccl(self, now: float) -> None:
        """The NCCL debug files that changed, their tails to ``nccl/<rank>.txt`` (a failure: the next tick)."""
        for due in self.nccl.poll(now, self.uploader.ranks()):
            key = self.uploader.key.nccl(due.rank)
            try:
                self.uploader.store.put(key, due.data, bucket=self.uploader.bucket, content_type="text/plain")
            except FrwatchError as exc:
                logger.warning("NCCL debug file %s not uploaded yet: %s", due.path.name, exc)
                continue
            self.nccl.sent(due)
            logger.info("uploaded NCCL debug file %s (%d bytes, its tail) to %s", due.path.name, len(due.data), key)

    def run_uploads(self) -> None:
        while not self.stopping.is_set():
            try:
                self.tick()
            except Exception:  # the loop must survive anything: dumps are on disk, try again
                logger.exception("upload loop error")
            self.stopping.wait(self.config.agent.scan_interval_seconds)

    def drain(self, deadline: float) -> list[str]:
        """Last uploads before exit (SIGTERM): keep watching and uploading until every dump file in the folder
        was uploaded, or ``deadline`` (monotonic) passes. A dump written just before the signal is still
        waited for (``stable_seconds``), and one that stays unparseable is uploaded as is after half the
        budget (its writer is going away too). Returns what is left (empty: nothing), files stay on disk."""
        budget = max(0.0, deadline - time.monotonic())
        self.watcher.corrupt_after_seconds = min(self.watcher.corrupt_after_seconds, budget / 2)
        self.uploader.hurry(DRAIN_RETRY_SECONDS)
        while True:
            try:
                self.tick()
            except Exception:  # as in run_uploads: try again until the deadline
                logger.exception("upload loop error while draining")
            left = [f"{p} (not complete yet)" for p in self.watcher.unsettled(time.monotonic())]
            left += [f"{n} (NCCL debug file)" for n in self.nccl.pending()]
            left += [
                f"rank {p['rank']} -> {p['key']} ({p['error'] or 'queued'})"
                for p in self.uploader.status()["pending"]
            ]
            if not left and self.uploader.idle:
                return []
            now = time.monotonic()
            if now >= deadline:
                return left or [f"the pod record {self.uploader.key.pod(self.uploader.record.pod)}"]
            time.sleep(min(self.config.agent.scan_interval_seconds, deadline - now))

    async def serve(self, signalled: threading.Event) -> None:
        """Serve the control endpoint until SIGTERM/SIGINT (``signalled``: one arrived before the loop ran)."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if signalled.is_set():
            stop.set()
        a = self.config.agent
        app = make_app(
            dump_dir=self.dump_dir, file_prefix=self.config.fr.file_prefix,
            token=a.token.get_secret_value() if a.token is not None else None, status=self.uploader.status,
            live=self.live_json if self.live is not None else None,
            live_dump=self.live_dump if self.live is not None else None,
        )  # fmt: skip
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, a.control_addr, a.control_port)
        await site.start()
        port = a.control_port
        for sock in getattr(site._server, "sockets", None) or ():
            port = int(sock.getsockname()[1])
        print(json.dumps({"event": "listening", "port": port, "root": self.uploader.key.root}), flush=True)
        try:
            await stop.wait()
            self.stop_requested_at = time.monotonic()
        finally:
            await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("frwatch agent", __doc__)
    parser.parse_args(argv)
    try:
        config = load_config(os.environ)
    except FatalError as exc:
        print(f"frwatch agent: {exc}", file=sys.stderr)
        return 2
    setup_logging(config.log_level)
    problems = check_identity(config)
    if problems:
        print(f"frwatch agent: {'; '.join(problems)} (the webhook injects them)", file=sys.stderr)
        return 2
    signalled = threading.Event()  # a SIGTERM from the start on stops the agent the same way (drain, exit)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: signalled.set())
    one_malloc_arena()  # before any thread starts
    agent = Agent(config)
    uploads = threading.Thread(target=agent.run_uploads, name="uploads", daemon=True)
    uploads.start()
    logger.info("agent started: %s -> %s", agent.dump_dir, agent.uploader.key.at(config.s3.bucket))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(agent.serve(signalled))
    deadline = (agent.stop_requested_at or time.monotonic()) + config.agent.drain_seconds
    for sig in (signal.SIGTERM, signal.SIGINT):  # a repeated signal must not cut the drain short
        signal.signal(sig, signal.SIG_IGN)
    agent.stopping.set()
    uploads.join(timeout=max(0.0, deadline - time.monotonic()))
    left = agent.drain(deadline) if not uploads.is_alive() else ["the upload thread did not stop"]
    status = agent.uploader.status()
    if left:
        logger.error(
            "agent stopping after %.0fs with dumps not uploaded (kept on disk): %s",
            config.agent.drain_seconds, "; ".join(left),
        )  # fmt: skip
    logger.info(
        "agent stopping: %d ranks uploaded, %d pending, %d names skipped; peak RSS %.1f MiB",
        len(status["uploaded"]), len(status["pending"]), len(status["skipped"]), peak_rss_mib(),
    )  # fmt: skip
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
