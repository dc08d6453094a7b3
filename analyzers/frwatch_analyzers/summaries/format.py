"""A rank summary's format facts, shared by its writer (:mod:`.summary_encode`) and its reader
(:mod:`.summary_decode`): the format's name and versions, the bounds a reader holds, the error it raises,
and the digest of the dump a summary was made from. The format itself is described in :mod:`.rank_summary`.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass

from ..base.limits import MIB

FORMAT = "frwatch.rank-summary"
VERSION = 2
#: Versions this reader reads (1: members as lists only).
READS = (1, 2)
#: A summary larger than this is refused unread (a 2000-entry rank's is about 10-30 KB).
MAX_SUMMARY_BYTES = 8 * MIB
#: Elements one column may hold (a ring buffer of a million entries), entries kept in a tail, p2p
#: entries, distinct signatures, tensors in one entry's sizes.
MAX_COLUMN = 1 << 20
MAX_TAIL = 1 << 12
MAX_P2P = 1 << 16
MAX_SIGS = 1 << 16
MAX_TENSORS = 1 << 12
_MAX_TEXT = 4096
#: Columns are stored little-endian.
LITTLE = sys.byteorder == "little"
#: int64 fields a kept tail entry takes in the tail column.
TAIL_FIELDS = 8
#: Column elements one summary may decode to in all (64 MB): a ring of a million entries needs about 4M.
#: Columns compress ~1000:1, so without it 8 MB of distinct columns of zeros would inflate to gigabytes.
MAX_ELEMENTS = 8 * MAX_COLUMN
#: JSON arrays and objects a summary, or its signature table, may hold, counted before parsing: each costs
#: 56-64 bytes once parsed, so 32 MB of ``[],`` would take 770 MB (measured); 1M costs under 80 MB and is
#: 10 times what 65,536 signatures need.
MAX_CONTAINERS = 1 << 20


class SummaryError(Exception):
    """A summary that cannot be used; the message says why (the dump is read instead)."""


@dataclass(frozen=True)
class DumpDigest:
    """Which dump a summary was made from."""

    size: int
    sha256: str
    md5: str

    @classmethod
    def of(cls, data: bytes) -> DumpDigest:
        return cls(
            len(data), hashlib.sha256(data).hexdigest(), hashlib.md5(data, usedforsecurity=False).hexdigest()
        )
