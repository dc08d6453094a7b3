"""Issue 26: the verdict's Events stay under 300 characters (a NextSteps Event was about 430); a cut one says
where the whole text is, and the Incident's status.verdict keeps it whole."""

from __future__ import annotations

from datetime import UTC, datetime

from test_verdict_words import FOUR, cpu_stuck
from vl_builders import hardware_verdict

from frwatch_operator.resources import IncidentStatus
from frwatch_operator.verdict.report import EVENT_MESSAGE_MAX, reported_status, verdict_events

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
REPORT = "s3://frwatch/frwatch/team-a/llama-pretraining-run/0b4c6a2e-1f2d-4c3b-9a8e-7d6c5b4a3f21/0/report.txt"


def test_every_verdict_event_is_under_300_characters_and_a_cut_one_says_where_the_rest_is() -> None:
    steps = [f"step {i}: " + "check the rank's data loader and the host-side loop before the collective " * 2
             for i in range(1, 4)]  # fmt: skip
    for verdict in (cpu_stuck(next_steps=steps, headline="x " * 400), hardware_verdict("node-b", ranks=[1])):
        events = verdict_events(verdict, incident="llama-0b4c-0", report=REPORT, observed=FOUR)
        assert events and all(len(e.message) <= EVENT_MESSAGE_MAX <= 300 for e in events), [
            (e.reason.value, len(e.message)) for e in events
        ]
    events = {e.reason.value: e.message for e in verdict_events(cpu_stuck(next_steps=steps), incident="llama-0b4c-0",
                                                                 report=REPORT, observed=FOUR)}  # fmt: skip
    assert events["NextSteps"].endswith("(in full: kubectl get incident llama-0b4c-0 -o jsonpath='{.status.verdict.nextSteps}')")
    assert events["Diagnosed"].endswith(f"Full report: {REPORT} (Incident llama-0b4c-0)")  # the link is never cut
    status = IncidentStatus.model_validate(
        reported_status(cpu_stuck(next_steps=steps), report=REPORT, now=NOW, conditions=[], observed=FOUR,
                        namespace="team-a")
    )
    assert status.verdict is not None  # whole (on one line each), where the Event points
    assert status.verdict.next_steps == [" ".join(s.split()) for s in steps]
