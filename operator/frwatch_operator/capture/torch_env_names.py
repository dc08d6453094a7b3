"""Which names of the Flight Recorder's variables a training container gets: the ones its torch reads
without a warning. Pure.

torch renamed two variables: ``TORCH_NCCL_TRACE_BUFFER_SIZE`` -> ``TORCH_FR_BUFFER_SIZE`` and
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` -> ``TORCH_FR_DUMP_TEMP_FILE``. From torch 2.9 on an old name still works
but prints, once per process (seen with torch 2.13.0+cpu, gloo)::

    Warning: Environment variable TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated; use TORCH_FR_BUFFER_SIZE instead

Older torch reads only the old names (the new ones appeared in 2025), so which names to set depends on
the job's torch, which frwatch decides in this order:

1. the job says it: annotation ``frwatch.io/torch-version`` (``"2.5"``, ``"2.13.0"``; ``"any"``: both names);
2. the container's image says it: the official ``pytorch/pytorch:<version>-...`` tags carry torch's version;
3. the operator's default ``fr.torch_version`` (chart ``flightRecorder.torchVersion``, default ``"any"``: both
   names, which every torch reads, and torch from 2.9 on warns once a rank; ``"2.9"``: new names only).

From 2.9: the new names only (no warning). Before 2.9: the old names only (every torch reads them; none
before 2.9 warns). The default is both names because the two ways of being wrong differ: a warning in the
log, or (new names only on a torch older than 2.9) dumps written where torch's default puts them, outside the
shared volume, and never collected. A cluster whose every job runs torch 2.9 or later sets the default to 2.9.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from frwatch_operator import constants as c

#: The first torch that warns on the old names (and reads the new ones).
NEW_NAMES_SINCE = (2, 9)
#: The value that asks for both names.
ANY = "any"

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:[.+-].*)?$")
#: ``[registry/]pytorch/pytorch:<version>[-...]`` (Docker Hub's official images, any mirror of them)
_OFFICIAL_IMAGE = re.compile(r"^(?:[^/]+/)*pytorch/pytorch:(\d+\.\d+(?:\.\d+)?)(?:-[^@]*)?(?:@.*)?$")


@dataclass(frozen=True)
class TorchNames:
    """Whether to set the new names, the old names, and why (for the docs and tests)."""

    new: bool
    old: bool
    reason: str


def parse_version(text: str) -> tuple[int, int] | None:
    """``"2.13.0+cpu"`` -> (2, 13); None when it is not a version."""
    m = _VERSION.match(text.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def image_torch_version(image: str) -> str:
    """The torch version an image's reference names (official ``pytorch/pytorch`` tags only), else ""."""
    m = _OFFICIAL_IMAGE.match(image.strip())
    return m.group(1) if m else ""


def torch_names(job_version: str, image: str, default_version: str) -> TorchNames:
    """Which names to set for a container running ``image`` of a job that declared ``job_version`` ("" when
    it did not), the operator's default being ``default_version``."""
    for text, source in (
        (job_version, f"the job's {c.ANN_TORCH_VERSION}"),
        (image_torch_version(image), f"the image {image}"),
        (default_version, "the operator's default (flightRecorder.torchVersion)"),
    ):
        text = text.strip()
        if not text:
            continue
        if text.lower() == ANY:
            return TorchNames(True, True, f"{source} says {ANY}: both names")
        version = parse_version(text)
        if version is None:
            continue  # not a version: the next source decides
        if version >= NEW_NAMES_SINCE:
            return TorchNames(True, False, f"{source}: torch {text} reads the new names")
        return TorchNames(False, True, f"{source}: torch {text} reads only the old names")
    return TorchNames(True, True, "no version known: both names")


def pick(names: tuple[str, ...], which: TorchNames) -> tuple[str, ...]:
    """Of a (new, old) pair, the names to set; a single name (no rename) is always set."""
    if len(names) != 2:
        return names
    new, old = names
    return tuple(n for n, on in ((new, which.new), (old, which.old)) if on)
