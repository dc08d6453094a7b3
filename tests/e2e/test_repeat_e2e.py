"""The same bug twice stops the loop (issue 29 item 1), end to end on a JobSet of real torch gloo ranks under
torchrun: two attempts that skip the same all_reduce on the same rank -> the JobSet is suspended before its
third attempt reaches the watchdog, and it says why (annotation, Event with the resume command, the Incident's
SameBugAgain condition); a restart whose attempts fail at different branches (another culprit rank) is left to
restart. Both jobs run side by side to keep the test lean.

Needs the operator's repeat dry-run off (``FRWATCH_REMEDIATION_REPEAT_DRY_RUN=false``: the local cluster of
``conftest.target`` sets it; on a real cluster, set ``FRWATCH_E2E_REPEAT=1`` once the chart's
``remediation.repeatDryRun`` is false)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_helpers import Target, wait_for
from e2e_kinds import JOBSET, KindJobs, PodWatch, script

from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: Each attempt's culprit is its restart attempt (0, 1, ...): every attempt fails at another branch. (Not named
#: FRWATCH_*: the webhook strips a tenant's FRWATCH_* env.)
ATTEMPT_ENV = {"name": "RESTART_ATTEMPT",
               "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{c.LABEL_JOBSET_RESTART_ATTEMPT}']"}}}  # fmt: skip


@pytest.fixture
def jobsets(target: Target) -> Iterator[KindJobs]:
    if target.local is None and os.environ.get("FRWATCH_E2E_REPEAT") != "1":
        pytest.skip("needs the operator's remediation.repeatDryRun false (FRWATCH_E2E_REPEAT=1)")
    made = KindJobs(target, JOBSET)
    yield made
    made.cleanup()


def submit(jobs: KindJobs, name: str, command: list[str], max_restarts: int) -> None:
    body = jobs.body(name, command, pods=2, nproc=2, capture=True, max_restarts=max_restarts)
    body["metadata"]["annotations"][c.ANN_REPEAT_POLICY] = "suspend"
    container = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["env"].append(ATTEMPT_ENV)
    jobs.create(body)


def condition(incident: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((x for x in incident["status"].get("conditions") or [] if x["type"] == type_), None)


def test_same_bug_twice_suspends_before_the_third_attempt_and_a_different_branch_restarts(
    target: Target, jobsets: KindJobs
) -> None:
    jobs = jobsets
    watcher = PodWatch(target, c.LABEL_JOBSET_NAME)
    tail = uuid.uuid4().hex[:6]
    same, other = f"same-bug-{tail}", f"other-branch-{tail}"
    try:
        # the hang lasts longer than a verdict takes, so the third attempt is still in it when the verdict lands
        submit(jobs, same, script("skip", "--culprit", "1", "--timeout-s", "45"), max_restarts=3)
        submit(jobs, other, script("skip", "--culprit", "$(RESTART_ATTEMPT)", "--timeout-s", "20"), max_restarts=2)
        first, second = jobs.reported_incidents(same, 2, timeout=420)
        stopped = wait_for(
            lambda: (j := jobs.get(same))["spec"].get("suspend") and j, 90, f"{same} suspended"
        )
        ended = jobs.wait_finished(other, timeout=240)
        o_first, o_second = jobs.reported_incidents(other, 3, timeout=120)[:2]
    finally:
        watcher.stop()
    # the same bug twice: the JobSet says why, and how to resume it
    category = second["status"]["category"]
    assert category in {"desync", "missing_rank"} and first["status"]["category"] == category, category
    assert stopped["metadata"]["annotations"][c.ANN_RESTART_STOPPED] == f"{category}: {second['metadata']['name']}"
    repeat = second["status"]["repeat"]
    assert repeat["same"] is True and repeat["action"] == "suspended", repeat
    assert repeat["previousIncident"] == first["metadata"]["name"]
    resume = f"kubectl -n {target.namespace} patch jobset {same} --type merge -p '{{\"spec\":{{\"suspend\":false}}}}'"
    assert repeat["resume"] == resume
    cond = condition(second, "SameBugAgain")
    assert cond is not None and cond["status"] == "True" and resume in cond["message"], cond
    assert [m for m in jobs.events(same, "RestartStopped") if resume in m], jobs.events(same, "RestartStopped")
    assert first["status"]["repeat"]["branchKey"] == repeat["branchKey"] != ""
    # the third attempt never reached its watchdog: its pods are gone, none failed, it has no Incident
    third = [p for p in watcher.of_job(same).values()
             if p["metadata"]["labels"][c.LABEL_JOBSET_RESTART_ATTEMPT] == "2"]  # fmt: skip
    wait_for(lambda: not [p for p in jobs.pods(same) if p["metadata"]["labels"][c.LABEL_JOBSET_RESTART_ATTEMPT] == "2"],
             60, "the third attempt's pods deleted")  # fmt: skip
    assert not [p for p in third if (p.get("status") or {}).get("phase") == "Failed"], third
    assert sorted(i["spec"]["attempt"] for i in jobs.incidents(same)) == ["0", "1"]
    assert "Failed" not in jobs.true_conditions(same)
    # another branch each time: never suspended, it restarted until its own failure policy ended it
    assert ended["Failed"]["reason"] == "ReachedMaxRestarts", ended
    o_repeat = o_second["status"]["repeat"]
    said = [(i["status"]["category"], i["status"]["message"][:200]) for i in (o_first, o_second)]
    assert o_repeat["same"] is False and o_repeat["action"] == "none", (o_repeat, said)
    assert o_first["status"]["repeat"]["branchKey"] != o_repeat["branchKey"] != "", said
    assert condition(o_second, "SameBugAgain") is None
    assert not jobs.get(other)["spec"].get("suspend") and jobs.events(other, "RestartStopped") == []
    attempts = {p["metadata"]["labels"][c.LABEL_JOBSET_RESTART_ATTEMPT] for p in watcher.of_job(other).values()}
    assert attempts == {"0", "1", "2"}, attempts
