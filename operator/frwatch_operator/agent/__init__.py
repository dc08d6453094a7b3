"""The frwatch agent: the per-pod native sidecar that gets every Flight Recorder dump of its pod into S3, and
the operator's side of talking to it.

``uploader``: find complete dumps in the shared folder and upload them (retrying, never losing one);
``control``: the authenticated HTTP endpoint where the operator asks the pod's ranks to dump;
``main``: ``frwatch agent`` wires both from the config; ``auth``: how both sides prove they hold the pod's
token (pure); ``client``: the operator's adapter that calls an agent (an adapter: the layers' bottom).
May import: the shared base and ``capture.agent_keys``; never the operator's domain or shell.
"""
