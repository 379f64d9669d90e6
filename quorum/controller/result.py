"""`ControllerResult`: what a controller decision returns (Kafka's ControllerResult).

A decision never changes state. It returns the records to append, as one atomic batch,
and the response to send once they are committed. With no records, the response can go
out at once. State changes only when the committed batch is replayed
(``QuorumController.replay``), the same code path standbys, brokers and snapshot loading
use.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["ControllerResult", "NO_RECORDS"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[R]):
    records: tuple[Any, ...]    # clients.protocol.messages metadata records, in log order
    response: R                 # a clients.protocol.messages response, or None for poll()


NO_RECORDS: tuple[Any, ...] = ()
