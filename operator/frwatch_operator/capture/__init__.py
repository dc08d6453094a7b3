"""Capture: getting Flight Recorder onto a training pod (opt-in, the webhook and its patch, the agent sidecar,
torch env names, the agents' tokens, the webhook's certificate rules, pods that run without capture).

Owns the admission decision and the JSON patch (``webhook_patch``), the sidecar container (``sidecar``) and
live watch's part of the patch (``live_patch``). Pure except ``webhook`` (the aiohttp/kopf admission server).
May import: the shared base (``config``, ``constants``, ``errors``, ``resources``, ``times``), ``kinds``,
``live.policy``. Not ``kube``, ``store`` nor the shell (``handlers``, ``main``).
"""
