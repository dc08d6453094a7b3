"""PyTorchJobs on the local cluster: real torch gloo ranks as processes on two nodes, the training
operator's pods, env and conditions, and the real webhook's injection with the agent uploading dumps."""

from __future__ import annotations

import pytest
from kube import Kube, env_of, jobs_path, pytorchjob, true_conditions, wait_for

from frwatch_dev.localcluster.cluster import LocalCluster
from frwatch_operator import constants as c
from frwatch_operator.webhook import JobIndex

pytestmark = pytest.mark.slow


def container_logs(cluster: LocalCluster, ns: str, pods: list[dict], tail: int = 1500) -> str:
    """The end of every container log of ``pods`` (the kubelet's files), for a failure's message: which rank
    wrote its dump, and what each agent uploaded or still had pending when it stopped."""
    parts = []
    for pod in pods:
        meta = pod["metadata"]
        folder = cluster.logs_dir / "pods" / f"{ns}_{meta['name']}_{meta['uid']}"
        for log in sorted(folder.glob("*/*.log")):
            parts.append(
                f"--- {meta['name']} {log.parent.name}/{log.name}\n{log.read_text(errors='replace')[-tail:]}"
            )
    return "\n".join(parts)


def finished(kube: Kube, ns: str, name: str) -> list[str] | None:
    conds = true_conditions(kube.get(jobs_path(ns, name)))
    return conds if {"Succeeded", "Failed"} & set(conds) else None


def test_healthy_job_succeeds_with_four_ranks_on_two_nodes(kube: Kube, ns: str) -> None:
    kube.create(jobs_path(ns), pytorchjob("train", ns, "healthy"))
    conds = wait_for(lambda: finished(kube, ns, "train"), 90, "the job to finish")
    assert conds == ["Created", "Succeeded"], conds
    job = kube.get(jobs_path(ns, "train"))
    assert job is not None
    reasons = {x["type"]: (x["status"], x["reason"]) for x in job["status"]["conditions"]}
    assert reasons["Running"] == ("False", "PyTorchJobRunning")
    assert reasons["Succeeded"] == ("True", "PyTorchJobSucceeded")
    assert job["status"]["replicaStatuses"]["Master"]["succeeded"] == 1

    # The training operator marks a PyTorchJob Succeeded as soon as its master succeeded (its
    # UpdateJobStatus: "when master is succeed, the job is finished"): the workers may still be exiting.
    # Their pods' own phase is the signal that they ended.
    def all_ended() -> dict[str, dict] | None:
        current = {p["metadata"]["name"]: p for p in kube.pods(ns)}
        ended = all(p["status"].get("phase") in ("Succeeded", "Failed") for p in current.values())
        return current if len(current) == 4 and ended else None

    pods = wait_for(all_ended, 30, "every rank's pod to end")
    assert sorted(pods) == ["train-master-0", "train-worker-0", "train-worker-1", "train-worker-2"]
    master = pods["train-master-0"]
    assert master["metadata"]["labels"] == {
        c.KF_LABEL_JOB_NAME: "train",
        c.KF_LABEL_OPERATOR_NAME: "pytorchjob-controller",
        c.KF_LABEL_REPLICA_TYPE: "master",
        c.KF_LABEL_REPLICA_INDEX: "0",
        c.KF_LABEL_JOB_ROLE: "master",
    }
    assert master["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    ranks = {}
    for name, pod in pods.items():
        env = env_of(pod["spec"]["containers"][0])
        assert env[c.ENV_WORLD_SIZE] == "4" and env[c.ENV_PET_NNODES] == "4"
        assert env[c.ENV_MASTER_ADDR] == "127.0.0.1" and env[c.ENV_MASTER_PORT].isdigit()
        assert env[c.ENV_PET_NODE_RANK] == env[c.ENV_RANK]
        ranks[name] = int(env[c.ENV_RANK])
        assert pod["status"]["phase"] == "Succeeded"
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (term["exitCode"], term["reason"]) == (0, "Completed")
    assert ranks == {"train-master-0": 0, "train-worker-0": 1, "train-worker-1": 2, "train-worker-2": 3}
    nodes = sorted(p["spec"]["nodeName"] for p in pods.values())
    assert nodes == ["node-a", "node-a", "node-b", "node-b"]
    assert len({p["status"]["podIP"] for p in pods.values()}) == 4


def test_skip_job_fails_and_the_agent_uploads_every_rank_s_dump(
    kube: Kube, ns: str, cluster: LocalCluster, job_index: JobIndex
) -> None:
    created = kube.create(jobs_path(ns), pytorchjob("skip", ns, "skip", capture=True))
    job_index.upsert_job(created)
    conds = wait_for(lambda: finished(kube, ns, "skip"), 90, "the job to finish")
    assert "Failed" in conds and "Succeeded" not in conds, conds
    job = kube.get(jobs_path(ns, "skip"))
    assert job is not None
    failed = next(x for x in job["status"]["conditions"] if x["type"] == "Failed")
    assert failed["reason"] == "PyTorchJobFailed"
    assert failed["message"].startswith(f"PyTorchJob {ns}/skip has failed because ")
    assert job["status"]["conditions"][-1]["type"] == "Failed"  # `kubectl get pytorchjob` shows Failed

    def agents_stopped() -> list[dict] | None:
        # the kubelet stops a native sidecar once the main containers ended: allow it a moment
        current = kube.pods(ns)
        done = all(
            "terminated" in (p["status"].get("initContainerStatuses") or [{"state": {}}])[0]["state"]
            for p in current
        )
        return current if done else None

    pods = wait_for(agents_stopped, 30, "every agent sidecar to stop after its rank")
    assert len(pods) == 4
    codes = []
    for pod in pods:
        assert pod["metadata"]["annotations"][c.ANN_INJECTED]  # admitted through the real webhook
        inits = pod["spec"]["initContainers"]
        assert [x["name"] for x in inits] == [c.AGENT_CONTAINER] and inits[0]["restartPolicy"] == "Always"
        assert c.ENV_FR_DUMP_TEMP_FILE in env_of(pod["spec"]["containers"][0])
        codes.append(pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"])
        agent = pod["status"]["initContainerStatuses"][0]
        assert agent["name"] == c.AGENT_CONTAINER and "terminated" in agent["state"]  # stopped after the rank
    assert any(code != 0 for code in codes), codes

    assert cluster.store is not None
    s3 = cluster.store.client()
    prefix = f"frwatch/{ns}/skip/{job['metadata']['uid']}/0/"
    keys = [
        o["Key"] for o in s3.list_objects_v2(Bucket=cluster.store.bucket, Prefix=prefix).get("Contents", [])
    ]
    assert sorted(k for k in keys if "/ranks/" in k) == [f"{prefix}ranks/{r}.pickle" for r in range(4)], (
        f"{keys}\n{container_logs(cluster, ns, pods)}"
    )
    assert sorted(k for k in keys if "/pods/" in k) == sorted(
        f"{prefix}pods/{p['metadata']['name']}.json" for p in pods
    )
