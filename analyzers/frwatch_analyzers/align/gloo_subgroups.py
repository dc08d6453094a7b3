"""Which gloo ranks belong to a subgroup that none of their own entries names.

gloo's Flight Recorder keeps one pg_config entry keyed ``''``: every ``ProcessGroupGloo`` a rank builds
records ``groupRanks()`` under the same empty (uid, desc) key in its constructor
(``FlightRecorder<c10::Event>::get()->record_pg_ranks(std::make_tuple(pg_uid_, pg_desc_), groupRanks())``;
``record_pg_ranks`` assigns ``pg_name_to_ranks_[pg_name]``), before Python's ``_new_process_group_helper``
sets ``options.global_ranks_in_group``; the last group built wins. Up to 2.13, ``groupRanks()`` gives the
identity ``0..size-1`` only when ``local_id_ == 0`` (the default group), else the still-empty list. What that entry lists differs by release (real
dumps: ``tests/fixtures/zoo/*/subgroup*``, pairs {0,1} and {2,3} built with ``new_group``):

- the default group alone: ``[0, ..., world-1]``, every release;
- a rank that built a subgroup (2.8.0 to 2.13.0): ``'[]'``;
- a rank that built a subgroup (2.14.1): ``[0, ..., k-1]`` with k the size of its newest subgroup (every
  member of every pair writes ``'[0, 1]'``; members of ``new_group([1, 2, 3])`` write ``'[0, 1, 2]'``, run
  by hand): group-local ranks, not members, and ranks below k find themselves in it.

So the list names the world only when it is as wide as the world; a shorter one (or none) says the rank
built a subgroup after the default group.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..trace.summarize import RankTrace


def lists_the_world(trace: RankTrace, world_size: int) -> bool:
    """True when the rank's unnamed gloo pg_config entry lists the whole world (it built no subgroup)."""
    return trace.world_ranks is not None and trace.world_ranks[1] + 1 >= world_size


def subgroup_candidates(traces: dict[int, RankTrace], subgroups: Iterable[str], world: list[int]) -> set[int]:
    """gloo ranks that built a subgroup (their unnamed pg_config entry is not the world) but recorded no call
    in any subgroup seen: the members a subgroup never heard from."""
    keys = set(subgroups)
    widest = max((t.world_ranks[1] + 1 for t in traces.values() if t.world_ranks is not None), default=0)
    world_size = max(len(world), widest)
    return {
        r
        for r, t in traces.items()
        if t.backend == "gloo"
        and not lists_the_world(t, world_size)
        and not any(len(t.pgs[k].seqs) for k in keys if k in t.pgs)
    }
