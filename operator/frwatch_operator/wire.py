"""The base of every model of frwatch's custom resources (:mod:`frwatch_operator.resources`,
:mod:`frwatch_operator.repeat_resources`): camelCase on the wire, snake_case in Python, unknown fields rejected;
and the one shared piece those and the config use, a container's resources."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Wire(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields rejected (a typo is an error)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def wire(self) -> dict[str, object]:
        """The object as Kubernetes stores it: camelCase keys, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class ComputeResources(Wire):
    """A container's resources, as in a pod spec (quantities are Kubernetes strings: '500m', '1Gi')."""

    requests: dict[str, str] = Field(
        default_factory=dict, description="Resource requests, e.g. {'cpu': '50m'}."
    )
    limits: dict[str, str] = Field(
        default_factory=dict, description="Resource limits, e.g. {'memory': '128Mi'}."
    )
