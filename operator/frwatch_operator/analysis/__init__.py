"""The Analyzing phase of an Incident: the analyzer Job (``analyzer_job``), the fan-out over many ranks
(``fanout``, ``jobs``), where a Job stands (``job_outcome``, ``job_reading``), the source step
(``source_step``, ``source_job``, ``source_copier``, ``source_handover``), and the phase driver
(``analyzing``: :func:`~frwatch_operator.analysis.analyzing.start_analysis` when collection ends,
:func:`~frwatch_operator.analysis.analyzing.advance_analysis` on every later pass; both return a
:class:`~frwatch_operator.analysis.steps.Step`).

May import: the shared base, ``incident``, ``verdict``, ``remediation``, ``kube.ports`` and the store's type;
never the shell (``handlers``).
"""
