"""Two operator replicas, one killed mid-incident: the Incident completes once, and the pods created while it
is down are injected (every replica serves the webhook; the elected one drives the Incidents)."""

from __future__ import annotations

import pytest
from e2e_helpers import WORKLOAD, Target, wait_for

from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: A job whose pods only need to exist (and be admitted): they sleep a moment and end.
BRIEF = ["python", "-c", "import time; time.sleep(2)"]


def test_the_leader_killed_mid_incident_the_incident_completes_once_and_capture_goes_on(
    replicas_target: Target,
) -> None:
    target = replicas_target
    leader = wait_for(lambda: (target.lease() or {}).get("spec", {}).get("holderIdentity"), 60, "a leader")
    failing = target.submit([*WORKLOAD, "--scenario", "skip"], prefix="ha")
    wait_for(
        lambda: any((i.get("status") or {}).get("phase") in ("Collecting", "Analyzing")
                    for i in target.incidents(failing)),
        90, "the Incident under way",
    )  # fmt: skip
    leader = target.lease()["spec"]["holderIdentity"]  # type: ignore[index]
    routed_before = len(target.local.webhook_service.routed) if target.local else 0
    target.kill_operator(leader)  # no goodbye: its Lease stays until it expires

    meanwhile = target.submit(BRIEF, prefix="meanwhile")  # its pods are created while the leader is down
    pods = wait_for(lambda: (p := target.pods(meanwhile)) and len(p) == 4 and p, 60, "the pods of the new job")
    assert all(c.ANN_INJECTED in (p["metadata"].get("annotations") or {}) for p in pods), [
        p["metadata"]["name"] for p in pods if c.ANN_INJECTED not in (p["metadata"].get("annotations") or {})
    ]
    if target.local is not None:  # the Service sent those admissions to the replicas that were up
        assert target.local.webhook_service.routed[routed_before:]

    ann = target.wait_verdict(failing, timeout=150)
    assert ann[c.ANN_SUSPECT_RANKS] == "1"
    incident = target.reported_incident(failing)  # exactly one Incident, Reported
    assert ann[c.ANN_INCIDENT] == incident["metadata"]["name"]
    analyzer_jobs = target.analyzer_jobs(incident)
    assert len(analyzer_jobs) == 1, analyzer_jobs  # the analysis ran once
    collected = "DumpsCollected" if target.event_objects(failing, "DumpsCollected") else "DumpsMissing"
    for reason in ("IncidentOpened", collected, "Diagnosed"):
        said = target.event_objects(failing, reason)
        assert len(said) == 1 and (said[0].count or 1) == 1, (reason, [e.message for e in said])
    now = target.lease()["spec"]["holderIdentity"]  # type: ignore[index]
    assert now and now != leader  # another replica (or the killed one's replacement) leads now
