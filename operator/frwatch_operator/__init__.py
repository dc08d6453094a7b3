"""frwatch operator: opt-in, Flight Recorder injection, dump capture, the verdict loop, remediation.

Layers, top to bottom (``[tool.importlinter]`` in pyproject.toml keeps them):

- shell: ``cli``, ``main``, ``handlers`` (the kopf functions), ``leader_election``;
- phases: ``analysis`` (the Analyzing phase and its Jobs), ``live`` (live watch);
- steps: ``remediation``, ``collect``;
- rules: ``verdict``, ``capture``, ``incident``, ``detect``, ``kinds``;
- adapters: ``kube``, ``store``, ``agent`` (the sidecar program and the operator's client of it);
- the shared base: ``config``, ``constants``, ``errors``, ``metrics``, ``notices``, ``resources``, ``times``,
  ``logsetup``, ``repeating``.

Each package's ``__init__`` says what it owns and what it may import; docs/design.md has the map.
"""
