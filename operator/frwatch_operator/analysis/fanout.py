"""Fan-out of an analysis over many ranks: how many map pods, and their Indexed Job. Pure: builds a dict.

At or below ``analyzer.ranks_per_pod`` ranks (or with it 0: off) the analysis is the one analyzer Job of
:mod:`.analyzer_job`. Above it, the Analyzing phase first runs a **map** Job: a batch/v1 Job with
``completionMode: Indexed`` and ``completions = parallelism = N`` shards, ``N = ceil(ranks / ranks_per_pod)``
(at most :data:`MAX_SHARDS`). Index ``I`` runs ``frwatch analyze <evidence> --map-shard I/N``
(``JOB_COMPLETION_INDEX``, which the Job controller sets in every container, expanded by the kubelet in the
command's ``$(...)``): it summarises the dumps of ranks ``r % N == I`` that have no valid summary into
``summaries/<rank>.json``. Then the **reduce** Job (the usual analyzer Job) reads those summaries. Kubernetes
schedules and retries the map pods, each index on its own: ``backoffLimitPerIndex`` is
``max(1, analyzer.backoff_limit)`` (GA in Kubernetes 1.33; the pods' ``restartPolicy`` is ``Never``, as the
field needs), so a map pod that fails is retried alone and a poison shard fails only its index, not the
others' budget; ``maxFailedIndexes`` (:func:`max_failed_indexes`) ends the Job early when so many indexes
failed that the fault is not one shard (the store, the image). ``backoffLimit`` is ``N x (per index + 1)``,
what every index may spend: it never fires first where the per-index limit is honoured and bounds the Job
where it is not. A failed index costs no rank: the reduce decodes the dumps of ranks without a valid summary
and its verdict says how many were read so. The map Job has the
analyzer Job's pod (same image, credentials, security context, resources, deadline) and labels, a name of
its own (``...-map``) and the component label ``analyzer-map``.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from frwatch_analyzers.store.layout import RootUrl
from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzer_job import (
    AnalyzerRun,
    analysis_budget_seconds,
    analyzer_job,
    analyzer_job_ref,
    worker_count,
)
from frwatch_operator.config import AnalyzerSettings, S3Settings
from frwatch_operator.incident.record import IncidentIdentity
from frwatch_operator.kube.names import fit_name

#: Map pods of one analysis at most (each is a pod; 131,072 ranks at 1024 a pod are 128).
MAX_SHARDS = 1024
#: The map Job's name is the analyzer Job's plus this.
MAP_SUFFIX = "-map"
#: The Job controller's variable holding a pod's index (Indexed Jobs), expanded by the kubelet.
COMPLETION_INDEX = "$(JOB_COMPLETION_INDEX)"


def max_failed_indexes(shards: int) -> int:
    """Failed indexes the map Job tolerates before it stops: half the shards (at least 1). Past that the
    fault is common to the pods, and the reduce decodes the dumps of the shards that did not finish."""
    return max(1, shards // 2)


def shard_count(ranks: int | None, ranks_per_pod: int) -> int:
    """Map pods for ``ranks`` ranks: 1 (no fan-out: the single analyzer Job) when the rank count is unknown,
    ``ranks_per_pod`` is 0 (off), or the ranks fit in one pod; else ``ceil(ranks / ranks_per_pod)``, at most
    :data:`MAX_SHARDS`."""
    if not ranks or ranks_per_pod <= 0 or ranks <= ranks_per_pod:
        return 1
    return min(MAX_SHARDS, math.ceil(ranks / ranks_per_pod))


def map_job_ref(incident: IncidentIdentity, settings: AnalyzerSettings) -> tuple[str, str]:
    """(namespace, name) of the incident's map Job: the analyzer Job's name plus ``-map``."""
    ns, name = analyzer_job_ref(incident, settings)
    return ns, fit_name(name[: 63 - len(MAP_SUFFIX)].rstrip("-.") + MAP_SUFFIX)


def map_command(evidence_url: str, shards: int, jobs: int, budget_seconds: int) -> list[str]:
    """The map container's command (the Job controller gives each pod its index)."""
    return [
        "frwatch", "analyze", str(RootUrl.parse(evidence_url)),
        "--map-shard", f"{COMPLETION_INDEX}/{shards}",
        "--jobs", str(jobs),
        "--deadline-seconds", str(budget_seconds),
    ]  # fmt: skip


def map_job(
    incident: IncidentIdentity,
    *,
    evidence_url: str,
    s3: S3Settings,
    run: AnalyzerRun,
    shards: int,
    settings: AnalyzerSettings | None = None,
) -> dict[str, Any]:
    """The Indexed batch/v1 Job of the map step: ``shards`` pods, index I summarising shard I of ``shards``."""
    if shards < 2:
        raise ValueError(f"a map Job needs 2 shards or more, not {shards}")
    settings = settings or AnalyzerSettings()
    job = copy.deepcopy(analyzer_job(incident, evidence_url=evidence_url, s3=s3, run=run, settings=settings))
    _, name = map_job_ref(incident, settings)
    job["metadata"]["name"] = name
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        labels[c.LABEL_COMPONENT] = "analyzer-map"
    spec = job["spec"]
    spec["completionMode"] = "Indexed"
    spec["completions"] = shards
    spec["parallelism"] = shards
    per_index = max(1, run.backoff_limit)
    spec["backoffLimitPerIndex"] = per_index
    spec["maxFailedIndexes"] = max_failed_indexes(shards)
    spec["backoffLimit"] = shards * (per_index + 1)
    (container,) = spec["template"]["spec"]["containers"]
    container["command"] = map_command(
        evidence_url, shards, worker_count(run.resources), analysis_budget_seconds(run.deadline_seconds)
    )
    return job


def failed_shards(job: dict[str, Any]) -> str:
    """What the map Job's ``status.failedIndexes`` means for the reduce ("" when none failed): those shards'
    ranks have no summary from it, and the reduce decodes their dumps."""
    failed = str(((job.get("status") or {}).get("failedIndexes")) or "")[:200]
    shards = (job.get("spec") or {}).get("completions")
    if not failed:
        return ""
    return (
        f"map index(es) {failed} of {shards} failed: the reduce decodes the dumps of their ranks"
        f" (rank % {shards} in {failed})"
    )

