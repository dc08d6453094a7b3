"""The frwatch agent: the per-pod native sidecar that gets every Flight Recorder dump of its pod into S3.

``uploader``: find complete dumps in the shared folder and upload them (retrying, never losing one);
``control``: the authenticated HTTP endpoint where the operator asks the pod's ranks to dump;
``main``: ``frwatch agent`` wires both from the config.
"""
