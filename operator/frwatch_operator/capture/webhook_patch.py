"""Flight Recorder injection: a pod body in, JSON-patch operations and user-facing warnings out. Pure.

What :func:`inject` adds to a pod of an opted-in job:

* to every regular container (the training containers): the Flight Recorder variables (buffer size, dump
  path prefix, NCCL dump-on-timeout, the on-demand pipe prefix) under the names its torch reads without a
  warning (:func:`_torch_names`: new names from torch 2.9, old ones before; ``torch_env_names``), never
  overriding a value the user set (when the user set one name of a pair, the other gets the user's
  value); the pod identity through the downward API; the shared dump volume at ``fr.dump_dir``; NCCL's
  debug file into that volume where the user set no NCCL logging of their own (:func:`nccl_env`);
* the shared dump volume (``emptyDir``);
* the frwatch agent as a native sidecar (``frwatch_operator.capture.sidecar``: an init container with
  ``restartPolicy: Always``, first, so it runs before and alongside every other container; it passes the
  Pod Security Standard "restricted"), with its control token when the operator has a key;
* ``imagePullSecrets`` for the agent's image (``agent.image_pull_secrets``), each named once: they must
  exist in the job's namespace, which the answer's notices say;
* ``terminationGracePeriodSeconds`` of at least the agent's drain budget plus
  :data:`GRACE_MARGIN_SECONDS`, so the kubelet does not kill the agent while it uploads the last dumps
  (absent: set; lower: raised, with a warning);
* the annotation ``frwatch.io/injected``: a pod that carries it is returned unchanged.

What a pod arrives with that only frwatch may set is stripped first (:func:`strip_lookalikes`, called by the
webhook before :func:`inject`): every ``frwatch.io/*`` annotation (so ``frwatch.io/injected`` no longer skips
the injection, nor does a pre-set ``frwatch.io/agent-id`` name another pod's token), every ``FRWATCH_*``
variable of its containers, its own ``frwatch-ctl`` ports and its own volume named like frwatch's dump
volume (with the mounts of it); a container named ``frwatch-agent`` is renamed
``frwatch-agent-lookalike``: it still runs, it is not the agent and holds no token. The agent and its
token (:func:`agent_id_ops`) are then frwatch's alone.

Warnings (for the AdmissionReview and an Event) name the container and the variable when a user value
would lose the dump. Each piece is skipped when already present, so a partial earlier injection is
completed rather than duplicated. Malformed pods raise :class:`InjectionError`; a pod frwatch will not
inject raises :class:`NotInjected` with the reason: one past the size budget (:data:`MAX_CONTAINERS`,
:data:`MAX_LIST_ITEMS`: the webhook must answer within the API server's timeout, and a real training pod
is far smaller), or one with a container of its own named ``frwatch-agent`` (a second container of that
name would make the API server refuse the pod; the webhook renames such a container first, so only a
direct caller meets this). Callers admit both as they are, with a warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator.capture.recorder_env import torchcomms_pairs, torchcomms_warnings
from frwatch_operator.capture.sidecar import JobContext, agent_container, identity_env, is_ours
from frwatch_operator.capture.torch_env_names import pick, torch_names
from frwatch_operator.config import Config
from frwatch_operator.resources import CaptureSettings

INJECTED_VALUE = "v1"  #: value of frwatch.io/injected (the injection's format version)
#: Seconds of terminationGracePeriodSeconds beyond the agent's drain budget (its own start-up of the drain
#: and exit; the kubelet's SIGKILL comes after the whole period).
GRACE_MARGIN_SECONDS = 5


#: The most containers (regular and init) a pod may have for frwatch to inject it.
MAX_CONTAINERS = 64
#: The most env, envFrom and volumeMounts entries (all containers) plus volumes a pod may have.
MAX_LIST_ITEMS = 4096


class InjectionError(ValueError):
    """The pod body is not shaped like a pod; nothing was injected."""


class NotInjected(Exception):
    """frwatch does not inject this pod (the message says why and what to do); it is admitted as is."""


@dataclass(frozen=True)
class Injection:
    """The result: RFC 6902 operations against the pod as given, and warnings for the user."""

    ops: list[dict[str, Any]]
    warnings: list[str]
    #: What the user should know that is no risk to the capture (for the AdmissionReview, not an Event).
    notices: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.ops)


def _ptr(*parts: str | int) -> str:
    """A JSON pointer (RFC 6901) from path parts."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _env_list(container: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    env = container.get("env")
    if env is None:
        return []
    if not isinstance(env, list) or not all(
        isinstance(e, Mapping) and isinstance(e.get("name"), str) for e in env
    ):
        raise InjectionError(f"{where}.env is not a list of {{name: ...}}")
    return env


def _user_env(env: Sequence[Mapping[str, Any]]) -> dict[str, str | None]:
    """name -> literal value (None when set through valueFrom)."""
    out: dict[str, str | None] = {}
    for e in env:
        value = e.get("value")
        out[str(e["name"])] = str(value) if value is not None and "valueFrom" not in e else None
    return out


def _fr_pairs(settings: CaptureSettings, config: Config) -> list[tuple[tuple[str, ...], str]]:
    """(names that mean the same thing, default value) for the training containers; which of a renamed pair
    are set is :func:`_torch_names`'s choice."""
    prefix = config.fr.path_prefix
    pairs: list[tuple[tuple[str, ...], str]] = [
        ((c.ENV_FR_BUFFER_SIZE, c.ENV_FR_BUFFER_SIZE_OLD), str(settings.buffer_size)),
        ((c.ENV_FR_DUMP_TEMP_FILE, c.ENV_FR_DUMP_TEMP_FILE_OLD), prefix),
        ((c.ENV_NCCL_PIPE_FILE,), prefix),
    ]
    if config.fr.dump_on_timeout:
        pairs.append(((c.ENV_NCCL_DUMP_ON_TIMEOUT,), "1"))
    return pairs + torchcomms_pairs(settings.buffer_size, config.fr.dump_dir)


def _torch_names(names: tuple[str, ...], settings: CaptureSettings, config: Config, image: str) -> tuple[str, ...]:
    """Of ``names`` (a renamed pair: new, old), the ones this container's torch reads without a warning
    (the job's declared torch version, its image's, the operator's default: frwatch_operator.capture.torch_env_names)."""
    which = torch_names(settings.torch_version, image, config.fr.torch_version)
    return pick(names, which)


def _warnings_for(container: str, user: Mapping[str, str | None], config: Config) -> list[str]:
    """User values that would lose the dump."""
    out: list[str] = []
    for name in (c.ENV_FR_BUFFER_SIZE, c.ENV_FR_BUFFER_SIZE_OLD):
        if user.get(name) is not None and str(user[name]).strip() == "0":
            out.append(
                f"frwatch: container {container!r} sets {name}=0, which turns the Flight Recorder off: "
                "no dump will exist after a hang; remove it or set 2000"
            )
    if (user.get(c.ENV_NCCL_ASYNC_ERROR_HANDLING) or "").strip() == "1":
        out.append(
            f"frwatch: container {container!r} sets {c.ENV_NCCL_ASYNC_ERROR_HANDLING}=1, which can tear the "
            "process down before the Flight Recorder dump is written (pytorch#121055); use 3 or unset it"
        )
    if (user.get(c.ENV_NCCL_DUMP_ON_TIMEOUT) or "").strip() in {"0", "false", "False"}:
        out.append(
            f"frwatch: container {container!r} sets {c.ENV_NCCL_DUMP_ON_TIMEOUT}=0: NCCL will not dump on a "
            "watchdog timeout; only on-demand dumps will be collected"
        )
    for name in (c.ENV_FR_DUMP_TEMP_FILE, c.ENV_FR_DUMP_TEMP_FILE_OLD):
        value = user.get(name)
        if value is not None and not value.startswith(config.fr.dump_dir.rstrip("/") + "/"):
            out.append(
                f"frwatch: container {container!r} sets {name}={value!r}, outside the shared dump folder "
                f"{config.fr.dump_dir!r}: the frwatch agent cannot see those dumps; remove it"
            )
    return out


def _size(items: Any) -> int:
    return len(items) if isinstance(items, list) else 0


def check_budget(containers: Sequence[Any], inits: Sequence[Any], volumes: Sequence[Any]) -> None:
    """Raise :class:`NotInjected` when the pod is larger than frwatch injects (counted in one pass)."""
    if len(containers) + len(inits) > MAX_CONTAINERS:
        raise NotInjected(
            f"the pod has {len(containers) + len(inits)} containers, more than the {MAX_CONTAINERS} frwatch "
            "injects; capture is off for it"
        )
    items = len(volumes) + sum(
        _size(x.get("env")) + _size(x.get("envFrom")) + _size(x.get("volumeMounts"))
        for x in (*containers, *inits)
        if isinstance(x, Mapping)
    )
    if items > MAX_LIST_ITEMS:
        raise NotInjected(
            f"the pod has {items} env, envFrom, volumeMounts and volumes entries, more than the "
            f"{MAX_LIST_ITEMS} frwatch injects; capture is off for it"
        )


def check_names(containers: Sequence[Any], inits: Sequence[Any]) -> None:
    """Raise :class:`NotInjected` when a container of the pod's own is named like the agent."""
    clash = [x for x in containers if isinstance(x, Mapping) and x.get("name") == c.AGENT_CONTAINER]
    clash += [x for x in inits if isinstance(x, Mapping) and x.get("name") == c.AGENT_CONTAINER and not is_ours(x)]
    if clash:
        raise NotInjected(
            f"the pod already has a container named {c.AGENT_CONTAINER!r}; a second one would make the API "
            "server refuse the pod, so capture is off for it: rename that container"
        )


def strip_lookalikes(pod: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """What a pod arrived with that only frwatch sets, removed: the pod without it (a copy), the RFC 6902
    ``replace`` ops that make it so (before :func:`inject`'s ops, which are computed on the copy), and a
    warning for each thing removed. Raises :class:`InjectionError` on a body that is not pod-shaped."""
    if not isinstance(pod, Mapping) or not isinstance(pod.get("spec"), Mapping):
        raise InjectionError("the pod has no spec object")
    meta = pod.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise InjectionError("metadata is not an object")
    clean: dict[str, Any] = {**pod, "spec": dict(pod["spec"])}
    ops: list[dict[str, Any]] = []
    warnings: list[str] = []
    annotations = (meta or {}).get("annotations")
    if isinstance(annotations, Mapping) and any(str(k).startswith(c.PREFIX) for k in annotations):
        kept = {k: v for k, v in annotations.items() if not str(k).startswith(c.PREFIX)}
        dropped = sorted(str(k) for k in annotations if str(k).startswith(c.PREFIX))
        clean["metadata"] = {**(meta or {}), "annotations": kept}
        ops.append({"op": "replace", "path": _ptr("metadata", "annotations"), "value": kept})
        warnings.append(f"frwatch: annotations only frwatch sets were removed from the pod: {', '.join(dropped)[:300]}")
    spec = clean["spec"]
    taken = {str(x.get("name")) for key in ("containers", "initContainers") for x in spec.get(key) or []
             if isinstance(x, Mapping)}  # fmt: skip
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if not isinstance(items, list):
            continue
        for i, container in enumerate(items):
            if not isinstance(container, Mapping):
                continue
            fixed, why = _strip_container(container, taken)
            if why:
                spec[key] = items = list(items)
                items[i] = fixed
                ops.append({"op": "replace", "path": _ptr("spec", key, i), "value": fixed})
                warnings.append(f"frwatch: container {str(container.get('name'))[:63]!r}: {why}")
    volumes = spec.get("volumes")
    if isinstance(volumes, list) and any(isinstance(v, Mapping) and v.get("name") == c.DUMP_VOLUME for v in volumes):
        spec["volumes"] = [v for v in volumes if not (isinstance(v, Mapping) and v.get("name") == c.DUMP_VOLUME)]
        ops.append({"op": "replace", "path": _ptr("spec", "volumes"), "value": spec["volumes"]})
        warnings.append(f"frwatch: the pod's own volume named {c.DUMP_VOLUME!r} was removed (frwatch's replaces it)")
    return clean, ops, warnings


def _strip_container(container: Mapping[str, Any], taken: set[str]) -> tuple[dict[str, Any], str]:
    """The container without what only frwatch sets (renamed if named like the agent), and what changed."""
    fixed = dict(container)
    what: list[str] = []
    if container.get("name") == c.AGENT_CONTAINER:
        name, n = c.LOOKALIKE_CONTAINER, 1
        while name in taken:
            n += 1
            name = f"{c.LOOKALIKE_CONTAINER}-{n}"
        taken.add(name)
        fixed["name"] = name
        what.append(f"renamed {name!r}: only the agent frwatch injects bears the name {c.AGENT_CONTAINER!r}")
    env = container.get("env")
    if isinstance(env, list) and any(isinstance(e, Mapping) and str(e.get("name", "")).startswith(c.ENV_PREFIX) for e in env):
        fixed["env"] = [e for e in env if not (isinstance(e, Mapping) and str(e.get("name", "")).startswith(c.ENV_PREFIX))]
        what.append(f"its {c.ENV_PREFIX}* variables were removed (only frwatch sets them)")
    ports = container.get("ports")
    if isinstance(ports, list) and any(isinstance(p, Mapping) and p.get("name") == c.AGENT_CONTROL_PORT_NAME for p in ports):
        fixed["ports"] = [p for p in ports if not (isinstance(p, Mapping) and p.get("name") == c.AGENT_CONTROL_PORT_NAME)]
        what.append(f"its port named {c.AGENT_CONTROL_PORT_NAME!r} was removed")
    mounts = container.get("volumeMounts")
    if isinstance(mounts, list) and any(isinstance(m, Mapping) and m.get("name") == c.DUMP_VOLUME for m in mounts):
        fixed["volumeMounts"] = [m for m in mounts if not (isinstance(m, Mapping) and m.get("name") == c.DUMP_VOLUME)]
        what.append(f"its mount of its own {c.DUMP_VOLUME!r} was removed")
    return fixed, "; ".join(what)


def agent_id_ops(agent_id: str) -> list[dict[str, Any]]:
    """The op recording the pod's agent id (after :func:`inject`'s ops: the annotations exist by then)."""
    return [{"op": "add", "path": _ptr("metadata", "annotations", c.ANN_AGENT_ID), "value": agent_id}]


def inject(
    pod: Mapping[str, Any], settings: CaptureSettings, config: Config, job: JobContext, token: str | None = None
) -> Injection:
    """Compute the patch that turns ``pod`` into a captured pod, its agent holding ``token``. Idempotent;
    never mutates ``pod``."""
    if not isinstance(pod, Mapping):
        raise InjectionError("the object is not a JSON object")
    meta = pod.get("metadata") or {}
    spec = pod.get("spec")
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        raise InjectionError("the pod has no metadata or no spec object")
    annotations = meta.get("annotations")
    if annotations is not None and not isinstance(annotations, Mapping):
        raise InjectionError("metadata.annotations is not an object")
    if annotations and c.ANN_INJECTED in annotations:
        return Injection([], [])
    containers = spec.get("containers")
    if (
        not isinstance(containers, list)
        or not containers
        or not all(isinstance(x, Mapping) for x in containers)
    ):
        raise InjectionError("spec.containers is not a non-empty list of objects")
    for key in ("initContainers", "volumes", "imagePullSecrets"):
        if spec.get(key) is not None and not isinstance(spec.get(key), list):
            raise InjectionError(f"spec.{key} is not a list")
    inits = spec.get("initContainers") or []
    check_budget(containers, inits, spec.get("volumes") or [])
    check_names(containers, inits)

    ops: list[dict[str, Any]] = []
    warnings: list[str] = []
    pairs = _fr_pairs(settings, config)

    for i, container in enumerate(containers):
        name = str(container.get("name", f"#{i}"))
        where = f"spec.containers[{i}] ({name})"
        env = _env_list(container, where)
        user = _user_env(env)
        warnings += _warnings_for(name, user, config) + torchcomms_warnings(name, user, config.fr.dump_dir)
        if container.get("envFrom"):
            warnings.append(
                f"frwatch: container {name!r} uses envFrom; Flight Recorder variables set there are "
                "overridden by frwatch's defaults (set them in env to keep them)"
            )
        new_env: list[dict[str, Any]] = []
        for names, default in pairs:
            set_names = [n for n in names if n in user]
            value = next((user[n] for n in set_names if user[n] is not None), default)
            image = str(container.get("image") or "")
            new_env += [{"name": n, "value": value} for n in _torch_names(names, settings, config, image) if n not in user]
        new_env += [e for e in identity_env() if e["name"] not in user]
        new_env += nccl_env(user, bool(container.get("envFrom")), config)
        mounts = container.get("volumeMounts")
        if mounts is not None and not isinstance(mounts, list):
            raise InjectionError(f"{where}.volumeMounts is not a list")
        has_mount = any(isinstance(m, Mapping) and m.get("name") == c.DUMP_VOLUME for m in mounts or [])
        taken_path = any(
            isinstance(m, Mapping) and m.get("mountPath") == config.fr.dump_dir for m in mounts or []
        )
        ops += _append(("spec", "containers", i, "env"), container.get("env"), new_env)
        if not has_mount and not taken_path:
            ops += _append(
                ("spec", "containers", i, "volumeMounts"),
                mounts,
                [{"name": c.DUMP_VOLUME, "mountPath": config.fr.dump_dir}],
            )
        elif not has_mount:
            warnings.append(f"frwatch: container {name!r} already mounts something at {config.fr.dump_dir}")

    volumes = spec.get("volumes") or []
    vol_names = {v.get("name") for v in volumes if isinstance(v, Mapping)}
    new_volumes: list[dict[str, Any]] = []
    if c.DUMP_VOLUME not in vol_names:
        new_volumes.append({"name": c.DUMP_VOLUME, "emptyDir": {"sizeLimit": config.fr.volume_size_limit}})
    ops += _append(("spec", "volumes"), spec.get("volumes"), new_volumes)

    grace_op, grace_warning = _grace(spec, config)
    ops += grace_op
    warnings += grace_warning

    if not any(is_ours(x) for x in inits):
        agent = agent_container(settings, config, job, token)
        if inits:
            ops.append({"op": "add", "path": _ptr("spec", "initContainers", 0), "value": agent})
        else:
            ops.append({"op": "add", "path": _ptr("spec", "initContainers"), "value": [agent]})

    notices: list[str] = []
    pulls = spec.get("imagePullSecrets")
    have = {p.get("name") for p in pulls or [] if isinstance(p, Mapping)}
    wanted = [{"name": n} for n in config.agent.pull_secrets if n not in have]
    ops += _append(("spec", "imagePullSecrets"), pulls, wanted)
    if config.agent.pull_secrets:
        notices.append(
            f"frwatch: the agent's image is pulled with imagePullSecrets {', '.join(config.agent.pull_secrets)}: "
            "each must exist in the pod's namespace (frwatch does not create it)"
        )

    if annotations is None:
        parent = {
            "op": "add",
            "path": _ptr("metadata", "annotations"),
            "value": {c.ANN_INJECTED: INJECTED_VALUE},
        }
        if "metadata" not in pod:
            parent = {
                "op": "add",
                "path": _ptr("metadata"),
                "value": {"annotations": {c.ANN_INJECTED: INJECTED_VALUE}},
            }
        ops.append(parent)
    else:
        ops.append(
            {"op": "add", "path": _ptr("metadata", "annotations", c.ANN_INJECTED), "value": INJECTED_VALUE}
        )
    return Injection(ops, warnings, notices)


def nccl_env(user: Mapping[str, str | None], env_from: bool, config: Config) -> list[dict[str, Any]]:
    """``NCCL_DEBUG=WARN`` and ``NCCL_DEBUG_FILE`` into the dump folder (the agent uploads the file as
    ``nccl/<rank>.txt``), only where the user set neither (nor could have through ``envFrom``): a user's
    own NCCL logging stays where they sent it. NCCL replaces ``%h`` with the host name and ``%p`` with
    the pid (NCCL docs, "Logging"). When the container's own ``RANK`` is its global rank (a literal number,
    one process a pod: ``PET_NPROC_PER_NODE`` unset or 1) the file name carries it: ``nccl.<rank>.%h.%p.txt``."""
    if not config.evidence.nccl_debug or env_from or c.ENV_NCCL_DEBUG in user or c.ENV_NCCL_DEBUG_FILE in user:
        return []
    rank = user.get("RANK")
    one = user.get("PET_NPROC_PER_NODE", "1") == "1"
    hint = f"{rank}." if rank is not None and rank.isascii() and rank.isdigit() and len(rank) <= 7 and one else ""
    path = f"{config.fr.dump_dir.rstrip('/')}/{c.NCCL_FILE_PREFIX}{hint}%h.%p{c.NCCL_FILE_SUFFIX}"
    return [{"name": c.ENV_NCCL_DEBUG, "value": "WARN"}, {"name": c.ENV_NCCL_DEBUG_FILE, "value": path}]


def termination_grace(config: Config) -> int:
    """The least terminationGracePeriodSeconds that leaves the agent its whole drain budget."""
    return math.ceil(config.agent.drain_seconds) + GRACE_MARGIN_SECONDS


def _grace(spec: Mapping[str, Any], config: Config) -> tuple[list[dict[str, Any]], list[str]]:
    """The op setting (or raising) the pod's terminationGracePeriodSeconds, and the warning if raised."""
    needed = termination_grace(config)
    current = spec.get("terminationGracePeriodSeconds")
    if current is not None and (not isinstance(current, int) or isinstance(current, bool)):
        raise InjectionError("spec.terminationGracePeriodSeconds is not an integer")
    if current is not None and current >= needed:
        return [], []
    op = {"op": "add", "path": _ptr("spec", "terminationGracePeriodSeconds"), "value": needed}
    if current is None:
        return [op], []
    return [op], [
        f"frwatch: terminationGracePeriodSeconds raised from {current} to {needed}: the frwatch agent needs "
        f"{config.agent.drain_seconds:g} s after SIGTERM to upload the last Flight Recorder dumps"
    ]


def _append(
    path: tuple[str | int, ...], current: object, items: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Ops appending ``items`` to the list at ``path`` (creating it when absent)."""
    if not items:
        return []
    if current is None:
        return [{"op": "add", "path": _ptr(*path), "value": items}]
    return [{"op": "add", "path": _ptr(*path, "-"), "value": item} for item in items]


def attempt_of(pod: Mapping[str, Any], job_attempt: str) -> str:
    """The attempt a new pod belongs to: the JobSet restart-attempt label if present, else the job's."""
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if isinstance(labels, Mapping) and labels.get(c.LABEL_JOBSET_RESTART_ATTEMPT) is not None:
        return str(labels[c.LABEL_JOBSET_RESTART_ATTEMPT])
    return job_attempt


def apply_ops(doc: dict[str, Any], ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Apply this module's ``add`` and ``replace`` operations to ``doc`` in place (for kopf's patch fns and
    tests)."""
    for op in ops:
        if op.get("op") not in ("add", "replace"):
            raise ValueError(f"only 'add' and 'replace' operations are produced here, got {op.get('op')!r}")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
        target: Any = doc
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        last = parts[-1]
        if isinstance(target, list) and op["op"] == "replace":
            target[int(last)] = op["value"]
        elif isinstance(target, list):
            if last == "-":
                target.append(op["value"])
            else:
                target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]
    return doc
