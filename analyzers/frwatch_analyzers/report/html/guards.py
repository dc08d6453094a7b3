"""What decides whether a line of code runs, read from its source with ``ast`` only (nothing is executed).

For a call site (file, line) :func:`guards_of` gives the enclosing function and the conditions on the way
to the line: an ``if`` (or its ``else``) around it, a loop, an ``except`` handler, and an earlier
``if ...: return`` (``continue``, ``break``, ``raise``) in the blocks that lead to it. :func:`why` says
why such a condition can differ across ranks: it reads rank-local state (a rank, an env var, the host), the
rank's data (a loss, a batch, a NaN check), or a caught exception, following names a few steps back
through assignments in the function, the caller's arguments, and functions of the same module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

#: Names that hold a rank's own identity or place.
_RANK = re.compile(
    r"(^|_|\.)(rank|local_rank|node_rank|global_rank|get_rank|get_local_rank|is_main|is_master|is_leader|"
    r"hostname|gethostname|getpid|environ|getenv|device|local_process_index|process_index)($|_|\.|\()",
    re.I,
)
#: Names that hold a rank's own data or numerics.
_DATA = re.compile(
    r"(batch|loss|grad|sample|token|inputs?$|targets?$|labels?$|isnan|isinf|isfinite|overflow|^nan|^inf|"
    r"^item\(\)$|dataloader|data_iter|numel)",
    re.I,
)
#: How many steps back a name is followed.
MAX_DEPTH = 4


@dataclass
class Guard:
    kind: str  # "if" | "else of if" | "for" | "while" | "except" | "early return" | ...
    line: int
    test: str  # the condition's source text
    function: str
    reads: list[str] = field(default_factory=list)


@dataclass
class Located:
    """The function around a line and the guards on the way to it."""

    function: str
    first: int  # the function's first and last lines
    last: int
    guards: list[Guard]
    node: ast.AST | None = None


class Module:
    """One parsed source file."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines()
        self.tree = ast.parse(text)
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for n in ast.walk(self.tree):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(n.name, []).append(n)

    def segment(self, node: ast.AST, limit: int = 200) -> str:
        text = ast.get_source_segment(self.text, node) or ast.unparse(node)
        text = " ".join(text.split())
        return text if len(text) <= limit else text[:limit] + " ..."

    def function_at(self, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        best = None
        for fns in self.functions.values():
            for fn in fns:
                inside = fn.lineno <= line <= (fn.end_lineno or fn.lineno)
                if inside and (best is None or fn.lineno > best.lineno):
                    best = fn
        return best

    def locate(self, line: int) -> Located | None:
        fn = self.function_at(line)
        if fn is None:
            return None
        guards: list[Guard] = []
        self._walk(fn.body, line, fn.name, guards)
        return Located(fn.name, fn.lineno, fn.end_lineno or fn.lineno, guards, fn)

    def _walk(self, body: list[ast.stmt], line: int, fn: str, guards: list[Guard]) -> None:
        for stmt in body:
            end = stmt.end_lineno or stmt.lineno
            if end < line:
                exit_kind = _exits(stmt)
                if exit_kind and isinstance(stmt, ast.If):
                    guards.append(Guard(f"early {exit_kind}", stmt.lineno, self.segment(stmt.test), fn))
                continue
            if stmt.lineno > line:
                return
            # the statement holding the line
            if isinstance(stmt, ast.If):
                if _holds(stmt.body, line):
                    guards.append(Guard("if", stmt.lineno, self.segment(stmt.test), fn))
                    self._walk(stmt.body, line, fn, guards)
                elif _holds(stmt.orelse, line):
                    guards.append(Guard("else of if", stmt.lineno, self.segment(stmt.test), fn))
                    self._walk(stmt.orelse, line, fn, guards)
            elif isinstance(stmt, ast.For | ast.AsyncFor):
                text = f"{self.segment(stmt.target)} in {self.segment(stmt.iter)}"
                guards.append(Guard("for", stmt.lineno, text, fn))
                self._walk(stmt.body + stmt.orelse, line, fn, guards)
            elif isinstance(stmt, ast.While):
                guards.append(Guard("while", stmt.lineno, self.segment(stmt.test), fn))
                self._walk(stmt.body + stmt.orelse, line, fn, guards)
            elif isinstance(stmt, ast.Try | ast.TryStar):
                for h in stmt.handlers:
                    if _holds(h.body, line):
                        what = self.segment(h.type) if h.type is not None else "any exception"
                        guards.append(Guard("except", h.lineno, what, fn))
                        self._walk(h.body, line, fn, guards)
                        return
                self._walk(stmt.body + stmt.orelse + stmt.finalbody, line, fn, guards)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                self._walk(stmt.body, line, fn, guards)
            elif isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    if _holds(case.body, line):
                        guards.append(Guard("case", case.pattern.lineno, self.segment(case.pattern), fn))
                        self._walk(case.body, line, fn, guards)
            return


def _holds(body: list[ast.stmt], line: int) -> bool:
    return bool(body) and body[0].lineno <= line <= (body[-1].end_lineno or body[-1].lineno)


def _exits(stmt: ast.stmt) -> str:
    """'return' (continue, break, raise) when an ``if``'s body ends the path that follows it."""
    if not isinstance(stmt, ast.If) or not stmt.body:
        return ""
    last = stmt.body[-1]
    for kind, name in (
        (ast.Return, "return"),
        (ast.Continue, "continue"),
        (ast.Break, "break"),
        (ast.Raise, "raise"),
    ):
        if isinstance(last, kind):
            return name
    return ""


# --- why a condition can differ across ranks ---------------------------------------------------------
@dataclass
class Why:
    kind: str  # "rank-local state" | "the rank's data" | "a caught exception" | ""
    chain: list[str] = field(default_factory=list)  # how it was followed: "bug <- self.is_culprit_at(step)"

    @property
    def score(self) -> int:
        return {"rank-local state": 3, "a caught exception": 3, "the rank's data": 2}.get(self.kind, 0)


def reads(node: ast.AST) -> list[str]:
    """The names, dotted attributes and called functions an expression reads, outermost first."""
    out: list[str] = []
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute | ast.Name):
            text = _dotted(n) + ("()" if id(n) in called else "")
            if text and text != "()" and text not in out:
                out.append(text)
    return out


def _dotted(n: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(n, ast.Attribute):
        parts.append(n.attr)
        n = n.value
    if isinstance(n, ast.Name):
        parts.append(n.id)
        return ".".join(reversed(parts))
    if isinstance(n, ast.Call):
        inner = _dotted(n.func)
        return ".".join([f"{inner}()", *reversed(parts)]) if inner else ""
    return ""


@dataclass
class Caller:
    """The frame that called the function of a guard: its module and the line of the call."""

    module: Module
    line: int
    callee: str


def why(module: Module, guard: Guard, fn: ast.AST | None, caller: Caller | None = None) -> Why:
    """Why ``guard`` can be true on some ranks and false on others, following names back."""
    if guard.kind == "except":
        return Why("a caught exception", [f"except {guard.test}: raised on some ranks only"])
    node = _test_node(fn, guard)
    if node is None:
        return Why("")
    return _follow(module, node, fn, caller, MAX_DEPTH, [])


def _test_node(fn: ast.AST | None, guard: Guard) -> ast.AST | None:
    if fn is None:
        return None
    for n in ast.walk(fn):
        if isinstance(n, ast.If | ast.While) and n.lineno == guard.line:
            return n.test
        if isinstance(n, ast.For | ast.AsyncFor) and n.lineno == guard.line:
            return n.iter
    return None


def _classify(name: str) -> str:
    if _RANK.search(name):
        return "rank-local state"
    if _DATA.search(name.rsplit(".", 1)[-1]):
        return "the rank's data"
    return ""


def _follow(
    module: Module, node: ast.AST, fn: ast.AST | None, caller: Caller | None, depth: int, chain: list[str]
) -> Why:
    found = Why("")
    for name in reads(node):
        kind = _classify(name)
        if kind == "rank-local state":
            return Why(kind, [*chain, name])
        if kind and not found.kind:
            found = Why(kind, [*chain, name])
        if depth <= 0:
            continue
        deeper = _resolve(module, name, node, fn, caller, depth, chain)
        if deeper.score > found.score:
            found = deeper
            if found.kind == "rank-local state":
                return found
    return found


def _resolve(
    module: Module,
    name: str,
    at: ast.AST,
    fn: ast.AST | None,
    caller: Caller | None,
    depth: int,
    chain: list[str],
) -> Why:
    line = getattr(at, "lineno", 0)
    if fn is not None and "." not in name and "(" not in name:
        # an assignment before the line in the same function
        value: ast.expr | None = None
        for n in ast.walk(fn):
            if not isinstance(n, ast.Assign) or n.lineno >= line:
                continue
            if any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
                value = n.value
        if value is not None:
            return _follow(
                module, value, fn, caller, depth - 1, [*chain, f"{name} = {module.segment(value, 80)}"]
            )
        # a parameter: what the caller passed
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and caller is not None:
            arg = _argument(fn, name, caller)
            if arg is not None:
                outer = caller.module.function_at(caller.line)
                return _follow(
                    caller.module, arg, outer, None, depth - 1,
                    [*chain, f"{name} <- {caller.module.segment(arg, 80)} in the caller"],
                )  # fmt: skip
    if name.endswith("()"):
        callee = name[:-2].rsplit(".", 1)[-1]
        for target in module.functions.get(callee, [])[:2]:
            returned = [
                n.value for n in ast.walk(target) if isinstance(n, ast.Return) and n.value is not None
            ]
            for value in returned:
                said = f"{callee}() returns {module.segment(value, 80)}"
                got = _follow(module, value, target, None, depth - 1, [*chain, said])
                if got.kind:
                    return got
    return Why("")


def _argument(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str, caller: Caller) -> ast.AST | None:
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if name not in params and name not in [a.arg for a in fn.args.kwonlyargs]:
        return None
    outer = caller.module.function_at(caller.line)
    scope = outer if outer is not None else caller.module.tree
    for n in ast.walk(scope):
        if not isinstance(n, ast.Call) or not (n.lineno <= caller.line <= (n.end_lineno or n.lineno)):
            continue
        called = _dotted(n.func).rsplit(".", 1)[-1]
        if called != fn.name:
            continue
        for kw in n.keywords:
            if kw.arg == name:
                return kw.value
        pos = params.index(name) if name in params else -1
        if params and params[0] in ("self", "cls") and isinstance(n.func, ast.Attribute):
            pos -= 1
        if 0 <= pos < len(n.args):
            return n.args[pos]
    return None
