"""The verdict loop: the analyzer Job, the verdict on the job (annotations, Events, Incident status),
and the policy-gated cordoning of suspect nodes (issue 4).

The Incident's timer (:mod:`frwatch_operator.handlers.incident_phases`) calls :func:`start_analysis` when
collection ends and :func:`advance_analysis` on every later pass while the Incident is ``Analyzing``; both
return a :class:`Step` (a status merge patch and what comes next).
Kubernetes is reached through :class:`frwatch_operator.kube.Kube` (the ``KubeActions`` port), S3 through
:class:`frwatch_operator.s3store.S3Store`.
"""

from frwatch_operator.verdictloop.analysis_steps import Step
from frwatch_operator.verdictloop.analyzing import AnalysisRequest, advance_analysis, start_analysis
from frwatch_operator.verdictloop.ports import KubeActions

__all__ = ["AnalysisRequest", "KubeActions", "Step", "advance_analysis", "start_analysis"]
