"""Whether a decoded summary can stand for its dump, and the verdict's words for those that cannot.

:mod:`.rank_summary` checks a summary's form (types, bounds, columns) and :mod:`.from_summaries` that it is
about the right rank and made from the dump the store holds (size, then MD5 or sha256). What is left is a
summary whose digest matches but whose counts do not fit that dump: an agent that is wrong or hostile can
write any numbers beside a real dump's digest. :func:`implausible` compares the counts with what a dump of
that size can hold (every Flight Recorder entry is a dict of about twenty fields, never under
:data:`MIN_ENTRY_BYTES` bytes even with every key and value memoized), so that a summary never makes the
analyzer hold more than decoding the dump would; such a rank is decoded from its dump instead.

:func:`fallback_note` says which summaries were not used and why in bounded words: reasons are grouped by
kind (their numbers aside), at most :data:`MAX_KINDS` kinds are spelled, each with its ranks as ranges cut
after a few (:func:`.textfmt.ranks_text`) and a count; at 100k ranks the line stays a few hundred bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..base.textfmt import ranks_text
from ..trace.summarize import RankTrace
from .rank_summary import DumpDigest

#: Bytes a pickled (or JSON) Flight Recorder entry takes at the least. Measured: an entry of the twenty
#: fields with every value None and every key memoized pickles to 68 bytes (protocol 4; 72 with protocol 2,
#: 400 as JSON); a real entry takes 150-250. Half of the least leaves room for any encoder.
MIN_ENTRY_BYTES = 30
#: Kinds of reason spelled in the note; the rest are counted.
MAX_KINDS = 8
_NUMBER = re.compile(r"\d+")


def implausible(trace: RankTrace, digest: DumpDigest) -> str:
    """Why ``trace``'s counts cannot come from a dump of ``digest.size`` bytes ("" when they can)."""
    most = digest.size // MIN_ENTRY_BYTES
    if trace.entries > most:
        return f"implausible: {trace.entries} entries in a dump of {digest.size} bytes"
    collectives = sum(len(pg.seqs) for pg in trace.pgs.values())
    kept = sum(len(pg.tail) for pg in trace.pgs.values())
    varying = sum(len(pg.var_seqs) for pg in trace.pgs.values())
    for what, count in (
        ("collectives", collectives + len(trace.p2p)),
        ("kept entries", kept),
        ("entries of varying sizes", varying),
    ):
        if count > trace.entries:
            return f"implausible: {count} {what} in a trace of {trace.entries} entries"
    # groups are not compared with entries: a rank may belong to thousands of groups (pg_config, pg_status)
    # and hold entries of a few; their columns are within the entries, counted above
    return ""


def _kind(why: str) -> str:
    return _NUMBER.sub("#", why)


def fallback_note(used: int, fallbacks: Mapping[int, str], missing: Iterable[int]) -> str:
    """One line for the verdict: how many ranks came from summaries, which fell back to their dumps, why."""
    missing = list(missing)
    if not used and not fallbacks:
        return ""
    parts = [f"{used} rank(s) read from their agents' summaries"]
    if fallbacks:
        kinds: dict[str, tuple[str, list[int]]] = {}
        for rank, why in fallbacks.items():
            kinds.setdefault(_kind(why), (why, []))[1].append(rank)
        ordered = sorted(kinds.values(), key=lambda k: (-len(k[1]), min(k[1])))
        shown = "; ".join(
            f"{ranks_text(ranks)}: {why}" + (f" (and {len(ranks) - 1} alike)" if len(ranks) > 1 and
                                                any(fallbacks[r] != why for r in ranks) else "")
            for why, ranks in ordered[:MAX_KINDS]
        )  # fmt: skip
        more = ""
        if len(ordered) > MAX_KINDS:
            rest = sum(len(r) for _, r in ordered[MAX_KINDS:])
            more = f"; {rest} more rank(s) for {len(ordered) - MAX_KINDS} other reason(s)"
        parts.append(f"{len(fallbacks)} read from their dumps instead ({shown}{more})")
    if missing:
        parts.append(f"{ranks_text(missing)} had no summary (read from the dump)")
    return ", ".join(parts) + "."
