"""Which per-entry loop the summarizer runs: the compiled common case (``_fastscan.c``) or Python alone.

The compiled step handles an entry only when it is the case the Python loop's fast path handles (see
``_fastscan.c``) and returns at the first entry that is anything else; the Python loop handles that one
with its general code and calls the step again from the next. The creation-time column and the detail of
the entries a summary keeps are read in C the same way (plain int64s, else the Python reading). Both give the same summary field for field
(tests/analyzer/test_fastscan.py). The extension is an optional build (setup.py): where no C compiler was
found the analyzer runs the Python loop alone, slower, with the same results.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Set to 1 to run the pure-Python loop even where the extension is built (the tests run both).
ENV_PURE_PYTHON = "FRWATCH_PURE_PYTHON"
#: Set to 1 where the extension must have been built (scripts/test sets it when a C compiler and Python's
#: headers are there): the suite then fails instead of quietly testing only the Python loop.
ENV_REQUIRE_COMPILED = "FRWATCH_REQUIRE_COMPILED"


@dataclass(frozen=True)
class Compiled:
    """The extension's two functions (see _fastscan.c)."""

    step: Callable[[tuple[Any, ...], int, bool, int], tuple[int, bool, int]]
    created: Callable[[list[Any]], bytes | None]
    detail: Callable[[dict[str, Any], dict[str, int]], tuple[int, int, bool | None, int, int, int] | None]


def _load() -> Compiled | None:
    try:
        from . import _fastscan
    except ImportError:  # built without a compiler: the Python loop alone
        return None
    return Compiled(step=_fastscan.step, created=_fastscan.created, detail=_fastscan.detail)


#: The extension, or None where it was not built.
COMPILED: Compiled | None = _load()
#: What the summarizer uses by default: COMPILED unless FRWATCH_PURE_PYTHON=1.
DEFAULT: Compiled | None = None if os.environ.get(ENV_PURE_PYTHON, "") == "1" else COMPILED
