"""One line, one ``write``: the ranks of a pod share its stdout, so a line must reach it whole.

torchrun's ranks inherit the pod's stdout (one file, opened with ``O_APPEND``), and Kubeflow's pods run with
``PYTHONUNBUFFERED=1``. Unbuffered, ``print(line)`` is two writes, the text and then its ``"\\n"``, and
another rank's line can land between them: ``<rank 1's line><rank 0's line>\\n\\n``, one line naming two
ranks and none starting the next (measured with ``strace``; seen under load on a pod of 2 torchrun ranks).
A single write of the text with its newline is appended whole.
"""

from __future__ import annotations

import sys
from typing import TextIO


def say(text: str, stream: TextIO | None = None) -> None:
    """Write ``text`` and its newline in one call, then flush (``sys.stdout`` by default)."""
    out = sys.stdout if stream is None else stream
    out.write(text + "\n")
    out.flush()
