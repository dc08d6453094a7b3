"""manifest.json: what the operator knew when collection ended (rank -> pod -> node, who dumped, who did not).

Written by the operator, read by the analyzer to turn ranks into pods and nodes and to explain absent dumps.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, PrivateAttr

MANIFEST_VERSION = "frwatch.io/manifest/v1"


class ContainerEnd(BaseModel):
    """How a container of a rank's pod ended (from the pod's status)."""

    container: str
    exit_code: int | None = None
    reason: str = Field(default="", description="e.g. Error, OOMKilled, Completed; 'Evicted' for pods")
    signal: int | None = None
    restart_count: int = 0


class PodRecord(BaseModel):
    """One pod of the job attempt."""

    pod: str
    node: str = ""
    ranks: list[int] = Field(default_factory=list, description="global ranks this pod held")
    phase: str = ""
    deleted: bool = False
    ended: list[ContainerEnd] = Field(default_factory=list)


class RankRecord(BaseModel):
    """One global rank: where it ran and whether its dump reached the store."""

    rank: int
    pod: str = ""
    node: str = ""
    dumped: bool = False
    key: str = Field(default="", description="object key of the dump, when dumped")
    why_missing: str = Field(default="", description="when not dumped: what the operator knows")


class Manifest(BaseModel):
    """The operator's record of one job attempt's collection."""

    manifest_version: str = MANIFEST_VERSION
    namespace: str = ""
    job: str = ""
    job_uid: str = ""
    attempt: str = ""
    world_size: int | None = None
    ranks: list[RankRecord] = Field(default_factory=list)
    pods: list[PodRecord] = Field(default_factory=list)
    collection_started: str = ""
    collection_ended: str = ""
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
