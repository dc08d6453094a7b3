from __future__ import annotations

import time

import pytest
from e2e_helpers import Target, wait_for
from test_live_policy_e2e import submit, verdict_within

from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_watchdog_joins(target: Target) -> None:
    names: list[str] = []
    name = submit(target, names, "dumpAndAnalyze")
    ann, incident, after = verdict_within(target, name)
    t0 = time.monotonic()
    print("verdict", after, ann[c.ANN_SUSPECT_RANKS])
    conds = wait_for(lambda: "Failed" in (x := target.conditions(name)) and x, 600, "job failed")
    print("job failed", time.monotonic() - t0, conds)
    time.sleep(20)
    incs = target.incidents(name)
    print("incidents", [(i["metadata"]["name"], i["status"]["phase"], i["status"].get("message")) for i in incs])
    print("ann after", {k: v for k, v in target.annotations(name).items() if k.startswith("frwatch")})
    log = target.operator_log()
    print("\n".join(line for line in log.splitlines() if name in line and ("incident" in line or "failure" in line))[-4000:])
    target.delete_job(name)
