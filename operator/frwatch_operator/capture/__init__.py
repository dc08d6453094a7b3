"""Capture: getting Flight Recorder onto a training pod. Opt-in (``optin``), the pod patch the webhook answers
with (``webhook_patch``; live watch's part in ``live_patch``), the agent sidecar (``sidecar``), which torch env
names a container gets (``torch_env_names``), the agents' tokens (``agent_keys``), the webhook certificate's
rules (``webhook_tls``, ``webhook_certs``), and pods that run without capture (``gaps``).

Pure rules (the admission server itself is ``frwatch_operator.webhook``, in the shell). May import the shared
base, ``kinds``, ``detect``, ``incident``; no kopf, kubernetes, boto3, aiohttp, nor the adapters.
"""
