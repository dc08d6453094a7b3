"""A rank's summary, stored beside its dump: the map step done at the edge.

The agent summarises its rank's dump (the same :class:`~.summarize.RankTrace` the analyzer's workers make)
right after uploading it, and writes it to ``summaries/<rank>.json`` (:mod:`.layout`). The analyzer then
reads summaries instead of decoding dumps; the dump stays the evidence.

Format (``format`` ``frwatch.rank-summary``, ``version`` 2; version 1 is still read), JSON: the trace's scalars, its groups with
their int64 columns as base64 of zlib-compressed little-endian bytes (sequence numbers and creation times
as differences: ring windows compress to a few bytes), the kept tail entries as such a column too, p2p
entries as lists, the details of every signature the trace holds (one zlib-compressed JSON text, which ranks
that behaved alike share and a reader decodes once), and ``dump``: the size, sha256 and md5 of the dump it was made
from, checked against the dump before the summary is used. A group's members (``config_ranks``) are
``{"from", "to", "step"}`` when they are a range, strided or not (version 2: a DP group of a 131k-rank job
is three numbers, not a list of 16k in every rank's summary: O(ranks^2) bytes to store and to parse), else a
list.

A summary is read back from the store: it is hostile input like a dump. :func:`decode` checks every field's
type and bound (a schema written out by hand: no object is built from a name in the data), refuses a
summary over ``MAX_SUMMARY_BYTES`` unread, counts the JSON arrays and objects before parsing
(``MAX_CONTAINERS``), decompresses each column with a bound on its output and all of them within
``MAX_ELEMENTS``, and raises
:class:`SummaryError` with the reason; the caller then decodes the dump.

Version 3 (:mod:`.summary_binary`, what the agent and the map shard write) holds the same content as
MessagePack decoded by msgspec into typed structs, its bounds held while decoding; :class:`Reader` reads
both, told apart by the first bytes.
"""

from __future__ import annotations

# The format's parts, by what they do: its facts and bounds, the writer, the hostile-input reader.
from .decode import Reader
from .encode import encode
from .format import (
    FORMAT,
    MAX_COLUMN,
    MAX_CONTAINERS,
    MAX_ELEMENTS,
    MAX_P2P,
    MAX_SIGS,
    MAX_SUMMARY_BYTES,
    MAX_TAIL,
    MAX_TENSORS,
    READS,
    VERSION,
    DumpDigest,
    SummaryError,
)

__all__ = [
    "FORMAT",
    "MAX_COLUMN",
    "MAX_CONTAINERS",
    "MAX_ELEMENTS",
    "MAX_P2P",
    "MAX_SIGS",
    "MAX_SUMMARY_BYTES",
    "MAX_TAIL",
    "MAX_TENSORS",
    "READS",
    "VERSION",
    "DumpDigest",
    "Reader",
    "SummaryError",
    "encode",
]
