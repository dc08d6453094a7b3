"""The bridge from the earliest branch to the code: each side's call site in context, the function where
the two paths part, and the condition that decides which call a rank makes, and why it can differ across
ranks (:mod:`.guards`). Source comes from :class:`.sourcefiles.SourceTree`; nothing is executed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...base.textfmt import ranks_text
from ...verdict import CulpritKind, EntryView, Frame, Verdict
from .guards import Caller, Guard, Module, Why, why
from .sourcefiles import SourceTree

#: Lines of code shown above and below a call site.
CONTEXT = 6
#: Frames of one side that are read (from the parting function inward).
MAX_FRAMES = 8
#: Sides of the branch read (as many as the page draws).
MAX_SIDES = 12
#: What the culprits did when a condition in the code chose their call (else: stuck, crashed, hardware).
_BRANCHING = {CulpritKind.took_another_path, CulpritKind.extra_call, CulpritKind.mismatched_call}
_NOT_A_BRANCH = {
    CulpritKind.cpu_stuck: "is stuck on the CPU side before this call (its Python stack, e.g. py-spy dump, "
    "shows where)",
    CulpritKind.crashed: "died before this call",
}


@dataclass
class CodeLine:
    number: int
    text: str
    mark: str = ""  # "call" | "cond" | ""


@dataclass
class Excerpt:
    path: str
    function: str
    line: int
    lines: list[CodeLine]


@dataclass
class Decision:
    """A condition on one side's path, and why it can differ across ranks."""

    guard: Guard
    path: str
    why: Why
    side: str
    depth: int = 0  # the frame's place on its side's path, outermost first
    excerpt: Excerpt | None = None


@dataclass
class SideCode:
    ranks: str
    culprit: bool
    op: str
    excerpt: Excerpt | None = None
    skipped: list[str] = field(default_factory=list)


@dataclass
class Raised:
    """The line a rank's log says raised (a crash), in the code."""

    rank: int | None
    message: str
    location: str
    excerpt: Excerpt | None = None
    skipped: str = ""


@dataclass
class Bridge:
    sides: list[SideCode]
    raised: list[Raised] = field(default_factory=list)
    parting: str = ""
    deciding: Decision | None = None
    others: list[Decision] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def needs(verdict: Verdict) -> str:
    """What the bridge would need, said when no source folder is given."""
    files = sorted({f.filename for v in _views(verdict) for f in v.call_site[:MAX_FRAMES]})
    if not files:
        return "The branch's entries carry no Python frames (a JSON dump, or stacks off): the code cannot be named."
    shown = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
    return (
        f"Give the training code with --source DIR (a folder holding {shown}) to see the condition that "
        "decides which call each rank makes."
    )


def files_read(verdict: Verdict) -> list[str]:
    """Every file name the bridge may read for ``verdict``, as the dumps and logs give them, in the order it
    reads them, once each: each side's innermost frames (and the caller of the outermost one read), then the
    raising lines of the causes that name a path. What a copy of the code must hold (the source step)."""
    names: dict[str, None] = {}
    for v in _views(verdict):
        for f in v.call_site[: MAX_FRAMES + 1]:
            names.setdefault(f.filename, None)
    for c in sorted(verdict.causes, key=lambda c: (not c.first, not c.primary))[:8]:
        name, sep, line = c.location.rpartition(":")
        if sep and line.isdigit() and c.primary and "/" in name:
            names.setdefault(name, None)
    return [n for n in names if n]


def _views(verdict: Verdict) -> list[EntryView]:
    return list(verdict.evidence[0].views[:MAX_SIDES]) if verdict.evidence else []


def _raised(verdict: Verdict, tree: SourceTree) -> list[Raised]:
    """The raising lines the causes name (their primary causes first, at most 3)."""
    out = []
    for c in sorted(verdict.causes, key=lambda c: (not c.first, not c.primary))[:8]:
        name, sep, line = c.location.rpartition(":")
        if not (sep and line.isdigit() and c.primary):
            continue
        src = tree.find_named(name) if "/" not in name else tree.find(name)
        r = Raised(
            c.rank, c.message, c.location, skipped=f"{name}: {src.skipped}" if src.text is None else ""
        )
        if src.text is not None:
            try:
                module = Module(src.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                r.skipped = f"{src.path}: cannot be parsed ({type(exc).__name__})"
            else:
                at = Frame(name="", filename=src.path, line=int(line))
                located = module.locate(int(line))
                r.excerpt = _excerpt(module, src.path, at, located.function if located else "")
        out.append(r)
        if len(out) == 3:
            break
    return out


def build(verdict: Verdict, tree: SourceTree) -> Bridge:
    views = [v for v in _views(verdict) if v.op is not None or v.state in ("never enqueued it",)]
    culprits = set(verdict.culprit_ranks)
    stacks = [list(reversed(v.call_site)) for v in views]  # outermost first
    split = _parting(stacks)
    bridge = Bridge(sides=[], raised=_raised(verdict, tree))
    with_stack = [s for s in stacks if s]
    if len(with_stack) >= 2 and (split > 0 or _same_fn(with_stack, split)):
        f = with_stack[0][split] if _same_fn(with_stack, split) else with_stack[0][split - 1]
        bridge.parting = f"{f.name} ({f.filename.rsplit('/', 1)[-1]})"
    elif len(with_stack) == 1:
        bridge.notes.append(
            "Only one side made a call here (the others never enqueued it): the conditions on that side's path "
            "are the ones that decide."
        )
    for v in _views(verdict):
        if v.op is None and v.state == "no dump" and not any(r.rank in v.ranks for r in bridge.raised):
            bridge.notes.append(
                f"{ranks_text(v.ranks)} left no dump: the call it was in, or the line that raised, is in no dump; "
                "its log (kubectl logs --previous) or its pod's termination message has it."
            )
    seen: dict[tuple[str, int, str], int] = {}
    per_side: list[list[Decision]] = []
    for v, stack in zip(views, stacks, strict=True):
        side = SideCode(
            ranks=ranks_text(v.ranks), culprit=bool(culprits & set(v.ranks)), op=v.op or "never enqueued it"
        )
        bridge.sides.append(side)
        decisions: list[Decision] = []
        start = max(0, split - 1) if len(with_stack) >= 2 else 0
        frames = stack[start:][-MAX_FRAMES:]
        for i, frame in enumerate(frames):
            src = tree.find(frame.filename)
            if src.text is None:
                side.skipped.append(f"{frame.filename}: {src.skipped}")
                continue
            try:
                module = Module(src.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                side.skipped.append(f"{src.path}: cannot be parsed ({type(exc).__name__})")
                continue
            located = module.locate(frame.line)
            if i == len(frames) - 1:
                side.excerpt = _excerpt(module, src.path, frame, located.function if located else "")
            if located is None:
                continue
            caller = _caller(tree, stack, start + i, frame)
            for g in located.guards:
                key = (src.path, g.line, g.kind)
                seen[key] = seen.get(key, 0) + 1
                at = Frame(name=g.function, filename=src.path, line=g.line)
                decisions.append(
                    Decision(
                        g, src.path, why(module, g, located.node, caller), side.ranks, depth=start + i,
                        excerpt=_excerpt(module, src.path, at, g.function, cond=True),
                    )
                )  # fmt: skip
        per_side.append(decisions)
    # a condition both sides pass the same way cannot decide between them
    n = len([s for s in per_side if s])
    candidates = [d for ds in per_side for d in ds if n < 2 or seen[(d.path, d.guard.line, d.guard.kind)] < n]
    ranked = sorted(
        enumerate(candidates),
        key=lambda ic: (-ic[1].why.score, -ic[1].depth, ic[1].guard.line, ic[0]),
    )
    kind = verdict.culprit_kind
    if kind is not None and kind not in _BRANCHING and kind != CulpritKind.unknown:
        what = _NOT_A_BRANCH.get(kind, f"is a {kind.value.replace('_', ' ')}, not a path the code chose")
        bridge.notes.insert(
            0,
            f"{ranks_text(verdict.culprit_ranks)} {what}: no condition in the code decides between the "
            "calls, so none is named; the code at each call site is shown.",
        )
        return bridge
    if ranked:
        bridge.deciding = ranked[0][1]
        bridge.others = [d for _, d in ranked[1:6]]
    return bridge


def _parting(stacks: list[list[Frame]]) -> int:
    """How many outermost frames every side with a stack shares exactly (the first index that differs)."""
    with_stack = [s for s in stacks if s]
    if len(with_stack) < 2:
        return 0
    i = 0
    while (
        all(i < len(s) for s in with_stack)
        and len({(s[i].filename, s[i].name, s[i].line) for s in with_stack}) == 1
    ):
        i += 1
    return i


def _same_fn(stacks: list[list[Frame]], i: int) -> bool:
    return all(i < len(s) for s in stacks) and len({(s[i].filename, s[i].name) for s in stacks}) == 1


def _caller(tree: SourceTree, stack: list[Frame], index: int, frame: Frame) -> Caller | None:
    if index == 0:
        return None
    outer = stack[index - 1]
    src = tree.find(outer.filename)
    if src.text is None:
        return None
    try:
        return Caller(Module(src.text), outer.line, frame.name)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _excerpt(module: Module, path: str, frame: Frame, function: str, cond: bool = False) -> Excerpt:
    lo = max(1, frame.line - CONTEXT)
    hi = min(len(module.lines), frame.line + CONTEXT)
    mark = "cond" if cond else "call"
    lines = [
        CodeLine(n, module.lines[n - 1][:300], mark if n == frame.line else "") for n in range(lo, hi + 1)
    ]
    return Excerpt(path=path, function=function or "<module>", line=frame.line, lines=lines)
