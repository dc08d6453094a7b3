"""frwatch live watch: Python runs this at start-up because frwatch's webhook appended its folder to
``PYTHONPATH``. It starts ``frwatch_live_boot`` (which does nothing unless ``FRWATCH_LIVE_DIR`` is set),
then runs the ``sitecustomize`` this one shadows (the next one on ``sys.path``), as Python would have.
Nothing here may raise: an error is one line on stderr, and start-up goes on.
"""

from __future__ import annotations


def _frwatch_live() -> None:
    import sys

    try:
        import frwatch_live_boot  # type: ignore[import-not-found]  # beside this file at run time

        frwatch_live_boot.start()
    except Exception as exc:
        sys.stderr.write(f"frwatch-live: live watch is off for this process: {type(exc).__name__}: {exc}\n")


def _chain() -> None:
    """Run the sitecustomize this one shadows, as site.py would have (its errors reported as site.py does)."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    try:
        here = os.path.dirname(os.path.abspath(__file__))
        rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None or spec.origin == __file__:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.stderr.write(
            f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}\n"
        )


_frwatch_live()
_chain()
