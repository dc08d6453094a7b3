"""The operator's stores: the object store (``s3``: the only boto3 user on the operator side) and its own
namespace's Secrets (``own_secrets``; the agents' key ring ``agent_key_ring`` and the webhook's certificate
Secret ``webhook_cert_secret`` on top of it). The store's key layout (which object is where) is the analyzer's
``frwatch_analyzers.layout``.

Adapters: may import the shared base, ``kube.api_errors`` and the pure rules they persist (``capture``); never
the domain above them nor the shell.
"""
