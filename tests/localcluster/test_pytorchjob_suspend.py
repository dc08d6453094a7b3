"""The local training operator honours ``runPolicy.suspend`` as v1.7's does (live watch's abort uses it): a
suspended PyTorchJob's pods are deleted and none created, ``Suspended`` True and ``Running`` False; resumed,
``Suspended`` turns False and the pods are created again."""

from __future__ import annotations

import pytest
from kube import Kube, jobs_path, pytorchjob, wait_for

pytestmark = pytest.mark.slow

#: A job that keeps running until the test is done with it (the ranks sleep; no collective needed).
SLEEPER = ["python", "-c", "import time; time.sleep(600)"]


def conditions(kube: Kube, ns: str, name: str) -> dict[str, tuple[str, str]]:
    job = kube.get(jobs_path(ns, name)) or {}
    return {x["type"]: (x["status"], x["reason"]) for x in (job.get("status") or {}).get("conditions") or []}


def phases(kube: Kube, ns: str) -> list[str]:
    return sorted(str((p.get("status") or {}).get("phase")) for p in kube.pods(ns))


def test_suspend_deletes_the_pods_and_resume_creates_them_again(kube: Kube, ns: str) -> None:
    kube.create(jobs_path(ns), pytorchjob("sleepy", ns, workers=1, command=SLEEPER))
    wait_for(lambda: phases(kube, ns) == ["Running", "Running"], 90, "both pods running")
    wait_for(lambda: conditions(kube, ns, "sleepy").get("Running", ("",))[0] == "True", 30, "Running")
    kube.merge(jobs_path(ns, "sleepy"), {"spec": {"runPolicy": {"suspend": True}}})
    wait_for(lambda: kube.pods(ns) == [], 60, "the pods deleted")
    conds = wait_for(lambda: (x := conditions(kube, ns, "sleepy")).get("Suspended", ("",))[0] == "True" and x, 30,
                     "Suspended")  # fmt: skip
    assert conds["Suspended"] == ("True", "PyTorchJobSuspended") and conds["Running"][0] == "False", conds
    job = kube.get(jobs_path(ns, "sleepy")) or {}
    assert "startTime" not in job.get("status", {}) and "Failed" not in conds
    kube.merge(jobs_path(ns, "sleepy"), {"spec": {"runPolicy": {"suspend": False}}})
    wait_for(lambda: phases(kube, ns) == ["Running", "Running"], 90, "the pods created again")
    conds = wait_for(lambda: (x := conditions(kube, ns, "sleepy")).get("Suspended", ("",))[0] == "False" and x, 30,
                     "resumed")  # fmt: skip
    assert conds["Suspended"] == ("False", "PyTorchJobResumed"), conds
    kube.delete(jobs_path(ns, "sleepy"))
