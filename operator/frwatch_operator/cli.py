"""The `frwatch` command: one entry point, a subcommand per activity.

Each subcommand's module is imported only when it runs, so `frwatch analyze` needs none of the
operator's dependencies.
"""

from __future__ import annotations

import importlib
import sys

#: subcommand -> (module with a ``main(argv) -> int``, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("frwatch_analyzers.cli", "analyze Flight Recorder dumps (a folder or s3://) and print a verdict"),
    "agent": ("frwatch_operator.agent.main", "the per-pod sidecar: upload dumps to S3, dump on demand"),
    "operator": ("frwatch_operator.main", "run the operator (kopf) and its admission webhook"),
    "demo": ("frwatch_operator.demo.main", "run a real multi-rank torch job that hangs, and diagnose it"),
}


def _usage() -> str:
    lines = ["usage: frwatch SUBCOMMAND [ARGS...]", "", "subcommands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"frwatch: unknown subcommand {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    code: int = module.main(rest)
    return code


if __name__ == "__main__":
    sys.exit(main())
