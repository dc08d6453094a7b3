"""A fabricated dump set on disk, made once and reused: the benchmarks' sets are large (GBs at 2048 ranks),
so a folder whose marker says it holds the wanted set is kept, and anything else in it is replaced."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

MARKER = "fabricated.json"


def cached_set(directory: Path, wanted: Mapping[str, Any], make: Callable[[], int]) -> dict[str, Any]:
    """The set ``wanted`` describes in ``directory``: reused when its marker says so, else made anew by
    ``make()`` (which writes the files and returns their bytes). Returns the marker's content, with
    ``reused``."""
    marker = directory / MARKER
    if marker.exists() and json.loads(marker.read_text()).get("set") == wanted:
        info: dict[str, Any] = json.loads(marker.read_text())
        return {**info, "reused": True}
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    start = time.perf_counter()
    total = make()
    info = {"set": dict(wanted), "bytes": total, "fabricate_s": round(time.perf_counter() - start, 2)}
    marker.write_text(json.dumps(info))
    return {**info, "reused": False}
