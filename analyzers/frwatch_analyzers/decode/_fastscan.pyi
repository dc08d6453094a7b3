# The extension built from _fastscan.c (optional: see fastscan.py).
from typing import Any

def step(
    ctx: tuple[Any, ...], start: int, has_states: bool, last_record_id: int, /
) -> tuple[int, bool, int]: ...
def created(ents: list[Any], /) -> bytes | None: ...
def detail(
    entry: dict[str, Any], state_codes: dict[str, int], /
) -> tuple[int, int, bool | None, int, int, int] | None: ...
