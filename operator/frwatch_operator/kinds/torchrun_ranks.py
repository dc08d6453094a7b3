"""A pod's global ranks, read from the pod itself as torchrun will read them. Pure: a pod body in, ranks out.

JobSet and TrainJob pods carry no rank label: the rank is what torchrun computes from its arguments and
``PET_*`` environment (torch ``torch/distributed/run.py``: each ``--x`` argument defaults to ``PET_X``;
``--nproc-per-node`` defaults to "1"). A pod holds the global ranks
``node_rank * nproc .. node_rank * nproc + nproc - 1``.

Where each fact comes from:

* Kubeflow Trainer v2 (kubeflow/trainer v2.3.0, ``pkg/runtime/framework/plugins/torch/torch.go``
  ``EnforceMLPolicy``) gives the trainer container (named ``node``) ``PET_NNODES`` (literal),
  ``PET_NPROC_PER_NODE`` (literal: the TrainJob's ``numProcPerNode``, else "auto", which it turns into the
  CPU count when no GPU is requested) and ``PET_NODE_RANK`` as a ``fieldRef`` to
  ``metadata.annotations['batch.kubernetes.io/job-completion-index']``
  (``pkg/constants`` ``JobCompletionIndexFieldPath``).
* The Indexed Job controller (kubernetes ``pkg/controller/job/indexed_job_utils.go``) writes that annotation
  on each pod and gives every container ``JOB_COMPLETION_INDEX`` by the same ``fieldRef``; a JobSet user
  typically writes ``torchrun --node-rank=$(JOB_COMPLETION_INDEX)`` (the JobSet PyTorch example).

Only what can be read exactly is used: a literal, a ``fieldRef`` to one of the pod's own annotations or
labels, or a ``$(VAR)``/``${VAR}``/``$VAR`` reference to such an env var. Anything else (arithmetic in a
shell, a ConfigMap reference, "auto") gives **no** rank and says why: a guessed rank would put a dump on
the wrong rank; the agents' pod records (the ranks each pod actually dumped) fill the gap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_operator import constants as c

_FIELD = re.compile(r"metadata\.(annotations|labels)\['([^']{1,253})'\]")
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
#: torchrun's spellings of the two arguments (``--node-rank``/``--node_rank``, ``--nproc-per-node``/...).
_NODE_RANK_ARGS = ("--node-rank", "--node_rank")
_NPROC_ARGS = ("--nproc-per-node", "--nproc_per_node")
_NNODES_ARGS = ("--nnodes",)
_MAX_DIGITS = 9


@dataclass(frozen=True)
class PodRanks:
    """A pod's global ranks, or why they are not known (``problem``; never a guess)."""

    ranks: range = range(0)
    node_rank: int | None = None
    nproc: int | None = None
    nnodes: int | None = None  #: torchrun's ``--nnodes``/``PET_NNODES`` when a single number
    problem: str = ""


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _digits(value: object) -> int | None:
    text = value.strip() if isinstance(value, str) else None
    if text and text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS:
        return int(text)
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


class _Unreadable(Exception):
    """A value frwatch cannot read exactly (the message says which and why)."""


def _env_value(pod: Mapping[str, Any], env: list[Any], name: str) -> str | None:
    """The value the container's env var ``name`` will have (None: not set), from a literal or a
    ``fieldRef`` to the pod's own annotations/labels; _Unreadable for any other source."""
    for var in reversed(env):  # the last definition wins, as in the kubelet
        if not isinstance(var, Mapping) or var.get("name") != name:
            continue
        if "value" in var:
            return str(var.get("value") or "")
        ref = _map(_map(var.get("valueFrom")).get("fieldRef"))
        m = _FIELD.fullmatch(str(ref.get("fieldPath") or ""))
        if m is None:
            raise _Unreadable(f"env {name} comes from {_short(dict(_map(var.get('valueFrom'))))}, not a literal "
                              "or the pod's own annotation/label")  # fmt: skip
        meta = _map(pod.get("metadata"))
        found = _map(meta.get(m.group(1))).get(m.group(2))
        if found is None:
            raise _Unreadable(f"env {name} reads metadata.{m.group(1)}['{m.group(2)}'], which the pod lacks")
        return str(found)
    return None


def _expand(pod: Mapping[str, Any], env: list[Any], text: str, what: str) -> str:
    """``text`` with ``$(VAR)``/``${VAR}``/``$VAR`` replaced by the env's values (_Unreadable when unknown)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        value = _env_value(pod, env, name)
        if value is None:
            raise _Unreadable(f"{what} {_short(text)} refers to ${name}, which the container does not set")
        return value

    return _VAR.sub(one, text)


def _arg(words: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the last ``--name=V`` or ``--name V`` among ``words`` (torchrun: the last one wins)."""
    found: str | None = None
    for i, word in enumerate(words):
        for name in names:
            if word.startswith(name + "="):
                found = word[len(name) + 1 :]
            elif word == name and i + 1 < len(words):
                found = words[i + 1]
    return found


def _words(container: Mapping[str, Any]) -> list[str]:
    """The container's command and args split into words (a ``sh -c "..."`` script split on spaces)."""
    out: list[str] = []
    for part in _list(container.get("command")) + _list(container.get("args")):
        out.extend(str(part).split())
    return out


def _setting(
    pod: Mapping[str, Any], container: Mapping[str, Any], args: tuple[str, ...], env_name: str
) -> tuple[str | None, str]:
    """(the raw value, where it came from) of a torchrun setting: the argument wins over ``PET_*``."""
    env = _list(container.get("env"))
    raw = _arg(_words(container), args)
    if raw is not None:
        return _expand(pod, env, raw, args[0]).strip("\"'"), args[0]
    value = _env_value(pod, env, env_name)
    return (None, "") if value is None else (value, f"env {env_name}")


def _training_containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        x for x in _list(_map(pod.get("spec")).get("containers"))
        if isinstance(x, Mapping) and x.get("name") != c.AGENT_CONTAINER
    ]  # fmt: skip


def _of_container(pod: Mapping[str, Any], container: Mapping[str, Any]) -> PodRanks | None:
    """The container's ranks; None when it does not run torchrun (no node rank argument or env)."""
    name = str(container.get("name") or "?")
    try:
        raw_rank, rank_from = _setting(pod, container, _NODE_RANK_ARGS, c.ENV_PET_NODE_RANK)
        if raw_rank is None:
            return None
        raw_nproc, nproc_from = _setting(pod, container, _NPROC_ARGS, c.ENV_PET_NPROC_PER_NODE)
        raw_nnodes, _ = _setting(pod, container, _NNODES_ARGS, c.ENV_PET_NNODES)
    except _Unreadable as exc:
        return PodRanks(problem=f"container {name}: {exc}")
    node_rank = _digits(raw_rank)
    if node_rank is None:
        return PodRanks(
            problem=f"container {name}: node rank {_short(raw_rank)} (from {rank_from}) is not a number"
        )
    nproc = 1 if raw_nproc is None else _digits(raw_nproc)  # torchrun's default is "1"
    nnodes = _digits(raw_nnodes)
    if nproc is None or nproc == 0:
        return PodRanks(node_rank=node_rank, nnodes=nnodes, problem=(
            f"container {name}: nproc_per_node {_short(raw_nproc)} (from {nproc_from}) is decided by torchrun "
            "at run time"
        ))  # fmt: skip
    first = node_rank * nproc
    if first + nproc > MAX_WORLD_SIZE:
        return PodRanks(node_rank=node_rank, nproc=nproc, nnodes=nnodes, problem=(
            f"container {name}: node rank {node_rank} x nproc_per_node {nproc} is past the {MAX_WORLD_SIZE} "
            "ranks frwatch takes"
        ))  # fmt: skip
    return PodRanks(range(first, first + nproc), node_rank, nproc, nnodes)


def torchrun_ranks(pod: Mapping[str, Any]) -> PodRanks:
    """The pod's global ranks as torchrun will compute them (see the module docstring), or why not."""
    found = [r for r in (_of_container(pod, x) for x in _training_containers(pod)) if r is not None]
    if not found:
        return PodRanks(problem="no container sets PET_NODE_RANK or passes --node-rank to torchrun")
    known = {(r.ranks.start, r.ranks.stop) for r in found if not r.problem}
    if len(found) > 1 and len(known) > 1:
        return PodRanks(problem="its containers disagree on the node rank")
    for r in found:
        if not r.problem:
            return r
    return found[0]
