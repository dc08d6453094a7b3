"""``pods/<pod>.json``: one pod of a job attempt, as its agent or the operator wrote it. One model, two writers.

The pod's agent writes it as it uploads (:meth:`StoredPodRecord.agent_json`: the pod, its node, the ranks
it dumped and where each dump went, what it skipped in the dump folder and what was replaced before it
could be uploaded). For a pod whose agent wrote none, the operator writes the pod's facts as the manifest
holds them (:meth:`StoredPodRecord.operator_json`, ``writer: "operator"``).

Read back (:func:`parse_pod_record`) it is untrusted (tenant-reachable processes write the store): at most
:data:`MAX_POD_RECORD_BYTES` are parsed, types are strict, the pod's name must be a string, and a field of
the wrong type reads as absent rather than losing the record (its ranks are the agent's evidence of which
dumps the pod wrote: a record with one bad rank keeps the good ones, each below ``MAX_WORLD_SIZE``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError

from ..base.limits import MAX_WORLD_SIZE
from .layout import AttemptKey
from .lenient import or_absent
from .manifest import ContainerEnd, PodRecord

#: A pod record larger than this is not read (a real one lists a pod's ranks and uploads: a few KB).
MAX_POD_RECORD_BYTES = 1024 * 1024
#: ``writer`` of the records the operator writes (the agent's have none).
OPERATOR = "operator"
#: A Kubernetes name is at most this long; longer text read back is cut.
_NAME = 253

_AGENT_FIELDS = ("pod", "namespace", "node", "uid", "job", "job_uid", "attempt", "agent_started_at", "ranks",
                 "dumps", "skipped", "replaced")  # fmt: skip
_OPERATOR_FIELDS = ("writer", "namespace", "job", "job_uid", "attempt", "pod", "node", "ranks", "phase",
                    "deleted", "ended")  # fmt: skip


def _ranks(value: Any) -> tuple[int, ...]:
    """The valid ranks of a list (integers in ``[0, MAX_WORLD_SIZE)``), sorted; the rest are dropped."""
    if not isinstance(value, list | tuple | range):
        return ()
    good = {r for r in value[:MAX_WORLD_SIZE] if type(r) is int and 0 <= r < MAX_WORLD_SIZE}
    return tuple(sorted(good))


def _name(value: str) -> str:
    return value[:_NAME]


Name = Annotated[str, AfterValidator(_name)]
#: Text that reads as empty when it is not text.
Text = Annotated[str, or_absent("")]


class RankUpload(BaseModel):
    """Where one dump of a rank went (an entry of the agent's record)."""

    model_config = ConfigDict(strict=True, frozen=True)

    key: str
    bytes: int
    sha256: str
    format: str
    corrupt: bool
    uploaded_at: float


class StoredPodRecord(BaseModel):
    """``pods/<pod>.json``. The agent's fields: ``uid``, ``agent_started_at``, ``dumps`` (rank -> its
    uploads), ``skipped``, ``replaced``; the operator's: ``writer``, ``phase``, ``deleted``, ``ended``."""

    model_config = ConfigDict(strict=True, frozen=True)

    pod: Name
    namespace: Text = ""
    node: Annotated[str, or_absent(""), AfterValidator(_name)] = ""
    uid: Text = ""
    job: Text = ""
    job_uid: Text = ""
    attempt: Text = ""
    agent_started_at: Annotated[float | None, or_absent(None)] = None
    ranks: Annotated[tuple[int, ...], BeforeValidator(_ranks)] = ()
    dumps: Annotated[dict[str, list[RankUpload]] | None, or_absent({})] = None
    skipped: Annotated[list[dict[str, str]], or_absent([])] = []
    replaced: Annotated[list[dict[str, Any]], or_absent([])] = []
    writer: Text = ""
    phase: Text = ""
    deleted: Annotated[bool, or_absent(False)] = False
    ended: Annotated[list[ContainerEnd], or_absent([])] = []

    def with_uploads(
        self, uploads: dict[int, list[RankUpload]], skipped: list[dict[str, str]], replaced: list[dict[str, Any]],
    ) -> StoredPodRecord:  # fmt: skip
        """The agent's record with what it uploaded (rank -> uploads), skipped and lost so far."""
        return self.model_copy(
            update={
                "ranks": tuple(sorted(uploads)),
                "dumps": {str(r): list(ups) for r, ups in sorted(uploads.items())},
                "skipped": list(skipped),
                "replaced": list(replaced),
            }
        )

    def agent_json(self) -> bytes:
        """The record as the agent writes it."""
        body = self.model_dump(mode="json", include=set(_AGENT_FIELDS))
        return json.dumps({k: body[k] for k in _AGENT_FIELDS}, indent=1).encode()

    @classmethod
    def of_manifest_pod(cls, record: PodRecord, key: AttemptKey) -> StoredPodRecord:
        """The record the operator writes for a pod whose agent wrote none (it never dumped, or was never
        injected): the same pod facts the manifest holds, marked as the operator's."""
        return cls(
            writer=OPERATOR, namespace=key.namespace, job=key.job, job_uid=key.job_uid, attempt=key.attempt,
            pod=record.pod, node=record.node, ranks=tuple(record.ranks), phase=record.phase,
            deleted=record.deleted, ended=list(record.ended),
        )  # fmt: skip

    def operator_json(self) -> bytes:
        """The record as the operator writes it."""
        body = self.model_dump(mode="json", include=set(_OPERATOR_FIELDS))
        return json.dumps(body, indent=1, sort_keys=True).encode()


def parse_pod_record(data: bytes) -> StoredPodRecord | None:
    """A pod record read back from the store, or None when it is not one (never raises)."""
    if len(data) > MAX_POD_RECORD_BYTES:
        return None
    try:
        return StoredPodRecord.model_validate_json(data)
    except (ValidationError, ValueError, RecursionError):
        return None
