"""`frwatch demo --kind`: each kind's job has 4 ranks, is opted in, and TrainJob/JobSet run torchrun."""

from __future__ import annotations

import pytest

from frwatch_dev.demo.cluster_demo import SCENARIOS, job_body
from frwatch_dev.demo.job_kinds import DEFAULT_KIND, KINDS, torchrun
from frwatch_operator import constants as c


def ranks(body: dict) -> int:
    spec = body["spec"]
    if body["kind"] == "PyTorchJob":
        return sum(r["replicas"] for r in spec["pytorchReplicaSpecs"].values())
    if body["kind"] == "TrainJob":
        return int(spec["trainer"]["numNodes"]) * int(spec["trainer"]["numProcPerNode"])
    [rjob] = spec["replicatedJobs"]
    env = {
        e["name"]: e.get("value")
        for e in rjob["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert int(env["PET_NNODES"]) == rjob["template"]["spec"]["parallelism"]
    return rjob["replicas"] * rjob["template"]["spec"]["parallelism"] * int(env["PET_NPROC_PER_NODE"])


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_runs_four_ranks_opted_in(kind: str, scenario: str) -> None:
    body = job_body(KINDS[kind], SCENARIOS[scenario])
    assert body["kind"] == KINDS[kind].kind and ranks(body) == 4
    assert body["metadata"]["annotations"] == {c.ANN_CAPTURE: c.CAPTURE_ENABLED}


def test_the_default_kind_is_trainjob_and_torchrun_wraps_python_modules() -> None:
    assert DEFAULT_KIND == "trainjob"
    assert torchrun(["python", "-m", "x", "--a"]) == [
        "python",
        "-m",
        "torch.distributed.run",
        "-m",
        "x",
        "--a",
    ]
    with pytest.raises(ValueError, match="not a `python -m` command"):
        torchrun(["bash", "-c", "x"])
