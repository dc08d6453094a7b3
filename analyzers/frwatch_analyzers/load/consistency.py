"""Claims checked against each other before any of them sizes the analysis: world sizes, group members.

Every dump claims a world (its default group's members in ``pg_config``), manifest.json claims one, and
file names claim ranks. A claim is data, never a loop bound: each is first held to a sane bound
(``MAX_WORLD_SIZE``, checked while decoding), then to the others. The world size is the one the dumps
agree on (a strict majority of those that state one); a dump that states another is refused, and so is
one whose groups list a rank outside that world; a manifest whose world size contradicts the dumps keeps
its pods and nodes, but not its world size. A world size given by the user wins and refuses nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..base.limits import MAX_WORLD_SIZE
from ..base.textfmt import ranks_text
from ..store.manifest import Manifest
from ..trace.summarize import RankTrace
from ..verdict import FileProblem


def _top(members: range | tuple[int, ...]) -> int:
    return members[-1] if isinstance(members, range) else max(members)


def default_group_size(trace: RankTrace) -> int | None:
    """The world a dump claims: one more than the highest member of its default group (None: no claim,
    as in gloo dumps whose pg_config is broken)."""
    for pg in trace.pgs.values():
        if pg.config_ranks and (pg.name == "0" or pg.desc == "default_pg"):
            return _top(pg.config_ranks) + 1
    return None


def checked_manifest(manifest: Manifest, name: str) -> tuple[Manifest | None, FileProblem | None]:
    """The manifest held to sane bounds: impossible ranks make it unusable; an impossible world size is
    dropped (its pods and nodes stay)."""
    counts = (len(manifest.ranks), len(manifest.pods), sum(len(p.ranks) for p in manifest.pods))
    if max(counts) > MAX_WORLD_SIZE:
        return None, FileProblem(
            file=name, reason=f"manifest ignored: it lists more than {MAX_WORLD_SIZE} ranks or pods"
        )
    ranks = [r.rank for r in manifest.ranks] + [r for p in manifest.pods for r in p.ranks]
    bad = [r for r in ranks if not 0 <= r < MAX_WORLD_SIZE]
    if bad:
        return None, FileProblem(
            file=name,
            reason=f"manifest ignored: rank {bad[0]} is outside [0, {MAX_WORLD_SIZE}) (no job has that many ranks)",
        )
    ws = manifest.world_size
    if ws is not None and not 1 <= ws <= MAX_WORLD_SIZE:
        return manifest.model_copy(update={"world_size": None}), FileProblem(
            file=name,
            reason=f"world_size {ws} ignored: outside [1, {MAX_WORLD_SIZE}] (no job has that many ranks); "
            "the rest of the manifest is used",
        )
    return manifest, None


@dataclass
class Checked:
    """What the claims support: the world size (None: unknown, the diagnosis takes it from the ranks
    seen), the traces consistent with it, the manifest without a world size that contradicts the dumps,
    every problem (the loader's, with ranks outside the world unset, and one for each thing refused), and
    the ranks that unusable files claim outside the world."""

    world_size: int | None
    traces: list[RankTrace]
    manifest: Manifest | None
    problems: list[FileProblem]
    outside: list[int] = field(default_factory=list)


def consistent_world(
    traces: list[RankTrace],
    problems: list[FileProblem],
    manifest: Manifest | None,
    given: int | None,
    manifest_name: str = "manifest",
) -> Checked:
    """Hold the claims of ``traces``, ``problems`` (file names) and ``manifest`` to each other."""
    problems = list(problems)
    claims = {id(t): default_group_size(t) for t in traces}
    tally = Counter(c for c in claims.values() if c is not None)
    stated = sum(tally.values())
    agreed: int | None = None
    if tally:
        size, votes = tally.most_common(1)[0]
        if 2 * votes > stated:
            agreed = size
    kept = traces
    if agreed is not None and len(tally) > 1:
        kept = []
        for t in traces:
            claim = claims[id(t)]
            if claim is not None and claim != agreed:
                problems.append(
                    FileProblem(
                        file=t.file,
                        rank=t.rank,
                        reason=f"inconsistent: its default group has {claim} ranks; {tally[agreed]} of the "
                        f"{stated} dumps that state one say {agreed}",
                    )
                )
            else:
                kept.append(t)
    if (
        manifest is not None
        and manifest.world_size is not None
        and agreed is not None
        and manifest.world_size != agreed
    ):
        problems.append(
            FileProblem(
                file=manifest_name,
                reason=f"world_size {manifest.world_size} ignored: the dumps' default group has {agreed} ranks",
            )
        )
        manifest = manifest.model_copy(update={"world_size": None})
    if given is not None:
        return Checked(given, kept, manifest, problems)
    world = (manifest.world_size if manifest is not None else None) or agreed
    if world is None:
        return Checked(None, kept, manifest, problems)
    consistent = []
    for t in kept:
        outside = _member_outside(t, world)
        if outside:
            problems.append(FileProblem(file=t.file, rank=t.rank, reason=outside))
        else:
            consistent.append(t)
    # a file name is a claim too: an unusable file filed outside the world must not grow it
    claimed_outside = []
    for p in problems:
        if p.rank is not None and p.rank >= world:
            claimed_outside.append(p.rank)
            if f"filed as rank {p.rank}" not in p.reason:
                p.reason = f"{p.reason} (filed as rank {p.rank}, outside the world of {world} ranks)"
            p.rank = None
    return Checked(world, consistent, manifest, problems, claimed_outside)


def _member_outside(trace: RankTrace, world: int) -> str:
    for pg in trace.pgs.values():
        if pg.config_ranks and _top(pg.config_ranks) >= world:
            return (
                f"inconsistent: pg_config lists {ranks_text(pg.config_ranks)} in group {pg.name!r}, outside the "
                f"world of {world} ranks"
            )
    return ""
