"""frwatch operator: opt-in, Flight Recorder injection, dump capture, the verdict loop, remediation.

Layers, top to bottom (``[tool.importlinter]`` in pyproject.toml keeps them):

- the shell: ``main``, ``handlers`` (the kopf functions), ``webhook`` (the admission server), ``cli``'s commands;
- the Analyzing phase: ``analysis``; then ``remediation``; then ``live``, ``verdict``, ``collect``;
- the adapters: ``agent`` (the sidecar program and the operator's client of it), ``store``, ``kube``,
  ``leader_election``;
- the pure rules, which may import one another: ``capture``, ``incident``, ``detect``, ``kinds``, ``notices``;
- the shared base: ``cli`` (its parser), ``config`` (with ``config_agent``, ``config_verdict_loop``),
  ``constants``, ``errors``, ``metrics``, ``logsetup``, ``repeating``, ``resources``, ``times``.

Each package's ``__init__`` says what it owns and what it may import; docs/design.md has the map.
"""
