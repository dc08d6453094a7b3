"""Remediation: what a verdict's suspect nodes get. ``cordon_policy`` (which nodes to cordon and why not
the others: the decision), ``breaker`` (the circuit breaker), ``corroboration`` (nominate, corroborate,
then act; with ``fleet_memory`` and ``node_confirmation``), ``probe_job``/``probe_step`` (the health-check Job
on a nominated node), ``apply`` (carry the policy out: read, plan, write, tell), ``nvsentinel`` (the hand-off
to NVIDIA NVSentinel instead of a cordon).

May import: the shared base, ``incident``, ``verdict``, ``collect.node_evidence``, ``detect.placement``,
``kube.ports``; never the shell.
"""
