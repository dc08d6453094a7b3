"""Which container logs of an attempt to read, how to keep a log's tail within a byte cap, and what became
of each (for the manifest and the Incident's ``LogsCollected`` condition). Pure: the reads themselves are
``frwatch_operator.collect.evidence``'s, through ``kube.Kube.read_pod_log``.

Per training container of a pod (every regular container but the frwatch agent):

- ``tail``: the current instance's log, ``logs/<pod>/<container>.txt``. Final once the instance
  terminated (read once then); a running or waiting one is read when collection ends (a hung rank's log up
  to then).
- ``previous``: the previous instance of a restarted container (``previous=true``),
  ``logs/<pod>/<container>.previous.txt``: final as soon as the restart is seen.
- ``termination``: the termination message from the pod's status (current instance, else the previous
  one), ``logs/<pod>/<container>.termination.txt``: no API call.

A log is bytes as the API gave them (binary, ANSI colour codes: kept as they are); only its size is
bounded (:func:`narrow`: the last lines that fit, cut to ``evidence.log_max_bytes``; the API can only give
the head of a window, so a line longer than the window is dropped when later lines follow it, and its
head is kept when it is the last line). The analyzer decodes, sanitises and masks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from frwatch_analyzers.store.layout import AttemptKey, segment_problem
from frwatch_analyzers.store.manifest import ContainerLog
from frwatch_operator.detect.pod_failure import ContainerRun, PodFacts
from frwatch_operator.resources import ConditionReason

Variant = Literal["tail", "previous", "termination"]
#: The API is asked for at most this many times the cap of a log per request (limitBytes).
READ_FACTOR = 4
#: Requests at most to narrow one log to the lines that fit (a log with lines of a megabyte).
MAX_READS = 12
#: Why a log is missing, as the manifest and the condition say it.
POD_DELETED = "unavailable: the pod was deleted before its log was read"
FORBIDDEN = "unavailable: the operator may not read pods/log (RBAC)"


@dataclass(frozen=True)
class LogTarget:
    """One log to read: a container instance of a pod, or its termination message."""

    pod: str
    pod_uid: str
    container: str
    variant: Variant
    instance: int  #: the instance's restart count (the previous instance: restartCount - 1)
    final: bool  #: the instance ended: its log cannot change any more
    message: str = ""  #: the termination message (``variant == "termination"``)

    @property
    def memo(self) -> tuple[str, str, str, int]:
        """What identifies this read across passes (a new instance is a new read)."""
        return (self.pod_uid or self.pod, self.container, self.variant, self.instance)


def targets(pod: PodFacts, *, ending: bool) -> list[LogTarget]:
    """The logs of ``pod`` to read now: every final one; with ``ending`` (collection ends) also the current
    instance of a container still running or waiting. Of a deleted pod only the termination messages its
    last status showed (nothing more can be read through the API)."""
    if segment_problem(pod.name):
        return []
    out: list[LogTarget] = []
    for run in pod.runs:
        if segment_problem(run.name) or "." in run.name:
            continue
        out += [t for t in _of_run(pod, run, ending=ending) if not pod.deleted or t.variant == "termination"]
    return out


def _of_run(pod: PodFacts, run: ContainerRun, *, ending: bool) -> list[LogTarget]:
    out: list[LogTarget] = []
    ended = run.state == "terminated"
    if run.restart_count > 0:
        out.append(LogTarget(pod.name, pod.uid, run.name, "previous", run.restart_count - 1, final=True))
    if ended or (ending and run.state in ("running", "waiting")):
        out.append(LogTarget(pod.name, pod.uid, run.name, "tail", run.restart_count, final=ended))
    message = run.message if ended else run.last_message
    if message.strip():
        instance = run.restart_count if ended else run.restart_count - 1
        out.append(
            LogTarget(pod.name, pod.uid, run.name, "termination", instance, final=True, message=message)
        )
    return out


@dataclass(frozen=True)
class Tail:
    """What was kept of a log: its last bytes, and whether anything before them was cut."""

    data: bytes
    cut: bool
    reads: int  #: requests it took


def narrow(fetch: Callable[[int, int], bytes], tail_lines: int, max_bytes: int) -> Tail:
    """The tail of a log within ``max_bytes``. ``fetch(lines, limit)`` returns the first ``limit`` bytes of
    the log's last ``lines`` lines (what pods/log with ``tailLines`` and ``limitBytes`` answers). When the
    answer fills ``limit`` it is the head of that window, not its end: ask for fewer lines (at most the
    whole lines that fitted, halved), then for as many as still fit (bisection, at most :data:`MAX_READS`
    requests in all). A line longer than the window on its own: its head is what the API gives. Then the
    last ``max_bytes`` bytes are kept."""
    window = READ_FACTOR * max_bytes
    lines, reads = tail_lines, 0
    best: tuple[int, bytes] | None = None  #: the most lines seen to fit, and their bytes
    over: int | None = None  #: the fewest lines seen not to fit
    while True:
        data = fetch(lines, window)
        reads += 1
        if len(data) < window:
            best = (lines, data)
        else:
            over = lines
            if lines == 1:
                best = (1, data)
        if over is None or (best is not None and (over - best[0] <= 1 or reads >= MAX_READS)) or lines == 1:
            break
        # none fitted yet: at most the whole lines that did, halved; else bisect between fit and overflow
        lines = max(1, min(lines // 2, data.count(b"\n"))) if best is None else (best[0] + over) // 2
    assert best is not None
    data = best[1]
    # cut: bytes dropped here, or fewer lines than asked fitted, or as many lines came as asked (more before)
    cut = len(data) >= window or len(data) > max_bytes or best[0] < tail_lines or data.count(b"\n") >= tail_lines
    return Tail(data[-max_bytes:], cut, reads)


def capped(text: str, max_bytes: int) -> bytes:
    """A termination message as stored: UTF-8, its last ``max_bytes`` bytes."""
    return text.encode("utf-8", "replace")[-max_bytes:]


def key_of(key: AttemptKey, target: LogTarget) -> str:
    return key.log(target.pod, target.container, target.variant)


def notes(
    pods: Iterable[PodFacts],
    stored: Mapping[tuple[str, str, str], ContainerLog],
    why: Mapping[tuple[str, str], str],
    forbidden: bool = False,
) -> dict[str, list[ContainerLog]]:
    """pod -> what its logs are in the store: each stored log (``stored``: (pod, container, variant) ->
    its record), and for a training container with none, why (``why``: (pod, container) -> the reason of
    its last failed read; pods/log forbidden: :data:`FORBIDDEN`; a deleted pod: :data:`POD_DELETED`)."""
    out: dict[str, list[ContainerLog]] = {}
    for pod in pods:
        names = [r.name for r in pod.runs] or [e.container for e in pod.ended]
        mine = sorted(
            (v for k, v in stored.items() if k[0] == pod.name), key=lambda x: (x.container, x.variant)
        )
        have = {x.container for x in mine if x.variant != "termination"}  # a log of it, not only its message
        for name in dict.fromkeys(names):
            if name in have:
                continue
            reason = FORBIDDEN if forbidden else POD_DELETED if pod.deleted else why.get((pod.name, name), "")
            if reason:
                mine.append(ContainerLog(container=name, variant="tail", unavailable=reason))
        if not names and pod.deleted and not mine:
            mine.append(ContainerLog(container="", variant="tail", unavailable=POD_DELETED))
        if mine:
            out[pod.name] = mine
    return out


def summary(by_pod: Mapping[str, list[ContainerLog]], shown: int = 4) -> tuple[bool, ConditionReason, str]:
    """(every log there, reason, message) of the Incident's ``LogsCollected`` condition."""
    kept = [x for xs in by_pod.values() for x in xs if not x.unavailable]
    missing = [(pod, x) for pod, xs in by_pod.items() for x in xs if x.unavailable]
    cut = sum(1 for x in kept if x.cut)
    message = f"{len(kept)} log(s) stored" + (f" ({cut} cut to their tail)" if cut else "")
    if not missing:
        return True, ConditionReason.LOGS_STORED, message
    words = [f"{pod}/{x.container or '*'}: {x.unavailable}" for pod, x in missing[:shown]]
    more = f" (+{len(missing) - shown} more)" if len(missing) > shown else ""
    forbidden = any(x.unavailable == FORBIDDEN for _, x in missing)
    reason = ConditionReason.LOGS_FORBIDDEN if forbidden else ConditionReason.LOGS_UNAVAILABLE
    return False, reason, f"{message}; {len(missing)} unavailable: " + "; ".join(words) + more
