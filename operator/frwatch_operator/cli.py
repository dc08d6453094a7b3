"""The `frwatch` command: one entry point, a subcommand per activity.

Each subcommand's module is imported only when it runs, so `frwatch analyze` needs none of the
operator's dependencies.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

#: subcommand -> (module with a ``main(argv) -> int``, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "analyze": (
        "frwatch_analyzers.cli",
        "analyze Flight Recorder dumps (a folder or s3://) and print a verdict",
    ),
    "agent": ("frwatch_operator.agent.main", "the per-pod sidecar: upload dumps to S3, dump on demand"),
    "operator": ("frwatch_operator.main", "run the operator (kopf) and its admission webhook"),
    "source": (
        "frwatch_operator.analysis.source_handover",
        "the source step's hand-over: pack a copy and PUT it to a presigned URL, or fetch and unpack it",
    ),
    "demo": ("frwatch_dev.demo.main", "run a real multi-rank torch job that hangs, and diagnose it"),
}


#: The optional extras and the top-level modules each brings: a subcommand that needs one says which to
#: install instead of dying on ModuleNotFoundError (``frwatch analyze`` needs none of them).
EXTRAS: dict[str, tuple[frozenset[str], str]] = {
    "operator": (
        frozenset(
            {
                "kopf",
                "kubernetes",
                "dateutil",
                "structlog",
                "aiohttp",
                "prometheus_client",
                "yaml",
                "cryptography",
            }
        ),
        "pip install 'frwatch[operator]'",
    ),
    "torch": (
        frozenset({"torch"}),
        "pip install torch==2.13.0  (or 'frwatch[dev]': the demo's ranks run torch)",
    ),
    # development support (the demo, the local cluster): in a checkout, never in the image
    "dev": (
        frozenset({"frwatch_dev"}),
        "bash scripts/setup in a checkout of frwatch (frwatch_dev, the development package, is not in the image)",
    ),
}


def missing_extra(exc: ModuleNotFoundError) -> tuple[str, str] | None:
    """``(extra, install command)`` when ``exc`` is a module of an optional extra, else None."""
    top = (exc.name or "").split(".", 1)[0]
    for extra, (modules, install) in EXTRAS.items():
        if top in modules:
            return extra, install
    return None


def version() -> str:
    """The installed distribution's version (``pyproject.toml``), or "unknown" outside an install."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("frwatch")
    except PackageNotFoundError:
        return "unknown"


_ROLE = re.compile(r":(?:func|mod|class|data|meth|attr):`~?([^`]+)`")


def plain(doc: str) -> str:
    """A module docstring as a terminal shows it: reStructuredText roles and literal quotes removed."""
    return _ROLE.sub(r"\1", doc).replace("``", "").replace("::\n", ":\n").strip()


def parser_for(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A subcommand's parser whose ``--help`` is its module's docstring in plain text (no markup)."""
    text = plain(doc or "")
    first, _, rest = text.partition("\n\n")
    return argparse.ArgumentParser(
        prog=prog,
        description=" ".join(first.split()),
        epilog=rest or None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _usage() -> str:
    lines = ["usage: frwatch SUBCOMMAND [ARGS...]   (frwatch --version)", "", "subcommands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    if args[0] in {"--version", "-V", "version"}:
        print(f"frwatch {version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"frwatch: unknown subcommand {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(SUBCOMMANDS[name][0])
        code: int = module.main(rest)
    except ModuleNotFoundError as exc:
        found = missing_extra(exc)
        if found is None:
            raise
        extra, install = found
        print(
            f"frwatch {name}: needs the {extra!r} extra, which is not installed (no module named "
            f"{exc.name!r}). Install it with: {install}",
            file=sys.stderr,
        )
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
