"""Where people look, a verdict says its kind in words, a short line that fits `kubectl describe`, where the
culprits ran (suspect nodes only for a hardware finding), and next steps that fit the kind; a crash before any
dump is said as one, from the exits the cluster showed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from vl_builders import hardware_verdict

from frwatch_analyzers.verdict import Category, CulpritKind, Status, Verdict
from frwatch_operator import constants as c
from frwatch_operator.resources import ContainerExit, IncidentObserved, IncidentStatus, ObservedPod
from frwatch_operator.verdict.exit_verdict import exit_verdict
from frwatch_operator.verdict.report import job_annotations, reported_status, verdict_events
from frwatch_operator.verdict.words import kind_of, words

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
HEADLINE = (
    "rank 1 never enqueued all_reduce #4 in default_pg that ranks 0,2,3 wait in; it dumped while idle outside "
    "any collective: stuck on the CPU side (data loading, a host-side loop, a lock)"
)


def observed(*pods: tuple[str, str, str, list[ContainerExit]]) -> IncidentObserved:
    return IncidentObserved(
        pods=[ObservedPod(name=n, node=node, ranks=ranks, exits=exits) for n, node, ranks, exits in pods],
        nodes=sorted({node for _, node, _, _ in pods}),
    )


FOUR = observed(
    ("llama-master-0", "node-a", "0", []), ("llama-worker-0", "node-b", "1", []),
    ("llama-worker-1", "node-a", "2", []), ("llama-worker-2", "node-b", "3", []),
)  # fmt: skip


def cpu_stuck(**changes: object) -> Verdict:
    v = Verdict(
        status=Status.problem, category=Category.missing_rank, headline=HEADLINE, culprit_ranks=[1],
        culprit_detail="stuck on the CPU side", culprit_kind=CulpritKind.cpu_stuck,
        short="rank 1 CPU-stuck: never enqueued all_reduce #4 (default_pg) that the others wait in",
        suspect_nodes=["node-b"],
        next_steps=["py-spy dump --pid <pid> on rank 1", "log a per-rank step counter"],
    )  # fmt: skip
    return v.model_copy(update=changes)


def test_the_annotation_is_the_short_line_and_the_event_the_full_one() -> None:
    v = cpu_stuck()
    ann = job_annotations(v, incident="llama-0", report="s3://b/r", observed=FOUR)
    assert ann[c.ANN_VERDICT] == v.short and len(v.short) <= 120
    diagnosed = verdict_events(v, incident="llama-0", report="s3://b/r", observed=FOUR)[0]
    assert HEADLINE in diagnosed.message and diagnosed.message.startswith("CPU-stuck: ")


def test_an_older_verdict_without_short_gets_its_headline_cut_to_fit_with_its_kind() -> None:
    v = cpu_stuck(short="", culprit_kind=None)
    said = words(v, FOUR)
    assert said.kind is CulpritKind.cpu_stuck and said.kind_text == "CPU-stuck"
    assert len(said.short) <= 120 and said.short.startswith("CPU-stuck: rank 1 never enqueued")
    assert said.short.endswith("...")


def test_a_software_verdict_names_no_suspect_node_but_where_the_culprit_ran() -> None:
    v = cpu_stuck()
    ann = job_annotations(v, incident="llama-0", report="s3://b/r", observed=FOUR)
    assert ann[c.ANN_SUSPECT_NODES] is None and ann[c.ANN_SUSPECT_RANKS] == "1"
    events = {e.reason.value: e.message for e in verdict_events(v, incident="i", report="r", observed=FOUR)}
    assert "SuspectsNamed" not in events
    assert events["CulpritsNamed"] == (
        "Culprits: rank 1 (CPU-stuck); rank 1 ran on node node-b. A software finding: no node is suspect"
    )
    assert events["NextSteps"].startswith("Next steps (CPU-stuck): 1) py-spy dump")
    status = IncidentStatus.model_validate(
        reported_status(v, report="s3://b/r", now=NOW, conditions=[], observed=FOUR, namespace="team")
    )
    assert status.suspect_nodes == [] and status.suspects == ""  # the Suspects column: no node for software
    assert status.verdict is not None
    assert (status.verdict.short, status.verdict.kind, status.verdict.kind_text) == (
        v.short, "cpu_stuck", "CPU-stuck"
    )
    assert status.verdict.headline == HEADLINE and status.verdict.ran_on == "rank 1 ran on node node-b"
    assert status.verdict.next_steps == v.next_steps and status.verdict.report_url == "s3://b/r"


def test_a_hardware_verdict_names_suspect_nodes() -> None:
    v = hardware_verdict("node-b", ranks=[1])
    ann = job_annotations(v, incident="i", report="r", observed=FOUR)
    assert ann[c.ANN_SUSPECT_NODES] == "node-b"
    events = {e.reason.value: e.message for e in verdict_events(v, incident="i", report="r", observed=FOUR)}
    assert events["SuspectsNamed"] == "Suspects: rank 1 (stuck) on node node-b" and "CulpritsNamed" not in events
    status = reported_status(v, report="r", now=NOW, conditions=[], observed=FOUR)
    assert status["suspectNodes"] == ["node-b"] and status["suspects"] == "rank 1 on node-b"


@pytest.mark.parametrize(
    ("category", "detail", "kind"),
    [
        (Category.gpu_hang, "", CulpritKind.gpu_hang),
        (Category.network_hang, "", CulpritKind.network_hang),
        (Category.desync, "", CulpritKind.mismatched_call),
        (Category.missing_rank, "stuck on the CPU side", CulpritKind.cpu_stuck),
        (Category.missing_rank, "took another path", CulpritKind.took_another_path),
        (Category.missing_rank, "crashed (no dump)", CulpritKind.crashed),
        (Category.missing_rank, "issued an extra all_reduce", CulpritKind.extra_call),
        (Category.missing_rank, "", CulpritKind.unknown),
    ],
)
def test_the_kind_of_an_older_verdict_comes_from_its_category_and_detail(
    category: Category, detail: str, kind: CulpritKind
) -> None:
    v = Verdict(status=Status.problem, category=category, headline="h", culprit_ranks=[2], culprit_detail=detail)
    assert kind_of(v) is kind


def test_a_crashed_culprit_says_its_exit_and_where_to_read_why() -> None:
    seen = observed(
        ("llama-master-0", "node-a", "0", []),
        ("llama-worker-0", "node-b", "1", [ContainerExit(container="pytorch", exit_code=1, reason="Error")]),
    )
    v = Verdict(
        status=Status.problem, category=Category.missing_rank, headline="rank 1 left no dump while rank 0 waits",
        culprit_ranks=[1], culprit_kind=CulpritKind.crashed, short="rank 1 crashed (no dump)",
        next_steps=["Read the crashed rank's last log lines."],
    )  # fmt: skip
    said = words(v, seen, "team")
    assert said.kind_text == "crashed (exit 1, Error)" and said.where == "rank 1 ran on node node-b"
    assert said.next_steps[0] == "Read why rank 1 ended: kubectl logs -n team llama-worker-0 -c pytorch"


def exited(code: int, reason: str = "Error", at: str = "2026-05-01T12:00:01Z") -> list[ContainerExit]:
    return [ContainerExit(container="pytorch", exit_code=code, reason=reason, finished_at=at)]


def test_every_rank_exiting_before_any_dump_is_said_as_a_crash_with_its_exit() -> None:
    seen = observed(
        ("j-master-0", "node-a", "0", exited(1, at="2026-05-01T12:00:02Z")),
        ("j-worker-0", "node-b", "1", exited(1, at="2026-05-01T12:00:01Z")),
        ("j-worker-1", "node-a", "2", exited(1, at="2026-05-01T12:00:02Z")),
        ("j-worker-2", "node-b", "3", exited(1, at="2026-05-01T12:00:03Z")),
    )
    v = exit_verdict(seen, 4, "team")
    assert v is not None
    assert v.short == "every rank exited 1 (Error) before any collective hung"
    assert v.culprit_kind is CulpritKind.crashed and v.culprit_ranks == [0, 1, 2, 3] and not v.hardware_class
    assert "rank 1 (pod j-worker-0) exited 1 (Error) first, at 2026-05-01T12:00:01Z" in v.summary
    assert v.next_steps[0].endswith("kubectl logs -n team j-worker-0 -c pytorch")
    assert not any("TORCH_FR_BUFFER_SIZE" in s or "TORCH_NCCL" in s for s in v.next_steps)
    assert "program's own error" in v.next_steps[1]


def test_mixed_exits_are_each_named_and_an_oom_kill_says_so() -> None:
    seen = observed(
        ("j-master-0", "node-a", "0-1", exited(1)), ("j-worker-0", "node-b", "2-3", exited(137, "OOMKilled"))
    )
    v = exit_verdict(seen, 4, "team")
    assert v is not None
    assert v.short == (
        "every rank exited before any collective hung: ranks 0-1 exited 1 (Error); ranks 2-3 were OOMKilled (exit 137)"
    )


@pytest.mark.parametrize(
    "seen",
    [
        None,
        observed(("j-master-0", "node-a", "0", exited(1))),  # rank 1's pod never seen: no verdict from exits
        observed(("j-master-0", "node-a", "0", exited(1)), ("j-worker-0", "node-b", "1", exited(0, "Completed"))),
    ],
)
def test_no_verdict_from_exits_unless_every_rank_failed(seen: IncidentObserved | None) -> None:
    assert exit_verdict(seen, 2, "team") is None
