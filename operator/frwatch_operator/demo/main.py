"""`frwatch demo`: the README's first command.

``--local``: a real multi-rank torch job that hangs, its dumps and the analysis, no cluster.
"""

from __future__ import annotations

import argparse

from . import local


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="frwatch demo", description=__doc__)
    p.add_argument("--local", action="store_true", default=True, help="run the job as local processes")
    local.add_arguments(p)
    args = p.parse_args(argv)
    return local.run(args)
