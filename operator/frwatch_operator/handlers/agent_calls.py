"""Calls to a job's agents, kept to that job: its own threads, its own pods' tokens, refusals on the job.

* :class:`PerJob` runs each job's agent work (a live round, collection's ask, a live dump) on a thread of
  its own, one at a time per job: a job whose agents are slow or hostile holds only its own thread, for
  at most the calls' total deadlines (``agentclient.call_agent``), never kopf's worker pool, another
  job's round, nor the webhook; while its work runs the job's next turn is skipped, not queued.
* :func:`targets` gives, for the pods of one job attempt, where each agent listens and the token of that
  pod (made from its ``frwatch.io/agent-id``: ``agentkeys``), leaving out the pods whose agent was refused.
* :func:`refused` records a pod whose control port answered without proof of its token (a container the
  webhook did not inject, or a process that took the port) and says so once on the job, Event
  ``AgentNotAuthenticated``: that pod's agent is never called again by this process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, wait

from frwatch_operator import notices
from frwatch_operator.detect.pod_failure import PodFacts
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.kube.adapter import ObjectRef

logger = logging.getLogger(__name__)


class PerJob:
    """One thread per job key while its work runs; at most one work in flight per key."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.running: dict[object, Future[None]] = {}

    def start(self, key: object, work: Callable[[], None]) -> bool:
        """Run ``work`` on its own thread unless work of ``key`` is in flight (then False, nothing started)."""
        with self._lock:
            if key in self.running:
                return False
            done: Future[None] = Future()
            self.running[key] = done

        def run() -> None:
            try:
                work()
            except Exception:  # a job's failure is its own: logged, never another job's
                logger.exception("%s of %s failed", self.name, key)
            finally:
                with self._lock:
                    self.running.pop(key, None)
                done.set_result(None)

        threading.Thread(target=run, name=f"frwatch-{self.name}", daemon=True).start()
        return True

    def busy(self, key: object) -> bool:
        with self._lock:
            return key in self.running

    def settle(self, timeout_s: float) -> bool:
        """Wait until the work in flight now has ended; False if some still runs after ``timeout_s``."""
        with self._lock:
            running = list(self.running.values())
        return not wait(running, timeout=timeout_s).not_done


def token_of(deps: Deps, namespace: str, job: str, pod: PodFacts) -> str | None:
    """The token of ``pod``'s agent (None: no key, or the pod has no agent id frwatch gave)."""
    return deps.agent_keys.token_of(namespace, job, pod.agent_id) if deps.agent_keys is not None else None


def targets(
    deps: Deps, namespace: str, job: str, pods: Iterable[PodFacts]
) -> dict[str, tuple[str, int, str | None]]:
    """pod -> (IP, control port, token) for the pods whose agent can be called (not refused before)."""
    return {
        p.name: (p.pod_ip, p.control_port, token_of(deps, namespace, job, p))
        for p in pods
        if p.pod_ip and p.control_port is not None and deps.refusals.refused(p.uid or p.name) is None
    }


def refused(deps: Deps, job: ObjectRef, pods: Mapping[str, PodFacts], pod: str, why: str) -> None:
    """Record that ``pod``'s agent was refused; the first time, a Warning Event on the job."""
    facts = pods.get(pod)
    key = (facts.uid if facts is not None else "") or pod
    if not deps.refusals.add(key, why):
        return
    logger.warning("job %s/%s: pod %s: %s", job.namespace, job.name, pod, why)
    try:
        deps.kube.post_event(job, notices.agent_not_authenticated(pod, why))
    except Exception as exc:  # the refusal holds; only the Event is lost
        logger.warning(
            "job %s/%s: the AgentNotAuthenticated Event was not posted: %s", job.namespace, job.name, exc
        )
