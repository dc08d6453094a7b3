"""Print every import cycle among frwatch's modules; exit 1 if there is one (issue 27).

    python scripts/import_cycles.py [PACKAGE ...]      (default: frwatch_analyzers frwatch_operator frwatch_dev)

The graph is grimp's (the one import-linter checks contracts on): every import of one frwatch module by
another, at module level or inside a function, and under ``if TYPE_CHECKING`` too (a type-level cycle is
still a cycle in the design). Each strongly connected set of modules is printed once, with one cycle
through all of it, shortest hops first; an import of a package's own ``__init__`` by its submodule counts
like any other.
"""

from __future__ import annotations

import sys
from collections import deque

import grimp

PACKAGES = ("frwatch_analyzers", "frwatch_operator", "frwatch_dev")

#: Known cycles, left out of the graph until their fix merges: each line drops the imports of the module
#: on the left of the one on the right (or of its submodules), each a late import (inside a function) that
#: closes a cycle. Delete a line when its cycle is fixed; the suite then checks it stays fixed.
EXPECTED: tuple[tuple[str, str], ...] = (
    ("frwatch_dev.localcluster.cluster", "frwatch_dev.localcluster.updown"),  # `python -m ...cluster up`
    ("frwatch_dev.dumps.program", "frwatch_dev.dumps.encode"),  # Program.write(); encode types with program
    ("frwatch_dev.dumps.program", "frwatch_dev.dumps.simulate"),  # Program.run(); simulate types with program
    ("frwatch_dev.dumps.corpus", "frwatch_dev.dumps.corpus_"),  # cases() gathers the corpus' other parts
)


def _expected(importer: str, imported: str) -> bool:
    return any(importer == a and imported.startswith(b) for a, b in EXPECTED)


def _edges(packages: tuple[str, ...]) -> dict[str, set[str]]:
    graph = grimp.build_graph(*packages)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if not module.startswith(packages):
            continue
        edges[module] = {
            m
            for m in graph.find_modules_directly_imported_by(module)
            if m.startswith(packages) and m != module and not _expected(module, m)
        }
    return edges


def _components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    part.append(m)
                    if m == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def _cycle_through(start: str, members: set[str], edges: dict[str, set[str]]) -> list[str]:
    """The shortest way from ``start`` back to itself inside one component."""
    prev: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(edges[node] & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [*reversed(path), start]
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return [start]


def cycles(packages: tuple[str, ...] = PACKAGES) -> list[list[str]]:
    """One cycle per strongly connected set of modules (empty: no cycle)."""
    edges = _edges(packages)
    return [_cycle_through(part[0], set(part), edges) for part in _components(edges)]


def main(argv: list[str]) -> int:
    packages = tuple(argv) or PACKAGES
    found = cycles(packages)
    for cycle in found:
        print("import cycle: " + " -> ".join(cycle))
    if found:
        print(f"{len(found)} import cycle(s) among {', '.join(packages)}", file=sys.stderr)
        return 1
    print(f"no import cycle among {', '.join(packages)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
