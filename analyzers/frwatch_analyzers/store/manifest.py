"""manifest.json: what the operator knew when collection ended (rank -> pod -> node, who dumped, who did not).

Written by the operator, read by the analyzer to turn ranks into pods and nodes and to explain absent dumps.
Read back from the store it is untrusted: every name is made printable as it is read (a node name with a
terminal escape or a newline would otherwise reach the report and the job's annotations), and the analyzer
holds its ranks and world size to sane bounds (:mod:`frwatch_analyzers.load.consistency`); it is read at most
``limits.MAX_MANIFEST_BYTES`` (the analyzer's read stops there) and its types are strict.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr

from ..base.limits import MAX_MANIFEST_BYTES
from ..base.safe_text import printable

#: A name read from the manifest, made printable (identity for Kubernetes names).
Text = Annotated[str, AfterValidator(printable)]

MANIFEST_VERSION = "frwatch.io/manifest/v1"
#: Read back, a number is a number and a flag a flag (``true`` is no rank, ``"3"`` no exit code).
_STRICT = ConfigDict(strict=True)


class ContainerEnd(BaseModel):
    """How a container of a rank's pod ended (from the pod's status)."""

    model_config = _STRICT

    container: Text
    exit_code: int | None = None
    reason: Text = Field(default="", description="e.g. Error, OOMKilled, Completed; 'Evicted' for pods")
    signal: int | None = None
    restart_count: int = 0


class ContainerLog(BaseModel):
    """A training container's log evidence (``logs/<pod>/<container>[.previous|.termination].txt``, the
    operator read it from the API), or why there is none (``unavailable``: the pod was deleted first,
    pods/log was forbidden, ...)."""

    model_config = _STRICT

    container: Text
    variant: Literal["tail", "previous", "termination"] = "tail"
    key: Text = Field(default="", description="object key of the stored log, when stored")
    bytes: int = 0
    cut: bool = Field(default=False, description="only its tail was kept (evidence.log_max_bytes)")
    unavailable: Text = Field(default="", description="why there is no log; empty when stored")


class PodRecord(BaseModel):
    """One pod of the job attempt."""

    model_config = _STRICT

    pod: Text
    node: Text = ""
    ranks: list[int] = Field(default_factory=list, description="global ranks this pod held")
    phase: Text = ""
    deleted: bool = False
    ended: list[ContainerEnd] = Field(default_factory=list)
    logs: list[ContainerLog] = Field(default_factory=list, description="its containers' log evidence")


class RankRecord(BaseModel):
    """One global rank: where it ran and whether its dump reached the store."""

    model_config = _STRICT

    rank: int
    pod: Text = ""
    node: Text = ""
    dumped: bool = False
    key: Text = Field(default="", description="object key of the dump, when dumped")
    why_missing: Text = Field(default="", description="when not dumped: what the operator knows")


class Manifest(BaseModel):
    """The operator's record of one job attempt's collection."""

    model_config = _STRICT

    manifest_version: Text = MANIFEST_VERSION
    namespace: Text = ""
    job: Text = ""
    job_uid: Text = ""
    attempt: Text = ""
    world_size: int | None = None
    ranks: list[RankRecord] = Field(default_factory=list)
    pods: list[PodRecord] = Field(default_factory=list)
    collection_started: Text = ""
    collection_ended: Text = ""
    deadline_reached: bool = False

    _index: dict[int, tuple[str, str]] | None = PrivateAttr(default=None)

    def _lookup(self, rank: int) -> tuple[str, str]:
        """(pod, node) of a rank, from an index built once (a 16k-rank manifest is read per rank)."""
        if self._index is None:
            index: dict[int, tuple[str, str]] = {}
            for p in self.pods:
                for r in p.ranks:
                    index.setdefault(r, (p.pod, p.node))
            for rr in self.ranks:
                pod, node = index.get(rr.rank, ("", ""))
                index[rr.rank] = (rr.pod or pod, rr.node or node)
            self._index = index
        return self._index.get(rank, ("", ""))

    def node_of(self, rank: int) -> str:
        return self._lookup(rank)[1]

    def pod_of(self, rank: int) -> str:
        return self._lookup(rank)[0]


def parse_manifest(data: bytes) -> Manifest:
    """manifest.json read back. Raises ValueError, unparsed, past ``MAX_MANIFEST_BYTES``, and pydantic's
    ValidationError (a ValueError too) for a document that is not a manifest."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ValueError(f"{len(data)} bytes is over the limit of {MAX_MANIFEST_BYTES} bytes")
    return Manifest.model_validate_json(data)
