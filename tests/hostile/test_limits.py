"""The limits fit the container: workers never promise more memory than the container's cgroup allows."""

from __future__ import annotations

from pathlib import Path

import pytest

from frwatch_analyzers.base.limits import MIB, PARENT_RESERVE_BYTES, Limits, container_memory, fit


@pytest.mark.parametrize(
    ("v2", "v1", "expected"),
    [
        ("4294967296\n", None, 4 << 30),
        ("max\n", "1073741824", None),  # cgroup v2 says no limit
        (None, "1073741824\n", 1 << 30),
        (None, "9223372036854771712\n", None),  # cgroup v1's "no limit"
        (None, None, None),
    ],
)
def test_the_container_limit_is_read_from_cgroup_v2_then_v1(
    tmp_path: Path, v2: str | None, v1: str | None, expected: int | None
) -> None:
    paths = []
    for name, text in (("memory.max", v2), ("memory.limit_in_bytes", v1)):
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        paths.append(str(path))
    assert container_memory(paths) == expected


def test_workers_fit_the_chart_default_4gi() -> None:
    limits, jobs = fit(Limits(), jobs=8, memory=4 << 30)
    assert limits.worker_memory_bytes == 1024 * MIB and jobs == 3  # 3 x 1 GiB + the parent's 512 MiB


def test_one_worker_gets_what_the_parent_leaves_in_a_small_container() -> None:
    limits, jobs = fit(Limits(), jobs=4, memory=1 << 30)
    assert jobs == 1 and limits.worker_memory_bytes == (1 << 30) - PARENT_RESERVE_BYTES


def test_no_known_limit_changes_nothing() -> None:
    assert fit(Limits(), jobs=4, memory=None) == (Limits(), 4)
