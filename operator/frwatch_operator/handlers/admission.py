"""The admission webhook inside the operator: ``frwatch_operator.webhook``'s mutate handler, fed by the
same job index as detection, and an observer that turns admission notes into Events on the job (posted
in a worker thread, never in the admission request's path)."""

from __future__ import annotations

import asyncio
import logging

import kopf

from frwatch_operator import notices
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.kinds.job_kind import PYTORCHJOB, api_version, kind_of
from frwatch_operator.kube.adapter import ObjectRef
from frwatch_operator.notices import Notice, Reason
from frwatch_operator.webhook import AdmissionNote
from frwatch_operator.webhook import register as register_webhook

logger = logging.getLogger(__name__)


def notice_for(note: AdmissionNote) -> Notice | None:
    if note.warnings and note.injected:
        return Notice("Warning", Reason.CAPTURE_AT_RISK, f"pod {note.pod}: " + " ".join(note.warnings))
    if not note.injected and note.reason:
        return notices.capture_untouched(note.reason)
    if note.warnings:
        return Notice("Warning", Reason.CAPTURE_NOT_INJECTED, f"pod {note.pod}: " + " ".join(note.warnings))
    return None


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    def post(note: AdmissionNote) -> None:
        entry = deps.index.job(note.namespace, note.job)
        notice = notice_for(note)
        if entry is None or notice is None:
            return
        kind = kind_of(entry.kind) or PYTORCHJOB
        ref = ObjectRef(api_version(kind), kind.kind, entry.namespace, entry.name, entry.uid)
        if deps.seen.first_time(f"{ref.uid}/{notice.reason}/{notice.message}"):
            try:
                deps.kube.post_event(ref, notice)
            except Exception:
                logger.exception(
                    "could not post the %s Event on job %s/%s", notice.reason, ref.namespace, ref.name
                )

    def observer(note: AdmissionNote) -> None:
        asyncio.get_running_loop().run_in_executor(None, post, note)

    register_webhook(
        deps.index, deps.config, observer, registry, count=deps.metrics.admission, keys=deps.agent_keys
    )
