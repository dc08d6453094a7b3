"""`kubectl get incidents -o wide` says each thing once (issue 26): the verdict's short line in one column,
and the Message column adds what it does not (the cordon plan's outcome, or why frwatch failed).

The columns are the generated CRD's, evaluated the way the API server's table printer does (the local
cluster's JSONPath) on statuses the verdict loop writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from chart_helpers import crd

from frwatch_analyzers.verdict import Category, CulpritKind, Status, Verdict
from frwatch_dev.localcluster.tables import jsonpath
from frwatch_operator.resources import ConditionReason
from frwatch_operator.verdict.report import failed_status, remediated_condition, reported_status

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SHORT = "rank 3 GPU-hung: never started all_reduce #41 that its peers did"
CORDONED = "cordoned node-b (rank 3's node; breaker 1 of 3 this hour)"


def wide_row(status: dict[str, Any]) -> dict[str, str]:
    """Every printer column of the Incident CRD (the wide view), as its cell text ("" when empty)."""
    body = {
        "metadata": {"name": "llama-0", "creationTimestamp": "2026-05-01T11:00:00Z"},
        "spec": {"jobRef": {"name": "llama"}, "attempt": "0"},
        "status": status,
    }
    row = {}
    for col in crd("incident")["spec"]["versions"][0]["additionalPrinterColumns"]:
        values = jsonpath(body, col["jsonPath"])
        row[col["name"]] = ",".join(str(v) for v in values)
    return row


def gpu_hang() -> Verdict:
    return Verdict(
        status=Status.problem, category=Category.gpu_hang, hardware_class=True, culprit_ranks=[3],
        headline="rank 3 never started all_reduce #41 while its peers did: a GPU kernel hung",
        culprit_kind=CulpritKind.gpu_hang, short=SHORT, suspect_nodes=["node-b"],
    )  # fmt: skip


def test_a_reported_incident_shows_its_verdict_once_and_what_frwatch_did() -> None:
    remediation = remediated_condition("enforce", CORDONED, cordoned=True, now=NOW)
    status = reported_status(gpu_hang(), report="s3://b/r/report.txt", now=NOW, conditions=[], remediation=remediation)
    row = wide_row(status)
    assert [name for name, cell in row.items() if SHORT in cell] == ["Message"], row
    assert CORDONED in row["Message"], row
    assert row["Category"] == "gpu_hang" and row["Suspects"], row


def test_a_failed_incident_shows_why_once() -> None:
    why = "analyzer Job llama-0-analyze was gone when frwatch looked, and s3://b/r/verdict.json does not exist"
    status = failed_status(ConditionReason.ANALYZER_JOB_GONE, why, now=NOW, conditions=[])
    row = wide_row(status)
    assert [name for name, cell in row.items() if why in cell] == ["Message"], row
    assert row["Phase"] == "Failed", row
