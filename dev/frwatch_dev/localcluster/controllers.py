"""What the local cluster's stand-in controllers share: the informer loop and the owner lookup.

The Job controller, the JobSet controller, the training-operator and the Trainer controller each run
:func:`run_loop` (list + watch their collections, then a round of reconciles at every change and at least
every ``tick`` seconds), find each parent's children with :func:`owned` (by the controller owner
reference, as the real controllers' informers index them) and reconcile one parent at a time with
:func:`reconcile_each` (one parent's error is logged, the others go on). Each writes its children's owner
reference with :func:`controller_ref`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from frwatch_dev.localcluster.client import Api, Informer

Obj = dict[str, Any]


async def run_loop(
    api_url: str,
    informers_of: Callable[[Api, asyncio.Event], Sequence[Informer]],
    one_round: Callable[[Api, Sequence[Informer]], Awaitable[None]],
    *,
    ready: asyncio.Event,
    tick: float,
) -> None:
    """Until cancelled: start the informers ``informers_of`` makes, set ``ready`` once all listed, then call
    ``one_round`` at every change they see and at least every ``tick`` seconds; stop them on the way out."""
    wake = asyncio.Event()
    async with Api(api_url) as api:
        informers = informers_of(api, wake)
        for informer in informers:
            informer.start()
        try:
            for informer in informers:
                await informer.synced.wait()
            ready.set()
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=tick)
                wake.clear()
                await one_round(api, informers)
        finally:
            for informer in informers:
                await informer.stop()


def owned(children: Iterable[Obj], kind: str) -> dict[str, list[Obj]]:
    """``children`` by the uid of their controller owner of ``kind`` (those without one are left out)."""
    by_owner: dict[str, list[Obj]] = {}
    for child in children:
        for ref in child["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == kind:
                by_owner.setdefault(str(ref.get("uid")), []).append(child)
    return by_owner


async def reconcile_each(
    parents: Iterable[Obj], reconcile: Callable[[Obj], Awaitable[None]], what: str, logger: logging.Logger
) -> None:
    """``reconcile`` every parent in turn; an error is logged (``<what> <namespace>/<name>``) and the next
    one goes on. Cancellation goes through."""
    for parent in parents:
        try:
            await reconcile(parent)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("%s %s/%s", what, parent["metadata"].get("namespace"), parent["metadata"]["name"])


def controller_ref(api_version: str, kind: str, owner: Mapping[str, Any]) -> Obj:
    """The owner reference of a child made by ``owner``'s controller (``controller``, ``blockOwnerDeletion``)."""
    meta = owner["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip
