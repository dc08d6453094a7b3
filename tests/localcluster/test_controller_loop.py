"""What the local cluster's stand-in controllers share (``frwatch_dev.localcluster.controllers``): children
found by their controller owner, one parent's error logged while the others are reconciled, the owner reference
they write. The loops themselves run in every cluster test (``test_batch_jobs``, ``test_jobset_trainer``,
``test_pytorchjob``)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from frwatch_dev.localcluster.controllers import controller_ref, owned, reconcile_each


def obj(name: str, uid: str = "", *refs: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid or f"u-{name}", "ownerReferences": list(refs)}}


def test_children_go_to_their_controller_owner_of_the_kind_only() -> None:
    parent = obj("j", "u-j")
    mine = obj("p-1", "", controller_ref("batch/v1", "Job", parent))
    also = obj("p-2", "", {"kind": "ReplicaSet", "uid": "u-rs", "controller": True}, controller_ref("batch/v1", "Job", parent))
    not_controller = obj("p-3", "", {"kind": "Job", "uid": "u-j", "controller": False})
    other_kind = obj("p-4", "", {"kind": "JobSet", "uid": "u-j", "controller": True})
    orphan = obj("p-5")
    got = owned([mine, also, not_controller, other_kind, orphan], "Job")
    assert got == {"u-j": [mine, also]}
    assert controller_ref("batch/v1", "Job", parent) == {
        "apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-j", "controller": True, "blockOwnerDeletion": True,
    }  # fmt: skip


def test_one_parent_failing_is_logged_and_the_others_are_reconciled(caplog: pytest.LogCaptureFixture) -> None:
    done: list[str] = []

    async def reconcile(parent: dict[str, object]) -> None:
        name = parent["metadata"]["name"]  # type: ignore[index]
        if name == "bad":
            raise ValueError("broken spec")
        done.append(name)

    log = logging.getLogger("test.controllers")
    with caplog.at_level(logging.ERROR, logger="test.controllers"):
        asyncio.run(reconcile_each([obj("a"), obj("bad"), obj("c")], reconcile, "jobset", log))
    assert done == ["a", "c"]
    assert [r.getMessage() for r in caplog.records] == ["jobset ns/bad"]


def test_cancellation_goes_through() -> None:
    done: list[str] = []

    async def reconcile(parent: dict[str, object]) -> None:
        done.append(parent["metadata"]["name"])  # type: ignore[index]
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(reconcile_each([obj("a"), obj("b")], reconcile, "job", logging.getLogger("test.controllers")))
    assert done == ["a"]
