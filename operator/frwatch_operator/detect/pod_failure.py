"""Pod status -> what the operator knows about a pod, and whether it shows a training failure. Pure.

A failure signal is one of: a training container (any regular container except the frwatch agent)
terminated with a non-zero exit code, or was OOMKilled; a training container restarted after such an
end (``lastState.terminated``); the pod was evicted, or failed as a whole. A container that ended with
exit code 0, a pending pod, or a deleted pod alone is not a failure.

The attempt a pod belongs to is the one it was created in (the webhook wrote it into the agent's
environment, or the JobSet ``restart-attempt`` label): old pods replayed after an operator restart map to
their old attempt, never to a new one. A pod frwatch did not inject has no attempt (``None``), and so
has a pod whose attempt is not a decimal number (it would reach object keys: ``..`` or a slash).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from frwatch_analyzers.store.manifest import ContainerEnd
from frwatch_operator import constants as c
from frwatch_operator.detect.placement import pinned_by_pod
from frwatch_operator.incident.naming import valid_attempt

#: Exit codes above this are "killed by signal (code - 128)" (the shell's and the kubelet's convention).
SIGNAL_EXIT_BASE = 128


class FailureKind(StrEnum):
    """How a pod showed the failure (CamelCase: used in Event reasons and messages)."""

    EXITED = "ContainerFailed"  #: a training container ended with a non-zero exit code
    OOM_KILLED = "OOMKilled"  #: a training container was killed for memory
    RESTARTED = "ContainerRestarted"  #: a training container restarted after a failure
    EVICTED = "Evicted"  #: the kubelet evicted the pod
    POD_FAILED = "PodFailed"  #: the pod's phase is Failed with no container detail


@dataclass(frozen=True)
class FailureSignal:
    """One failure seen on one pod."""

    kind: FailureKind
    pod: str
    container: str = ""
    exit_code: int | None = None
    reason: str = ""
    message: str = ""

    def describe(self) -> str:
        """One phrase a person reads, e.g. "pod llama-worker-1: container pytorch exited 1 (Error)"."""
        what = f"pod {self.pod}"
        if self.kind is FailureKind.EVICTED:
            return f"{what} was evicted" + (f": {self.message}" if self.message else "")
        if self.kind is FailureKind.POD_FAILED:
            return f"{what} failed" + (f" ({self.reason}: {self.message})" if self.reason else "")
        verb = "restarted after it exited" if self.kind is FailureKind.RESTARTED else "exited"
        code = "" if self.exit_code is None else f" {self.exit_code}"
        sig = _signal_note(self.exit_code)
        why = f" ({self.reason}{sig})" if self.reason else (f" ({sig.lstrip(', ')})" if sig else "")
        return f"{what}: container {self.container} {verb}{code}{why}"


def _signal_note(exit_code: int | None) -> str:
    if exit_code is not None and exit_code > SIGNAL_EXIT_BASE:
        return f", signal {exit_code - SIGNAL_EXIT_BASE}"
    return ""


#: Characters kept of a termination message (the kubelet caps it at 4096 bytes).
TERMINATION_MESSAGE_MAX = 4096


@dataclass(frozen=True)
class ContainerRun:
    """A training container's current instance as the pod's status shows it (what its log evidence is)."""

    name: str
    restart_count: int = 0
    state: str = ""  #: ``running``, ``waiting``, ``terminated`` or "" (no status yet)
    message: str = ""  #: the current instance's termination message
    last_message: str = ""  #: the previous instance's termination message (``lastState.terminated``)


@dataclass(frozen=True)
class PodFacts:
    """What the operator knows of one pod of a job attempt (also what the manifest records)."""

    name: str
    namespace: str
    uid: str = ""
    job: str = ""
    attempt: str | None = None
    node: str = ""
    phase: str = ""
    pod_ip: str = ""
    control_port: int | None = None
    ranks: Sequence[int] = ()  #: a range from the job kind's layout, or the ranks an agent recorded
    ended: tuple[ContainerEnd, ...] = ()
    deleted: bool = False
    failure: FailureSignal | None = None
    reason: str = ""  #: pod-level status.reason (e.g. Evicted)
    message: str = ""  #: pod-level status.message
    running_containers: frozenset[str] = field(default_factory=frozenset)
    #: The pod carries frwatch's agent (the webhook injected it); False: admitted without capture.
    injected: bool = False
    #: The agent container terminated (its drain is over: every dump it could upload is in the store).
    agent_ended: bool = False
    #: Every training container's current state is ``terminated`` (none runs, waits or restarts).
    training_ended: bool = False
    #: container -> ``finishedAt`` of its current termination (RFC 3339, as the kubelet wrote it).
    finished_at: tuple[tuple[str, str], ...] = ()
    #: ``metadata.creationTimestamp`` as the API wrote it.
    created: str = ""
    #: Each training container's current instance (for its log: ``frwatch_operator.collect.container_logs``).
    runs: tuple[ContainerRun, ...] = ()
    #: The pod's own spec chose its node (hostname selector or affinity): ``frwatch_operator.detect.placement``.
    pinned: bool = False
    #: The agent id the webhook gave the pod (``frwatch.io/agent-id``): its agent's token is made of it.
    agent_id: str = ""

    @property
    def settled(self) -> bool:
        """Nothing more can come from this pod: it is gone, or its training containers and its agent all
        ended (a native sidecar is stopped after the training containers, and drains before it exits)."""
        return self.deleted or (self.training_ended and self.agent_ended)

    @property
    def agent_live(self) -> bool:
        """The agent sidecar runs and can be reached (its control endpoint may answer)."""
        return (
            not self.deleted
            and bool(self.pod_ip)
            and self.control_port is not None
            and c.AGENT_CONTAINER in self.running_containers
        )


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _agent(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    spec = _map(pod.get("spec"))
    for container in _list(spec.get("initContainers")) + _list(spec.get("containers")):
        if container.get("name") == c.AGENT_CONTAINER:
            return container
    return None


def attempt_of(pod: Mapping[str, Any]) -> str | None:
    """The attempt the pod was created in: the JobSet restart-attempt label, else the attempt the webhook
    gave its agent (``FRWATCH_JOB_ATTEMPT``); None for a pod frwatch did not inject."""
    labels = _map(_map(pod.get("metadata")).get("labels"))
    if labels.get(c.LABEL_JOBSET_RESTART_ATTEMPT) is not None:
        value = labels[c.LABEL_JOBSET_RESTART_ATTEMPT]
        return value if valid_attempt(value) else None
    agent = _agent(pod)
    if agent is None:
        return None
    for env in _list(agent.get("env")):
        if env.get("name") == c.ENV_JOB_ATTEMPT:
            value = env.get("value")
            return value if isinstance(value, str) and valid_attempt(value) else None
    return None


def control_port_of(pod: Mapping[str, Any]) -> int | None:
    """The agent's control port (the container port named ``frwatch-ctl``)."""
    agent = _agent(pod)
    for port in _list(agent.get("ports")) if agent is not None else []:
        if port.get("name") == c.AGENT_CONTROL_PORT_NAME and isinstance(port.get("containerPort"), int):
            return int(port["containerPort"])
    return None


def _end_of(status: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool] | None:
    """The container's terminated record and whether it is the current state (False: lastState)."""
    term = _map(_map(status.get("state")).get("terminated"))
    if term:
        return term, True
    last = _map(_map(status.get("lastState")).get("terminated"))
    if last:
        return last, False
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _all_ended(spec: Mapping[str, Any], mains: list[Mapping[str, Any]]) -> bool:
    """Whether every training container of the spec reports a current ``terminated`` state."""
    names = {str(x.get("name") or "") for x in _list(spec.get("containers"))} - {c.AGENT_CONTAINER}
    done = {str(cs.get("name") or "") for cs in mains if _map(_map(cs.get("state")).get("terminated"))}
    return bool(done) and names <= done


def pod_facts(pod: Mapping[str, Any], *, ranks: Sequence[int] = (), deleted: bool = False) -> PodFacts:
    """Decode a pod body (``ranks``: its global ranks from the job kind's layout, when known)."""
    meta = _map(pod.get("metadata"))
    spec = _map(pod.get("spec"))
    status = _map(pod.get("status"))
    name = str(meta.get("name") or "")
    ended: list[ContainerEnd] = []
    running: set[str] = set()
    failure: FailureSignal | None = None
    agent_ended = False
    finished: list[tuple[str, str]] = []
    runs: list[ContainerRun] = []
    for cs in _list(status.get("initContainerStatuses")):
        if "running" in _map(cs.get("state")):
            running.add(str(cs.get("name") or ""))
        if cs.get("name") == c.AGENT_CONTAINER and _map(_map(cs.get("state")).get("terminated")):
            agent_ended = True
    training = _list(status.get("containerStatuses"))
    mains = [cs for cs in training if cs.get("name") != c.AGENT_CONTAINER]
    for cs in training:
        cname = str(cs.get("name") or "")
        if cname == c.AGENT_CONTAINER:
            if "running" in _map(cs.get("state")):
                running.add(cname)
            elif _map(_map(cs.get("state")).get("terminated")):
                agent_ended = True
            continue
        if "running" in _map(cs.get("state")):
            running.add(cname)
        finished_at = _map(_map(cs.get("state")).get("terminated")).get("finishedAt")
        if finished_at:
            finished.append((cname, str(finished_at)[:40]))
        restarts = _int(cs.get("restartCount")) or 0
        runs.append(_run_of(cname, restarts, cs))
        end = _end_of(cs)
        if end is None:
            continue
        term, current = end
        code = _int(term.get("exitCode"))
        reason = str(term.get("reason") or "")
        sig = _int(term.get("signal"))
        ended.append(
            ContainerEnd(container=cname, exit_code=code, reason=reason, signal=sig, restart_count=restarts)
        )
        if failure is None and (code not in (None, 0) or reason == "OOMKilled"):
            if reason == "OOMKilled":
                kind = FailureKind.OOM_KILLED
            else:
                kind = FailureKind.EXITED if current else FailureKind.RESTARTED
            failure = FailureSignal(kind, name, cname, code, reason, str(term.get("message") or "")[:200])
    pod_reason = str(status.get("reason") or "")
    pod_message = str(status.get("message") or "")
    phase = str(status.get("phase") or "")
    if pod_reason == "Evicted":
        failure = FailureSignal(FailureKind.EVICTED, name, reason=pod_reason, message=pod_message[:200])
    elif failure is None and phase == "Failed":
        failure = FailureSignal(FailureKind.POD_FAILED, name, reason=pod_reason, message=pod_message[:200])
    return PodFacts(
        name=name,
        namespace=str(meta.get("namespace") or ""),
        uid=str(meta.get("uid") or ""),
        job=str(_map(meta.get("labels")).get(c.KF_LABEL_JOB_NAME)
                or _map(meta.get("labels")).get(c.LABEL_JOBSET_NAME) or ""),  # a TrainJob's = its JobSet's name
        attempt=attempt_of(pod),
        node=str(spec.get("nodeName") or ""),
        phase=phase,
        pod_ip=str(status.get("podIP") or ""),
        control_port=control_port_of(pod),
        ranks=ranks,
        ended=tuple(ended),
        deleted=deleted,
        failure=failure,
        reason=pod_reason,
        message=pod_message,
        running_containers=frozenset(running),
        injected=_agent(pod) is not None,
        agent_id=str(_map(meta.get("annotations")).get(c.ANN_AGENT_ID) or "")[:100],
        agent_ended=agent_ended,
        training_ended=_all_ended(spec, mains),
        finished_at=tuple(finished),
        created=str(meta.get("creationTimestamp") or "")[:40],
        runs=tuple(runs),
        pinned=pinned_by_pod(pod),
    )


def _run_of(name: str, restarts: int, cs: Mapping[str, Any]) -> ContainerRun:
    state = _map(cs.get("state"))
    now = next((k for k in ("terminated", "running", "waiting") if k in state), "")
    message = str(_map(state.get("terminated")).get("message") or "")
    last = str(_map(_map(cs.get("lastState")).get("terminated")).get("message") or "")
    return ContainerRun(name, restarts, now, message[:TERMINATION_MESSAGE_MAX], last[:TERMINATION_MESSAGE_MAX])


def detect(pod: Mapping[str, Any]) -> FailureSignal | None:
    """The failure a pod shows, if any."""
    return pod_facts(pod).failure
