"""The verdict of an attempt that crashed before any collective hung: every rank's pod ended with a failed
exit and no rank left a Flight Recorder dump. Pure.

Collection ends such an attempt as ``EveryRankExited`` (``frwatch_operator.collect.progress``) as soon as every
rank's pod has ended; there is nothing to align, so no analyzer Job runs. The verdict is written from what
the Kubernetes API showed (the Incident's ``status.observed``: each pod's ranks, its containers' exit codes,
reasons and finish times), which is more than the dumps could say: which exit, on which ranks, which pod
ended first, and where to read why. Advice that cannot help (turning Flight Recorder on, buffer sizes) is
left out: the processes died before any collective could hang.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from frwatch_analyzers.verdict import Category, CulpritKind, RankGroup, Status, Verdict
from frwatch_operator.incident.observed_facts import parse_ranges
from frwatch_operator.resources import ContainerExit, IncidentObserved, ObservedPod
from frwatch_operator.verdict.words import ranks_words

#: The verdict's short line is at most this long (the analyzer's ``short``).
SHORT_MAX = 120
#: Exit codes above this are "killed by signal (code - 128)".
SIGNAL_BASE = 128


@dataclass(frozen=True)
class _Exit:
    """How the training container of one pod failed."""

    pod: str
    container: str
    code: int | None
    reason: str
    finished_at: str
    ranks: tuple[int, ...]

    @property
    def words(self) -> str:
        """``exited 1 (Error)``, ``was OOMKilled (exit 137)``, ``exited 139 (signal 11, SIGSEGV)``."""
        if self.reason == "OOMKilled":
            return "was OOMKilled" + (f" (exit {self.code})" if self.code is not None else "")
        sig = _signal_name(self.code)
        why = ", ".join(x for x in (self.reason, sig) if x)
        return f"exited {self.code if self.code is not None else '?'}" + (f" ({why})" if why else "")


def _signal_name(code: int | None) -> str:
    if code is None or code <= SIGNAL_BASE:
        return ""
    number = code - SIGNAL_BASE
    try:
        return f"signal {number}, {signal.Signals(number).name}"
    except ValueError:
        return f"signal {number}"


def _plural(words: str) -> str:
    return "were" + words[len("was") :] if words.startswith("was ") else words


def _failed(e: ContainerExit) -> bool:
    return e.exit_code not in (None, 0) or e.reason == "OOMKilled"


def _exit_of(pod: ObservedPod) -> _Exit | None:
    failed = [e for e in pod.exits if _failed(e)]
    if not failed:
        return None
    first = min(failed, key=lambda e: e.finished_at or "~")  # the container that ended first (unknown: last)
    ranks = tuple(r for span in parse_ranges(pod.ranks) for r in span)
    return _Exit(pod.name, first.container, first.exit_code, first.reason, first.finished_at, ranks)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def exit_verdict(observed: IncidentObserved | None, world_size: int | None, namespace: str) -> Verdict | None:
    """The verdict for an attempt whose ranks all exited before any dump; None when ``observed`` does not
    show a failed exit for every rank of the world (then the analyzer Job decides as usual)."""
    if observed is None or not world_size:
        return None
    exits = [x for x in (_exit_of(p) for p in observed.pods) if x is not None and x.ranks]
    covered = {r for x in exits for r in x.ranks}
    if not exits or not set(range(world_size)) <= covered:
        return None
    by_words: dict[str, list[int]] = {}
    for x in exits:
        by_words.setdefault(x.words, []).extend(r for r in x.ranks if r < world_size)
    if len(by_words) == 1:
        (words,) = by_words
        what = f"every rank {words} before any collective hung"
    else:
        parts = sorted(by_words.items(), key=lambda kv: min(kv[1]))
        what = "every rank exited before any collective hung: " + "; ".join(
            f"{ranks_words(sorted(ranks))} {_plural(w) if len(set(ranks)) > 1 else w}" for w, ranks in parts
        )
    timed = [x for x in exits if x.finished_at]
    first = min(timed, key=lambda x: x.finished_at) if timed else min(exits, key=lambda x: min(x.ranks))
    first_words = f"{ranks_words(first.ranks)} (pod {first.pod}) {first.words}" + (
        f" first, at {first.finished_at}" if timed else ""
    )
    culprits = sorted(covered & set(range(world_size)))
    headline = f"{what}: a crash, not a hang (no rank left a Flight Recorder dump)"
    return Verdict(
        status=Status.problem,
        category=Category.no_dump,
        headline=_cut(headline, 1024),
        short=_cut(what, SHORT_MAX),
        summary=(
            "No rank left a Flight Recorder dump, and the pod of every rank ended with a failed exit (as the "
            "Kubernetes API showed it: the Incident's status.observed). The processes died before any "
            f"collective could hang, so there is nothing to align and no analyzer ran. {first_words}."
        ),
        culprit_ranks=culprits,
        culprit_detail=_cut(f"crashed: {first.words}", 80),
        culprit_kind=CulpritKind.crashed,
        world_size=world_size,
        missing_dumps=culprits,
        groups=[
            RankGroup(ranks=sorted(r), label=f"{w} before any dump")
            for w, r in sorted(by_words.items(), key=lambda kv: min(kv[1]))
        ],
        next_steps=_next_steps(first, namespace, len(by_words) == 1),
    )


def _next_steps(first: _Exit, namespace: str, same_everywhere: bool) -> list[str]:
    logs = (
        f"Read the log of the first pod that ended, {first.pod} ({ranks_words(first.ranks)}): "
        f"kubectl logs -n {namespace} {first.pod} -c {first.container}"
    )
    if first.reason == "OOMKilled":
        why = (
            "The container ran out of memory: raise its memory limit or lower the batch size or the model's "
            "footprint per rank."
        )
    elif first.code is not None and first.code > SIGNAL_BASE:
        why = (
            f"Exit {first.code} means {_signal_name(first.code)}: the process was killed from outside or "
            "crashed in native code; read the node's events and kernel log (dmesg) for that time."
        )
    else:
        why = (
            f"Exit {first.code} is the program's own error (an uncaught exception or sys.exit): the last "
            "traceback in that log names it."
        )
    shared = (
        "Every rank failed the same way: look at what all ranks share (arguments, configuration, data path, "
        "image, environment) rather than at one node."
        if same_everywhere
        else "The ranks failed differently: compare the first pod's log with the others' (the first failure "
        "often makes the others exit)."
    )
    return [logs, why, shared]
