"""Opt-in: is capture on for a PyTorchJob, and with which settings? Pure: no I/O, no clock.

Rules, in order:
1. ``frwatch.io/capture: disabled`` on the job: capture off, whatever the policies say.
2. A malformed ``frwatch.io/capture`` value: the job is left **untouched**, with a reason to post as an Event.
3. A CapturePolicy of the namespace whose spec is malformed: if its selector still parses and does not
   select the job, it is ignored; otherwise (it selects the job, or its selector is unreadable) the job
   is left untouched, naming the policy and the error.
4. Valid policies selecting the job: the oldest (creationTimestamp, then name) wins; the others are named.
5. ``frwatch.io/capture: enabled`` alone: capture with the operator's defaults.
6. Otherwise: capture off.

Remediation is safe by construction: a policy can narrow what the operator allows, never widen it
(enabled needs both, dry-run if either says so, the smaller node cap wins).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from frwatch_operator import constants as c
from frwatch_operator.config import Config
from frwatch_operator.resources import CapturePolicySpec, CaptureSettings, LabelSelector, LivePolicyName


class OptIn(StrEnum):
    """The three outcomes of opt-in resolution."""

    ENABLED = "enabled"  #: capture on, with ``CaptureDecision.settings``
    DISABLED = "disabled"  #: not opted in (or opted out): nothing to say
    UNTOUCHED = "untouched"  #: something the user wrote is malformed: leave the job as is, post ``reason``


@dataclass(frozen=True)
class CaptureDecision:
    """What to do with a job and why (``reason`` is one sentence a person reads; Event-ready)."""

    outcome: OptIn
    reason: str
    settings: CaptureSettings | None = None
    policy: str | None = None  #: name of the CapturePolicy that applied, if any
    ignored_policies: tuple[str, ...] = field(default=())

    @property
    def enabled(self) -> bool:
        return self.outcome is OptIn.ENABLED


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def defaults(config: Config) -> CaptureSettings:
    """The settings of a job opted in by annotation alone."""
    return CaptureSettings(
        buffer_size=config.fr.buffer_size,
        bucket=config.s3.bucket,
        prefix=config.s3.prefix,
        collection_deadline_seconds=config.collection.deadline_seconds,
        analyzer_image=config.analyzer.image,
        analyzer_resources=config.analyzer.resources,
        analyzer_deadline_seconds=config.analyzer.deadline_seconds,
        agent_resources=config.agent.resources,
        remediation_enabled=config.remediation.enabled,
        remediation_dry_run=config.remediation.dry_run,
        max_nodes_per_incident=config.remediation.max_nodes_per_incident,
        repeat_dry_run=config.remediation.repeat_dry_run,
        live_policy=LivePolicyName(config.operator.live_policy),
    )


def apply_policy(base: CaptureSettings, spec: CapturePolicySpec) -> CaptureSettings:
    """Overlay a policy's set fields on the defaults (remediation can only get safer)."""
    rem = spec.remediation
    return CaptureSettings(
        buffer_size=spec.buffer_size if spec.buffer_size is not None else base.buffer_size,
        bucket=spec.bucket or base.bucket,
        prefix=spec.prefix if spec.prefix is not None else base.prefix,
        collection_deadline_seconds=spec.collection_deadline_seconds or base.collection_deadline_seconds,
        analyzer_image=spec.analyzer.image or base.analyzer_image,
        analyzer_resources=spec.analyzer.resources or base.analyzer_resources,
        analyzer_deadline_seconds=spec.analyzer.deadline_seconds or base.analyzer_deadline_seconds,
        agent_resources=spec.agent_resources or base.agent_resources,
        remediation_enabled=base.remediation_enabled and (rem.enabled is not False),
        remediation_dry_run=base.remediation_dry_run or bool(rem.dry_run),
        max_nodes_per_incident=min(
            base.max_nodes_per_incident,
            rem.max_nodes_per_incident
            if rem.max_nodes_per_incident is not None
            else base.max_nodes_per_incident,
        ),
        repeat_policy=spec.repeat.policy or base.repeat_policy,
        repeat_dry_run=base.repeat_dry_run or bool(spec.repeat.dry_run),
        live_enabled=spec.live_watch.enabled if spec.live_watch.enabled is not None else base.live_enabled,
        live_policy=spec.live_watch.policy or base.live_policy,
    )


def _declared_torch(settings: CaptureSettings, annotations: Mapping[str, str]) -> CaptureSettings:
    """The job's own ``frwatch.io/torch-version`` (which Flight Recorder variable names its torch reads)."""
    declared = annotations.get(c.ANN_TORCH_VERSION, "").strip()[:32]
    return settings.model_copy(update={"torch_version": declared}) if declared else settings


def _first_error(exc: ValidationError) -> str:
    errs = exc.errors()
    where = ".".join(str(p) for p in errs[0]["loc"]) or "spec"
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"spec.{where}: {errs[0]['msg']}{more}"


def resolve(job: Mapping[str, Any], policies: Iterable[Mapping[str, Any]], config: Config) -> CaptureDecision:
    """Decide capture for ``job`` (a PyTorchJob body or just ``{"metadata": ...}``) given the
    CapturePolicy bodies of its namespace (policies of other namespaces are ignored)."""
    meta = _meta(job)
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    namespace = str(meta.get("namespace") or "")
    raw_value = annotations.get(c.ANN_CAPTURE)

    if raw_value is not None and raw_value.strip() == c.CAPTURE_DISABLED:
        return CaptureDecision(OptIn.DISABLED, f"{c.ANN_CAPTURE} is {c.CAPTURE_DISABLED!r} on the job")
    if raw_value is not None and raw_value.strip() != c.CAPTURE_ENABLED:
        return CaptureDecision(
            OptIn.UNTOUCHED,
            f"annotation {c.ANN_CAPTURE}={raw_value!r} is neither {c.CAPTURE_ENABLED!r} nor "
            f"{c.CAPTURE_DISABLED!r}: capture left off; set it to {c.CAPTURE_ENABLED!r} to opt in",
        )

    selecting: list[tuple[str, str, CapturePolicySpec]] = []
    for policy in policies:
        pmeta = _meta(policy)
        if namespace and pmeta.get("namespace") not in (None, "", namespace):
            continue
        name = str(pmeta.get("name") or "?")
        created = str(pmeta.get("creationTimestamp") or "")
        spec_raw = policy.get("spec")
        try:
            spec = CapturePolicySpec.model_validate(spec_raw if spec_raw is not None else {})
        except ValidationError as exc:
            selector_raw = spec_raw.get("jobSelector", {}) if isinstance(spec_raw, Mapping) else None
            try:
                selector = LabelSelector.model_validate(selector_raw)
            except ValidationError:
                selector = None
            if selector is not None and not selector.matches(labels):
                continue
            return CaptureDecision(
                OptIn.UNTOUCHED,
                f"{c.POLICY_KIND} {name!r} may select this job but is malformed ({_first_error(exc)}): "
                "capture left as is; fix the policy",
                policy=name,
            )
        if spec.job_selector.matches(labels):
            selecting.append((created, name, spec))

    if selecting:
        selecting.sort(key=lambda t: (t[0], t[1]))
        _, name, spec = selecting[0]
        others = tuple(n for _, n, _ in selecting[1:])
        why = f"{c.POLICY_KIND} {name!r} selects the job"
        if raw_value is not None:
            why += f" (and {c.ANN_CAPTURE}={c.CAPTURE_ENABLED!r})"
        if others:
            why += f"; also selected by {', '.join(others)} (ignored: the oldest policy wins)"
        settings = _declared_torch(apply_policy(defaults(config), spec), annotations)
        return CaptureDecision(OptIn.ENABLED, why, settings, policy=name, ignored_policies=others)
    if raw_value is not None:
        return CaptureDecision(
            OptIn.ENABLED,
            f"{c.ANN_CAPTURE}={c.CAPTURE_ENABLED!r} on the job",
            _declared_torch(defaults(config), annotations),
        )
    return CaptureDecision(OptIn.DISABLED, "no annotation and no CapturePolicy selects the job")
