"""The hook from collection (issue 3) to analysis (issue 4): what is handed over, and how it is found.

When collection ends, the operator calls ``frwatch_operator.verdictloop.start_analysis(request, config)``
once per Incident (again only if the operator restarted before recording the hand-off, so it must be
idempotent, e.g. a Job with a deterministic name and create-409-is-success). The verdict loop owns the
Incident from ``Analyzing`` on. Until that function exists, the Incident stays in ``Analyzing`` with the
message :data:`NOT_WIRED`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from frwatch_operator.config import Config
from frwatch_operator.optin import CaptureSettings
from frwatch_operator.resources import JobRef

HOOK_MODULE = "frwatch_operator.verdictloop"
HOOK_NAME = "start_analysis"
NOT_WIRED = "analysis not wired yet"
#: Incident condition recording the hand-off (True: start_analysis accepted it; False: not wired).
CONDITION = "AnalysisRequested"
#: The hand-off's reason when collection ended ``EveryRankExited``: no dump at all, every rank's pod failed.
#: start_analysis is not called (an analyzer Job would have nothing to align); the verdict loop reports the
#: exits the cluster showed instead.
NOTHING_TO_ALIGN = "NothingToAlign"
NOTHING_TO_ALIGN_MESSAGE = (
    "every rank's pod ended with a failed exit before any dump: no analyzer Job (nothing to align); the "
    "verdict is the exits the cluster showed"
)


@dataclass(frozen=True)
class AnalysisRequest:
    """Everything the verdict loop needs to analyse one job attempt."""

    namespace: str
    incident: str  #: the Incident's name (same namespace)
    incident_uid: str
    job: JobRef
    attempt: str
    storage_url: str  #: s3://bucket/<attempt root>: ranks/, pods/, manifest.json
    manifest_url: str  #: s3://bucket/<attempt root>/manifest.json
    settings: CaptureSettings  #: the job's effective settings (analyzer image, resources, remediation)


StartAnalysis = Callable[[AnalysisRequest, Config], object]


def find_start_analysis() -> StartAnalysis | None:
    """The verdict loop's entry point, or None while it is not there."""
    try:
        module = importlib.import_module(HOOK_MODULE)
    except ImportError:
        return None
    fn = getattr(module, HOOK_NAME, None)
    return fn if callable(fn) else None
