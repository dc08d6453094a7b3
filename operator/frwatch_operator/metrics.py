"""The operator's Prometheus metrics: names, meaning, and the few calls that move them.

Build one :class:`Metrics` at start (its own ``CollectorRegistry``, so tests and several operators in one
process never collide), call its methods where the events happen, and serve it with :func:`serve`
(``GET /metrics`` on the port the chart names: ``FRWATCH_OPERATOR_METRICS_PORT``, default 9090).

Labels are low-cardinality on purpose: namespaces, categories, phases and outcomes, never job, pod,
rank or node names (those are in the Incident and its Events). Every name is listed in :data:`DOCS`,
which ``docs/install.md`` shows and a test keeps in step.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server

PREFIX: Final = "frwatch_"

#: Incident phases an Incident is driven through, and the phases it ends in.
OPEN_PHASES: Final = ("Early", "Detected", "Collecting", "Analyzing")
END_PHASES: Final = ("Reported", "Failed", "Cleared")

#: Seconds buckets for "failure seen -> manifest written" and "failure seen -> verdict".
LATENCY_BUCKETS: Final = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)

#: name (as exposed, without the _total/_bucket suffixes) -> (type, labels, what it counts)
DOCS: Final[dict[str, tuple[str, tuple[str, ...], str]]] = {
    "frwatch_incidents_opened": (
        "counter",
        ("namespace",),
        "Incidents opened (one per captured failure of one job attempt).",
    ),
    "frwatch_incidents_active": (
        "gauge",
        ("phase",),
        "Incidents the operator is driving now, by phase (Early: live watch's finding while the job runs, "
        "Detected, Collecting, Analyzing).",
    ),
    "frwatch_incidents_finished": (
        "counter",
        ("phase",),
        "Incidents that reached an end phase: Reported, Failed (frwatch itself could not finish), or Cleared "
        "(live watch's Early finding not followed by a failure).",
    ),
    "frwatch_capture_latency_seconds": (
        "histogram",
        (),
        "Seconds from failure detection to the manifest being written (collection done or deadline).",
    ),
    "frwatch_verdict_latency_seconds": (
        "histogram",
        (),
        "Seconds from failure detection to the verdict being stored.",
    ),
    "frwatch_dumps_collected": ("counter", (), "Rank dumps found in the store when collection ended."),
    "frwatch_dumps_missing": (
        "counter",
        (),
        "Ranks whose dump was still missing when collection ended (crashed, deleted, or never dumped).",
    ),
    "frwatch_verdicts": (
        "counter",
        ("category", "hardware_class"),
        "Verdicts stored, by the analyzer's category and whether it points at hardware.",
    ),
    "frwatch_analyzer_jobs": (
        "counter",
        ("outcome",),
        "Analyzer Jobs that ended: succeeded, failed, or deadline (activeDeadlineSeconds hit).",
    ),
    "frwatch_cordons": (
        "counter",
        ("mode",),
        "Nodes cordoned: mode=applied (spec.unschedulable set) or dry_run (recorded only).",
    ),
    "frwatch_cordons_skipped": (
        "counter",
        ("reason",),
        "Suspect nodes not cordoned, by the policy's reason (opt-out, cap, breaker, software fault ...).",
    ),
    "frwatch_remediation_breaker_tripped": (
        "gauge",
        (),
        "1 while the remediation circuit breaker is tripped (no cordon until a person resets it), else 0.",
    ),
    "frwatch_same_bug_restarts": (
        "counter",
        ("action",),
        "Attempts that ended at the same earliest branch as the attempt before (the same bug twice), by what the "
        "repeat policy did: reported, dry-run (would suspend) or suspended.",
    ),
    "frwatch_gpu_hours_not_spent": (
        "counter",
        (),
        "GPU-hours a further attempt would have burnt (the job's GPUs x how long its attempts ran until they "
        "failed), counted when the repeat policy suspended the job.",
    ),
    "frwatch_notifications": (
        "counter",
        ("outcome",),
        "Notices to the webhook of notify.webhookUrl: sent (a 2xx), failed (every try refused, timed out or "
        "unreachable) or dropped (the queue was full).",
    ),
    "frwatch_webhook_admissions": (
        "counter",
        ("outcome",),
        "Pods seen by the webhook: injected, untouched (not opted in / opted out), or error (admitted as is).",
    ),
}


class Metrics:
    """Every frwatch metric on one registry. Thread-safe (prometheus_client's own locking)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry

        def doc(name: str) -> str:
            return DOCS[name][2]

        def labels(name: str) -> tuple[str, ...]:
            return DOCS[name][1]

        n = "frwatch_incidents_opened"
        self.incidents_opened = Counter(n, doc(n), labels(n), registry=r)
        n = "frwatch_incidents_active"
        self.incidents_active = Gauge(n, doc(n), labels(n), registry=r)
        n = "frwatch_incidents_finished"
        self.incidents_finished = Counter(n, doc(n), labels(n), registry=r)
        n = "frwatch_capture_latency_seconds"
        self.capture_latency = Histogram(n, doc(n), buckets=LATENCY_BUCKETS, registry=r)
        n = "frwatch_verdict_latency_seconds"
        self.verdict_latency = Histogram(n, doc(n), buckets=LATENCY_BUCKETS, registry=r)
        n = "frwatch_dumps_collected"
        self.dumps_collected = Counter(n, doc(n), registry=r)
        n = "frwatch_dumps_missing"
        self.dumps_missing = Counter(n, doc(n), registry=r)
        n = "frwatch_verdicts"
        self.verdicts = Counter(n, doc(n), labels(n), registry=r)
        n = "frwatch_analyzer_jobs"
        self.analyzer_jobs = Counter(n, doc(n), labels(n), registry=r)
        n = "frwatch_cordons"
        self.cordons = Counter(n, doc(n), labels(n), registry=r)
        n = "frwatch_cordons_skipped"
        self.cordons_skipped = Counter(n, doc(n), labels(n), registry=r)
        n = "frwatch_remediation_breaker_tripped"
        self.breaker_tripped = Gauge(n, doc(n), registry=r)
        n = "frwatch_same_bug_restarts"
        self.same_bug_restarts = Counter(n, doc(n), labels(n), registry=r)
        n = "frwatch_gpu_hours_not_spent"
        self.gpu_hours_not_spent = Counter(n, doc(n), registry=r)
        n = "frwatch_notifications"
        self.notifications = Counter(n, doc(n), labels(n), registry=r)
        n = "frwatch_webhook_admissions"
        self.webhook_admissions = Counter(n, doc(n), labels(n), registry=r)
        self.breaker_tripped.set(0)
        self.set_active({})
        self._phases: dict[str, str] = {}  #: open Incidents seen by this process: uid -> phase
        self._phases_lock = threading.Lock()

    # -- the calls the operator makes ------------------------------------------------------------------

    def incident_opened(self, namespace: str) -> None:
        """An Incident was created (phase Detected)."""
        self.incidents_opened.labels(namespace=namespace).inc()

    def set_active(self, counts_by_phase: dict[str, int]) -> None:
        """The open incidents now, by phase (recompute from the operator's view; missing phases are 0)."""
        for phase in OPEN_PHASES:
            self.incidents_active.labels(phase=phase).set(counts_by_phase.get(phase, 0))

    def incident_finished(self, phase: str) -> None:
        """An Incident reached ``Reported`` or ``Failed``."""
        self.incidents_finished.labels(phase=phase).inc()

    def incident_phase(self, uid: str, phase: str | None) -> None:
        """The phase of one Incident as the operator's watch sees it now (``None``: deleted; ``""``: just
        created, counted as Detected). Keeps ``incidents_active`` and counts ``incidents_finished`` when an
        Incident seen open reaches an end phase (one already finished when first seen, e.g. re-listed after
        a restart, is not counted again)."""
        phase = "Detected" if phase == "" else phase
        with self._phases_lock:
            before = self._phases.pop(uid, None)
            if phase in OPEN_PHASES:
                self._phases[uid] = phase
            elif phase in END_PHASES and before is not None:
                self.incident_finished(phase)
            counts = dict(Tally(self._phases.values()))
        self.set_active(counts)

    def collection_finished(self, seconds: float, dumped: int, missing: int) -> None:
        """The manifest was written ``seconds`` after detection, with this many dumps present and missing."""
        self.capture_latency.observe(max(seconds, 0.0))
        self.dumps_collected.inc(max(dumped, 0))
        self.dumps_missing.inc(max(missing, 0))

    def verdict_stored(self, category: str, hardware_class: bool, seconds_since_detection: float) -> None:
        """The analyzer's verdict was read and surfaced on the job."""
        self.verdicts.labels(category=category, hardware_class=str(hardware_class).lower()).inc()
        self.verdict_latency.observe(max(seconds_since_detection, 0.0))

    def analyzer_job_ended(self, outcome: str) -> None:
        """The analyzer Job ended: ``succeeded``, ``failed`` or ``deadline``."""
        self.analyzer_jobs.labels(outcome=outcome).inc()

    def cordoned(self, dry_run: bool) -> None:
        """One node cordoned (or, in dry-run, recorded as what would have been cordoned)."""
        self.cordons.labels(mode="dry_run" if dry_run else "applied").inc()

    def cordon_skipped(self, reason: str) -> None:
        """One suspect node left alone; ``reason`` is the policy's skip reason (a short enum value)."""
        self.cordons_skipped.labels(reason=reason).inc()

    def breaker_state(self, tripped: bool) -> None:
        """The circuit breaker's state after a decision or a reset."""
        self.breaker_tripped.set(1 if tripped else 0)

    def same_bug_again(self, action: str, gpu_hours_not_spent: float) -> None:
        """An attempt failed as the one before did; ``action`` is what the repeat policy did."""
        self.same_bug_restarts.labels(action=action).inc()
        if gpu_hours_not_spent > 0:
            self.gpu_hours_not_spent.inc(gpu_hours_not_spent)

    def notification(self, outcome: str) -> None:
        """One notice done: ``sent``, ``failed`` or ``dropped``."""
        self.notifications.labels(outcome=outcome).inc()

    def admission(self, outcome: str) -> None:
        """One pod through the webhook: ``injected``, ``untouched`` or ``error``."""
        self.webhook_admissions.labels(outcome=outcome).inc()

    def exposition(self) -> bytes:
        """The text format a scrape gets (for tests and a custom server)."""
        return bytes(generate_latest(self.registry))


def serve(metrics: Metrics, port: int, addr: str = "0.0.0.0") -> None:  # noqa: S104 - scraped in-cluster
    """Serve ``GET /metrics`` in a daemon thread (prometheus_client's server). ``port`` 0 disables it."""
    if port:
        start_http_server(port, addr=addr, registry=metrics.registry)
