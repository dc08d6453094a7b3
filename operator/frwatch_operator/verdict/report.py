"""What a verdict (or a failure) looks like on the job and the Incident. Pure: data in, data out.

- the ``frwatch.io/*`` annotations of the PyTorchJob (DESIGN.md): the short verdict (at most 120
  characters: ``kubectl describe`` shows it whole), the category, comma lists of suspect ranks and (only for a
  hardware-class verdict) nodes, the report URL and the Incident;
- the Events a person reads in ``kubectl describe``: the verdict's full line with its kind, the suspects
  (hardware-class) or the culprits and where they ran (software), the next steps;
- the Incident's status fields (phase, category, suspects, the verdict in words, report, conditions, message).
The words themselves come from :mod:`.verdict_words`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from frwatch_analyzers.store.layout import REPORT, REPORT_HTML
from frwatch_analyzers.verdict import Status, Verdict
from frwatch_operator import constants as c
from frwatch_operator.notices import EventType, Notice, Reason
from frwatch_operator.resources import (
    SUSPECTS_MAX,
    Condition,
    ConditionReason,
    ConditionType,
    IncidentObserved,
    IncidentPhase,
    IncidentVerdict,
)
from frwatch_operator.times import rfc3339
from frwatch_operator.verdict.words import words

#: Longer comma lists are cut (with "+N more") to keep the job's annotations far below the 256 KiB limit.
LIST_MAX = 16 * 1024
#: The verdict's Event messages: at most this long, so `kubectl describe` shows each on a line or two; a longer
#: text is cut and says where the whole of it is (the Incident's status.verdict, which keeps it).
EVENT_MESSAGE_MAX = 300
#: A culprit_detail longer than this is a sentence that repeats the headline: left out of the Suspects Event.
DETAIL_MAX = 80


#: At most this many suspect ranks and nodes are copied into the Incident's status (it must stay small;
#: the verdict in the store has them all).
STATUS_LIST_MAX = 256


def one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def event_text(text: str, incident: str, field: str, limit: int = EVENT_MESSAGE_MAX) -> str:
    """``text`` on one line, at most ``limit`` characters; cut, it ends by naming where the whole text is kept
    (``field`` of the Incident's status)."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    more = f" … (in full: kubectl get incident {incident} -o jsonpath='{{.status.{field}}}')"
    return flat[: max(0, limit - len(more))].rstrip() + more


def comma_list(items: Sequence[object], limit: int = LIST_MAX) -> str:
    """``1,3,7`` (no spaces); cut with ``,+N more`` beyond ``limit`` characters."""
    out: list[str] = []
    used = 0
    for i, item in enumerate(items):
        text = str(item)
        if used + len(text) + 1 > limit - 16:
            out.append(f"+{len(items) - i} more")
            break
        out.append(text)
        used += len(text) + 1
    return ",".join(out)


def rank_ranges(ranks: Sequence[int]) -> str:
    """``0-3,7,9-12``: sorted, duplicates dropped, runs of consecutive ranks as ``first-last``."""
    out: list[str] = []
    run: list[int] = []
    for r in sorted(set(ranks)):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [r]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def suspects_line(ranks: Sequence[int], nodes: Sequence[str], limit: int = SUSPECTS_MAX) -> str:
    """The Incident's ``status.suspects`` (the Suspects column of ``kubectl get incidents``): e.g.
    ``rank 1 on node-b``, ``ranks 0-3 on node-a,node-b``; names give way to counts (``40 ranks on 12
    nodes``) when they would not fit in ``limit`` characters. Empty when nobody is named."""
    unique_ranks, unique_nodes = sorted(set(ranks)), list(dict.fromkeys(n for n in nodes if n))

    def counted(n: int, word: str) -> str:
        return f"{n} {word}{'s' if n != 1 else ''}"

    plural = "" if len(unique_ranks) == 1 else "s"
    who = (
        [f"rank{plural} {rank_ranges(unique_ranks)}", counted(len(unique_ranks), "rank")]
        if unique_ranks
        else []
    )
    where = [",".join(unique_nodes), counted(len(unique_nodes), "node")] if unique_nodes else []
    if who and where:  # names first, then counts: the nodes' names give way before the ranks'
        candidates = [f"{w} on {n}" for w in who for n in where]
    elif who:
        candidates = who
    elif where:  # no rank named: "node gpu-7", "nodes a,b", "3 nodes"
        candidates = [f"node{'s' if len(unique_nodes) > 1 else ''} {where[0]}", where[1]]
    else:
        return ""
    return next((t for t in candidates if len(t) <= limit), one_line(candidates[-1], limit))


def verdict_line(verdict: Verdict) -> str:
    """The one line a person reads (annotation frwatch.io/verdict): the short form, at most 120 characters
    (``kubectl describe`` shows it whole; the full headline is in the Diagnosed Event)."""
    return words(verdict).short


def report_html_url(report: str) -> str:
    """The HTML report beside report.txt (the analyzer Job writes both); '' when ``report`` names no report.txt."""
    head, sep, tail = report.rpartition("/")
    return f"{head}/{REPORT_HTML}" if sep and tail == REPORT else ""


def job_annotations(
    verdict: Verdict, *, incident: str, report: str, observed: IncidentObserved | None = None, attempt: str = ""
) -> dict[str, str | None]:
    """The job's ``frwatch.io/*`` annotations (a merge patch: None removes a stale value of an earlier
    incident, e.g. suspects the new verdict does not have). Suspect nodes only for a hardware-class verdict:
    the node a software bug ran on is no suspect."""
    said = words(verdict, observed)
    return {
        c.ANN_VERDICT: said.short,
        c.ANN_CATEGORY: verdict.category.value,
        c.ANN_SUSPECT_RANKS: comma_list(verdict.culprit_ranks) or None,
        c.ANN_SUSPECT_NODES: (comma_list(verdict.suspect_nodes) or None) if verdict.hardware_class else None,
        c.ANN_REPORT: report,
        c.ANN_REPORT_HTML: report_html_url(report) or None,
        c.ANN_INCIDENT: incident,
        c.ANN_INCIDENT_ATTEMPT: attempt or None,
    }


def _ranks_text(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + comma_list(ranks, 400).replace(",", ", ")


def verdict_events(
    verdict: Verdict, *, incident: str, report: str, observed: IncidentObserved | None = None, namespace: str = ""
) -> list[Notice]:
    """The Events on the job: the verdict's full line, who (suspects for a hardware-class finding, culprits
    and where they ran otherwise), the next steps (each a line a person reads)."""
    said = words(verdict, observed, namespace)
    kind: EventType = "Normal" if verdict.status is Status.healthy else "Warning"
    tags = verdict.category.value + (", hardware-class" if verdict.hardware_class else "")
    head = verdict.headline or said.short
    what = f"{said.kind_text}: " if said.kind_text and not head.lower().startswith(said.kind_text.split(" ")[0].lower()) else ""
    events = [
        Notice(
            kind,
            Reason.DIAGNOSED,
            _diagnosed(f"{what}{head}", f" [{tags}]. Full report: {report} (Incident {incident})", incident),
        )
    ]
    missing = f"; no dump from {_ranks_text(verdict.missing_dumps)}" if verdict.missing_dumps else ""
    if verdict.hardware_class and (verdict.culprit_ranks or verdict.suspect_nodes):
        who = _ranks_text(verdict.culprit_ranks) if verdict.culprit_ranks else "no rank named"
        if verdict.culprit_detail and len(verdict.culprit_detail) <= DETAIL_MAX:
            who += f" ({verdict.culprit_detail})"  # a few words (stuck, crashed); a long one repeats the headline
        elif said.kind_text:
            who += f" ({said.kind_text})"
        where = (
            f"on node{'s' if len(verdict.suspect_nodes) > 1 else ''} "
            + comma_list(verdict.suspect_nodes, 400).replace(",", ", ")
            if verdict.suspect_nodes
            else "on unknown nodes (no rank-to-node record)"
        )
        events.append(
            Notice(
                "Warning", Reason.SUSPECTS, event_text(f"Suspects: {who} {where}{missing}", incident, "suspectNodes")
            )
        )
    elif verdict.culprit_ranks:
        who = _ranks_text(verdict.culprit_ranks) + (f" ({said.kind_text})" if said.kind_text else "")
        where = f"; {said.where}" if said.where else "; where it ran is not recorded"
        events.append(
            Notice(
                "Warning",
                Reason.CULPRITS,
                event_text(f"Culprits: {who}{where}. A software finding: no node is suspect{missing}", incident,
                           "verdict.ranOn"),
            )
        )
    if said.next_steps:
        steps = " ".join(f"{i}) {one_line(s, 300)}" for i, s in enumerate(said.next_steps, 1))
        fits = f" ({said.kind_text})" if said.kind_text else ""
        events.append(
            Notice("Normal", Reason.NEXT_STEPS, event_text(f"Next steps{fits}: {steps}", incident, "verdict.nextSteps"))
        )
    return events


def _diagnosed(head: str, tail: str, incident: str) -> str:
    """The Diagnosed Event: the headline, cut first, then its tags, the report's URL and the Incident."""
    room = EVENT_MESSAGE_MAX - len(tail)
    if room < 40:  # an absurdly long report URL: the headline keeps its room, the tail is cut instead
        return event_text(head + tail, incident, "verdict.headline")
    flat = " ".join(head.split())
    return (flat if len(flat) <= room else flat[: room - 1] + "…") + tail


def culprits_line(verdict: Verdict, observed: IncidentObserved | None = None, limit: int = SUSPECTS_MAX) -> str:
    """The Incident's ``status.suspects`` (the Suspects column): suspect ranks and nodes for a hardware-class
    verdict ("rank 1 on node-b"); empty for a software one, whose culprits are no node's fault (the Culprits
    column, ``status.verdict.culprits``, names them; ``status.verdict.ranOn`` says where they ran)."""
    if verdict.hardware_class:
        return suspects_line(verdict.culprit_ranks, verdict.suspect_nodes, limit)
    return ""


def verdict_summary(
    verdict: Verdict, *, report: str, observed: IncidentObserved | None = None, namespace: str = ""
) -> IncidentVerdict:
    """The Incident's ``status.verdict``: the verdict in words, bounded."""
    said = words(verdict, observed, namespace)
    return IncidentVerdict(
        headline=one_line(verdict.headline or said.short, 1024),
        short=said.short,
        kind=said.kind.value if said.kind is not None else "",
        kind_text=one_line(said.kind_text, 64),
        culprits=one_line(said.culprits, 256),
        ran_on=one_line(said.where, 512),
        next_steps=[one_line(s, 512) for s in said.next_steps],
        report_url=report[:2048],
    )


# --- the Incident's status ------------------------------------------------------------------------------


def with_condition(conditions: Sequence[Condition], new: Condition) -> list[dict[str, Any]]:
    """The conditions list (wire form) with ``new`` replacing the one of its type. The transition time is
    kept when the status did not change. A merge patch replaces lists whole: send the full list."""
    out: list[dict[str, Any]] = []
    replaced = False
    for cond in conditions:
        if cond.type == new.type:
            keep = cond.status == new.status and cond.last_transition_time
            out.append(
                new.model_copy(update={"last_transition_time": cond.last_transition_time}).wire()
                if keep
                else new.wire()
            )
            replaced = True
        else:
            out.append(cond.wire())
    if not replaced:
        out.append(new.wire())
    return out


def analyzing_status(job_name: str, *, now: datetime, conditions: Sequence[Condition]) -> dict[str, Any]:
    """The status patch when the analyzer Job was created."""
    return {
        "phase": IncidentPhase.ANALYZING.value,
        "analyzerJob": job_name,
        "message": f"analyzing: Job {job_name}",
        "conditions": with_condition(
            conditions,
            Condition(
                type=ConditionType.ANALYZED, status="Unknown", reason=ConditionReason.ANALYZER_RUNNING,
                message=f"analyzer Job {job_name} created", last_transition_time=rfc3339(now),
            ),
        ),
    }  # fmt: skip


def reported_status(
    verdict: Verdict,
    *,
    report: str,
    now: datetime,
    conditions: Sequence[Condition],
    note: str = "",
    remediation: Condition | None = None,
    observed: IncidentObserved | None = None,
    namespace: str = "",
) -> dict[str, Any]:
    """The status patch when the verdict is stored and surfaced (phase Reported), with the
    ``Remediated`` condition when the cordon policy ran. Suspect nodes only for a hardware-class verdict.
    ``status.message`` (the Message column of ``kubectl get -o wide``) is the verdict line, the note and what
    the cordon policy did (as after probes, :mod:`.probe_step`)."""
    message = verdict_line(verdict) + (f" ({note})" if note else "")
    said = message
    if remediation is not None:
        conditions = [c for c in conditions if c.type != remediation.type] + [remediation]
        said = f"{message}; {remediation.message}"
    return {
        "phase": IncidentPhase.REPORTED.value,
        "analyzedAt": rfc3339(now),
        "category": verdict.category.value,
        "hardwareClass": verdict.hardware_class,
        "suspectRanks": list(verdict.culprit_ranks[:STATUS_LIST_MAX]),
        "suspectNodes": list(verdict.suspect_nodes[:STATUS_LIST_MAX]) if verdict.hardware_class else [],
        "suspects": culprits_line(verdict, observed),
        "reportUrl": report,
        "reportHtmlUrl": report_html_url(report),
        "verdict": verdict_summary(verdict, report=report, observed=observed, namespace=namespace).wire(),
        "message": one_line(said, 1024),
        "conditions": with_condition(
            conditions,
            Condition(
                type=ConditionType.ANALYZED, status="True", reason=ConditionReason.DIAGNOSED,
                message=one_line(message, 1024), last_transition_time=rfc3339(now),
            ),
        ),
    }  # fmt: skip


def failed_status(
    reason: str, message: str, *, now: datetime, conditions: Sequence[Condition]
) -> dict[str, Any]:
    """The status patch when no verdict could be had (phase Failed, with the reason)."""
    text = one_line(message, 1024)
    return {
        "phase": IncidentPhase.FAILED.value,
        "message": text,
        "conditions": with_condition(
            conditions,
            Condition(
                type=ConditionType.ANALYZED,
                status="False",
                reason=reason,
                message=text,
                last_transition_time=rfc3339(now),
            ),
        ),
    }


def remediated_condition(
    mode: str, summary: str, *, cordoned: bool, now: datetime, reason: str = ""
) -> Condition:
    """The Incident's ``Remediated`` condition: the cordon plan (done, dry-run or skipped) in words.
    ``reason``: instead of the one the mode and outcome give (e.g. ``BreakerStateUnavailable``)."""
    reason = reason or {"off": ConditionReason.REMEDIATION_OFF, "dry-run": ConditionReason.DRY_RUN}.get(
        mode, ConditionReason.CORDONED if cordoned else ConditionReason.NO_CORDON
    )
    return Condition(
        type=ConditionType.REMEDIATED,
        status="True" if cordoned else "False",
        reason=reason,
        message=one_line(summary, 1024),
        last_transition_time=rfc3339(now),
    )
