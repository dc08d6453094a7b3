"""Detection: pod status and the job's own condition -> whether a training attempt failed
(``pod_failure``, ``job_failure``), which nodes a tenant pinned (``placement``), and the operator's memory of
what it has seen (``observations``).

Pure: may import the shared base, ``incident.naming``, ``kinds``; no kopf, kubernetes, boto3, nor adapters.
"""
