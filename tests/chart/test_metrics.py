"""The operator's Prometheus metrics: every documented metric is exposed, the calls move them, and a real
scrape over HTTP sees them; docs/install.md lists every name."""

from __future__ import annotations

import urllib.request

from chart_helpers import ROOT

from frwatch_dev.ports import free_port
from frwatch_operator.metrics import DOCS, Metrics, serve


def test_every_documented_metric_is_exposed_with_help_and_type() -> None:
    text = Metrics().exposition().decode()
    for name, (kind, _, _) in DOCS.items():
        exposed = f"{name}_total" if kind == "counter" else name
        assert f"# TYPE {exposed} {kind}" in text, name
        assert f"# HELP {exposed} " in text, name


def test_calls_move_the_metrics() -> None:
    m = Metrics()
    m.incident_opened("team-a")
    m.set_active({"Collecting": 2})
    m.collection_finished(12.5, dumped=7, missing=1)
    m.verdict_stored("gpu_hang", True, 40.0)
    m.analyzer_job_ended("succeeded")
    m.cordoned(dry_run=True)
    m.cordon_skipped("breaker")
    m.breaker_state(True)
    m.admission("injected")
    m.incident_finished("Reported")
    text = m.exposition().decode()
    for line in (
        'frwatch_incidents_opened_total{namespace="team-a"} 1.0',
        'frwatch_incidents_active{phase="Collecting"} 2.0',
        'frwatch_incidents_active{phase="Detected"} 0.0',
        "frwatch_dumps_collected_total 7.0",
        "frwatch_dumps_missing_total 1.0",
        "frwatch_capture_latency_seconds_count 1.0",
        'frwatch_capture_latency_seconds_bucket{le="20.0"} 1.0',
        'frwatch_verdicts_total{category="gpu_hang",hardware_class="true"} 1.0',
        'frwatch_cordons_total{mode="dry_run"} 1.0',
        'frwatch_cordons_skipped_total{reason="breaker"} 1.0',
        "frwatch_remediation_breaker_tripped 1.0",
        'frwatch_webhook_admissions_total{outcome="injected"} 1.0',
        'frwatch_incidents_finished_total{phase="Reported"} 1.0',
        'frwatch_analyzer_jobs_total{outcome="succeeded"} 1.0',
    ):
        assert line in text, line


def test_two_operators_in_one_process_do_not_collide() -> None:
    a, b = Metrics(), Metrics()
    a.incident_opened("x")
    assert b"frwatch_incidents_opened_total{" not in b.exposition()


def test_scrape_over_http() -> None:
    m = Metrics()
    m.breaker_state(True)
    port = free_port()
    serve(m, port, addr="127.0.0.1")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    assert "frwatch_remediation_breaker_tripped 1.0" in body


def test_install_doc_lists_every_metric() -> None:
    doc = (ROOT / "docs" / "install.md").read_text()
    for name in DOCS:
        assert f"`{name}" in doc, f"docs/install.md does not list {name}"


def test_incident_phases_keep_the_active_gauge_and_count_each_finish_once() -> None:
    m = Metrics()
    for phase in ("", "Detected", "Collecting", "Analyzing"):
        m.incident_phase("a", phase)
    m.incident_phase("b", "Collecting")
    text = m.exposition().decode()
    assert 'frwatch_incidents_active{phase="Analyzing"} 1.0' in text
    assert 'frwatch_incidents_active{phase="Collecting"} 1.0' in text
    m.incident_phase("a", "Reported")
    m.incident_phase("a", "Reported")  # the same end seen again (a later event): counted once
    m.incident_phase("b", None)  # deleted while collecting: not a finish
    m.incident_phase("c", "Failed")  # already ended when first seen (a restart's re-listing): not counted
    text = m.exposition().decode()
    assert 'frwatch_incidents_finished_total{phase="Reported"} 1.0' in text
    assert 'frwatch_incidents_finished_total{phase="Failed"}' not in text
    for phase in ("Detected", "Collecting", "Analyzing"):
        assert f'frwatch_incidents_active{{phase="{phase}"}} 0.0' in text
