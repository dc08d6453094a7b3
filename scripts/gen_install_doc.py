#!/usr/bin/env python3
"""Regenerate the tables of docs/install.md: chart values (from values.schema.json and values.yaml) and
Prometheus metrics (from frwatch_operator.metrics.DOCS).

    .venv/bin/python scripts/gen_install_doc.py           # rewrite the tables in place
    .venv/bin/python scripts/gen_install_doc.py --check   # exit 1 when docs/install.md is stale

Only the text between the ``<!-- NAME:start -->`` / ``<!-- NAME:end -->`` markers is touched.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))

from frwatch_operator.metrics import DOCS  # noqa: E402

DOC = ROOT / "docs" / "install.md"
CHART = ROOT / "charts" / "frwatch"


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else f'"{value}"'
    return "`" + text.replace("|", "\\|") + "`"


def values_table() -> str:
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = ["| key | default | description |", "| --- | --- | --- |"]

    def walk(node: dict[str, Any], value: Any, path: str) -> None:
        props = node.get("properties")
        if node.get("type") == "object" and props and value != {}:
            for key, child in props.items():
                walk(
                    child,
                    value.get(key) if isinstance(value, dict) else None,
                    f"{path}.{key}" if path else key,
                )
            return
        description = str(node.get("description", "")).replace("|", "\\|")
        rows.append(f"| `{path}` | {_shown(value)} | {description} |")

    walk(schema, defaults, "")
    return "\n".join(rows)


def metrics_table() -> str:
    rows = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for name, (kind, labels, doc) in DOCS.items():
        exposed = f"{name}_total" if kind == "counter" else name
        rows.append(f"| `{exposed}` | {kind} | {', '.join(labels) or '-'} | {doc} |")
    return "\n".join(rows)


TABLES = {"values-table": values_table, "metrics-table": metrics_table}


def regenerate(text: str) -> str:
    for name, build in TABLES.items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n)(?:.*?\n)?(<!-- {name}:end -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{DOC}: markers <!-- {name}:start/end --> not found")
        text = pattern.sub(lambda m, b=build: m[1] + b() + "\n" + m[2], text)  # type: ignore[misc]
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="regenerate docs/install.md's tables")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    current = DOC.read_text()
    fresh = regenerate(current)
    if args.check:
        if fresh != current:
            print(
                "docs/install.md is stale: run .venv/bin/python scripts/gen_install_doc.py", file=sys.stderr
            )
            return 1
        return 0
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
