"""The Incident: one per job attempt. ``record`` (an Incident as typed data), ``naming`` (its
deterministic name and the body to create), ``observed_facts`` (what the cluster showed, ``status.observed``).

Pure: may import the shared base and ``kinds``; no kopf, kubernetes, boto3, nor adapters.
"""
