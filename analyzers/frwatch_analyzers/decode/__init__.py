"""Untrusted bytes made into Python values, safely: the refusing unpickler and JSON reader (``safe_load``),
type-strict field reading (``fields``), the compiled per-entry loop (``fastscan``, ``_fastscan.c``), worker
processes with hard limits (``isolation``) and the post-mortem of a file that killed its worker
(``pickle_scan``).

May import: ``base`` and ``verdict``. Beside ``store`` (neither imports the other)."""
