"""Notices to the people on call (``notify.webhookUrl``): when an Incident reaches Reported, the leader offers
its one-line verdict to :class:`~frwatch_operator.verdict.notifier.Notifier` (never waiting for the send) and, once
it is sent or given up, marks the Incident (``frwatch.io/notified``) so it is not sent again by this or
another replica. Off when no URL is set."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import kopf

from frwatch_operator import constants as c
from frwatch_operator.errors import FrwatchError
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.verdict.notice import NOTIFIED_ANNOTATION, Notice, due, notice_of
from frwatch_operator.verdict.notifier import Notifier, SendPolicy

logger = logging.getLogger(__name__)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    settings = deps.config.notify
    if settings.webhook_url is None:
        return
    policy = SendPolicy(
        attempts=settings.attempts, timeout_seconds=settings.timeout_seconds, queue_size=settings.queue_size
    )

    def done(notice: Notice, outcome: str) -> None:
        try:
            deps.kube.annotate_incident(notice.namespace, notice.incident, {NOTIFIED_ANNOTATION: outcome})
        except FrwatchError as exc:  # deleted meanwhile, or the API is down: it may be offered once more
            logger.warning("Incident %s/%s not marked %s: %s", notice.namespace, notice.incident, outcome, exc)

    notifier = Notifier(settings.webhook_url.get_secret_value(), policy, done, deps.metrics.notification)
    logger.info("verdicts are announced to %s", notifier.host)

    @kopf.on.event(c.GROUP, c.VERSION, c.INCIDENT_PLURAL, id="frwatch-notify", registry=registry)
    def incident_reported(type: str | None, body: kopf.Body, **_: Any) -> None:
        if type == "DELETED" or not deps.leader.leading():
            return
        if due(body, datetime.now(UTC), settings.max_age_seconds):
            notifier.offer(notice_of(body))

    @kopf.on.cleanup(registry=registry)
    def stop_notifier(**_: Any) -> None:
        notifier.close()
