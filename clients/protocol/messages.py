"""One class per Kafka schema, built on first use from the generated tables.

    from clients.protocol.messages import ProduceRequest
    ProduceRequest.TopicProduceData, ProduceRequest.PartitionProduceData   # nested structs

Classes are created lazily (module ``__getattr__``) so that a process pays only for the
messages it uses. Field names are the specs' names in snake_case; each field defaults to
the spec's default; ``unknown_tagged_fields`` keeps tagged fields this version of Ketch
does not know, so they round-trip.

Messages are built once (issue 11): every class is a frozen dataclass, so assigning a field
of a request or response after it was built raises ``dataclasses.FrozenInstanceError``;
build the final object in one constructor call instead (``dataclasses.replace`` makes a
changed copy). Kafka's generated ``*Data`` classes have setters but Kafka treats a built
message as a value; here the run time holds code to it.

Type checkers read messages.pyi instead of this module: generated beside _schemas.py by
tools/gen_protocol.py, it declares every class, nested class, field type and constructor
(tests/clients/protocol/test_stub.py holds it to these run-time classes).
"""
from __future__ import annotations

from typing import Any

from clients.protocol import _codec


def __getattr__(name: str) -> Any:
    try:
        cls = _codec.spec_for(name).cls
    except AttributeError:
        raise AttributeError(f"no Kafka schema named {name!r}") from None
    # Kept as a module attribute: later ``messages.X`` lookups find it without this call
    # (one of these per request and response built: ~3 us each, 9x a plain lookup).
    globals()[name] = cls
    return cls


def __dir__() -> list[str]:
    return _codec.schema_names()
