"""``nodes/<node>.json``: what the operator read about a suspect node (its conditions and the recent Events
that name it) when it collected the attempt's evidence.

The operator writes it (:meth:`NodeRecord.to_json`) for each node where a rank of the attempt ran and it
suspects; the analyzer reads it (:func:`parse_node_record`) to see whether the node itself was sick:
node-problem-detector conditions, GPU health conditions, and Xid Events that DCGM, NVSentinel or NPD write.
``unavailable`` says what could not be read (``"events: forbidden"``, ``"node: not found"``) so that an
absent signal is never taken for a healthy node.

Read back it is untrusted (tenant-reachable processes write the store): at most
:data:`MAX_NODE_RECORD_BYTES` are parsed, every text is made printable and cut, a field of the wrong type
reads as absent, a condition or Event that is not one is dropped (the others stay), and at most
:data:`MAX_CONDITIONS` conditions and :data:`MAX_EVENTS` Events are kept.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError

from ..base.safe_text import printable
from .lenient import or_absent

NODE_RECORD_VERSION = "frwatch.io/node/v1"
#: A node record larger than this is not read (a real one: a dozen conditions and tens of Events, < 64 KB).
MAX_NODE_RECORD_BYTES = 1024 * 1024
#: Conditions kept (a node has about 5 built-in ones; node-problem-detector and GPU health add a dozen).
MAX_CONDITIONS = 64
#: Events kept (the recent ones the operator listed; it asks for no more than this).
MAX_EVENTS = 256
#: Characters kept of a message (an Xid Event's message is under 200).
MAX_MESSAGE = 1024
#: Characters kept of a name, type, reason, status or time.
_SHORT = 253


def _short(value: str) -> str:
    return printable(value[: _SHORT * 2], _SHORT)


def _message(value: str) -> str:
    return printable(value[: MAX_MESSAGE * 2], MAX_MESSAGE)


#: Short text (a name, type, reason, status, time) that reads as empty when it is not text.
Short = Annotated[str, or_absent(""), AfterValidator(_short)]
Message = Annotated[str, or_absent(""), AfterValidator(_message)]


class NodeCondition(BaseModel):
    """One of ``node.status.conditions`` (``Ready``, ``MemoryPressure``, an NPD or GPU health condition)."""

    model_config = ConfigDict(strict=True, frozen=True)

    type: Annotated[str, AfterValidator(_short)]
    status: Short = ""
    reason: Short = ""
    message: Message = ""
    last_transition_time: Short = ""


class NodeEvent(BaseModel):
    """One recent Event whose involved object is the node (e.g. an Xid Event: reason and message carry
    the Xid number)."""

    model_config = ConfigDict(strict=True, frozen=True)

    type: Short = ""
    reason: Short = ""
    message: Message = ""
    count: Annotated[int | None, or_absent(None)] = None
    last_timestamp: Short = ""
    source_component: Short = ""


def _kept(model: type[BaseModel], limit: int) -> BeforeValidator:
    """A list of which the entries that are no ``model`` are dropped, the first ``limit`` good ones kept."""

    def keep(value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            return ()
        good: list[Any] = []
        for item in value[: limit * 4]:
            try:
                good.append(model.model_validate(item))
            except (ValidationError, ValueError, RecursionError):
                continue
            if len(good) == limit:
                break
        return tuple(good)

    return BeforeValidator(keep)


def _notes(value: Any) -> tuple[str, ...]:
    """What could not be read: the text entries of a list, made printable and cut (the rest dropped)."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(_message(v) for v in value[:MAX_CONDITIONS] if isinstance(v, str))


class NodeRecord(BaseModel):
    """``nodes/<node>.json``: a suspect node's conditions and recent Events, when they were read
    (``read_at``, RFC 3339) and what could not be read (``unavailable``)."""

    model_config = ConfigDict(strict=True, frozen=True)

    node_record_version: Short = NODE_RECORD_VERSION
    node: Annotated[str, AfterValidator(_short)]
    conditions: Annotated[tuple[NodeCondition, ...], _kept(NodeCondition, MAX_CONDITIONS)] = ()
    events: Annotated[tuple[NodeEvent, ...], _kept(NodeEvent, MAX_EVENTS)] = ()
    read_at: Short = ""
    unavailable: Annotated[tuple[str, ...], BeforeValidator(_notes)] = ()

    def to_json(self) -> bytes:
        """The record as the operator writes it."""
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True).encode()


def parse_node_record(data: bytes) -> NodeRecord | None:
    """A node record read back from the store, or None when it is not one (never raises)."""
    if len(data) > MAX_NODE_RECORD_BYTES:
        return None
    try:
        return NodeRecord.model_validate_json(data)
    except (ValidationError, ValueError, RecursionError):
        return None
