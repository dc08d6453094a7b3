"""manifest.json: what the operator knew when collection ended (rank -> pod -> node, who dumped, who did not).

Written by the operator, read by the analyzer to turn ranks into pods and nodes and to explain absent dumps.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

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

    def node_of(self, rank: int) -> str:
        for r in self.ranks:
            if r.rank == rank and r.node:
                return r.node
        for p in self.pods:
            if rank in p.ranks:
                return p.node
        return ""

    def pod_of(self, rank: int) -> str:
        for r in self.ranks:
            if r.rank == rank and r.pod:
                return r.pod
        for p in self.pods:
            if rank in p.ranks:
                return p.pod
        return ""
