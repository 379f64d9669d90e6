"""Kafka's client side, and the wire format the broker shares with it.

Lives here: the Kafka wire protocol (`clients.protocol`: primitive types, schema-driven
message codecs, framing, error codes), record batches v2 (`clients.records`), and
Ketch's own clients: the asyncio core (`clients.aio`: Producer, Consumer, Admin, over one
`Cluster`), their pure pieces (`clients._core`: config, metadata, partitioner,
accumulator, assignors, membership), the blocking facades exported here
(`from clients import Producer, Consumer, Admin`), value types (`clients.types`) and
errors (`clients.errors`); the CLI and the local cluster launcher.

Does not live here: anything that imports `broker`, `quorum` or `metadata_log`. Imports go
one way: those packages import `clients`, never the reverse.

The facades are imported lazily (module `__getattr__`): a broker process imports
`clients.protocol` and should not pay for the client shells.
"""
from __future__ import annotations

import importlib
from typing import Any

# name -> module that defines it; each client's owner adds its line.
_LAZY = {
    "Producer": "clients.producer",
    "Consumer": "clients.consumer",
    "Admin": "clients.admin",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'clients' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
