"""A tiny real kopf operator for the emulator's kopf test (run by kopf.testing.KopfRunner).

On create: annotates the object (kopf's JSON patch, which starts with a `test` op on
resourceVersion), writes a status condition (status subresource) and posts an Event.
On delete: records nothing, but kopf must remove its finalizer for the object to go away.
"""

from __future__ import annotations

from typing import Any

import kopf

GROUP, VERSION, PLURAL = "emulator.frwatch.io", "v1", "probes"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.watching.server_timeout = 10
    settings.watching.client_timeout = 15
    settings.posting.level = 20  # INFO events are posted as k8s Events


@kopf.on.create(GROUP, VERSION, PLURAL)
def probe_created(body: kopf.Body, patch: kopf.Patch, logger: kopf.Logger, **_: Any) -> dict[str, Any]:
    patch.metadata.annotations["frwatch.io/probed"] = str(body.spec.get("value", ""))
    patch.status["phase"] = "Seen"
    kopf.info(body, reason="Probed", message=f"probe saw value {body.spec.get('value')}")
    return {"echo": body.spec.get("value")}


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec.value")
def probe_changed(new: Any, patch: kopf.Patch, **_: Any) -> None:
    patch.metadata.annotations["frwatch.io/probed"] = str(new)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def probe_deleted(**_: Any) -> None:
    pass
