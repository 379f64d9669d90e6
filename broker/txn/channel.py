"""Requests from this broker to other brokers: one pipelined connection per broker.

The transaction coordinator sends WriteTxnMarkers to partition leaders, and leaders send
AddPartitionsToTxn (verify_only) to coordinators (Kafka's ``TransactionMarkerChannelManager``
and ``AddPartitionsToTxnManager``, both on the inter-broker listener). Unlike Kafka, the
coordinator does not send either to its own broker: it writes those markers and answers
those verifications in-process (``TransactionCoordinatorDriver``).

A connection that fails or times out is dropped; the next request dials again. Callers
retry as their protocol says (markers until every partition answered; a verification
failure is a retriable produce error).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from clients.connection import KafkaConnection, connect
from clients.security.client_auth import PLAINTEXT_SECURITY, ClientSecurity

log = logging.getLogger(__name__)

__all__ = ["BrokerChannel"]


class BrokerChannel:
    def __init__(self, broker_id: int, endpoint_of: Callable[[int], tuple[str, int] | None],
                 request_timeout_ms: int, security: ClientSecurity = PLAINTEXT_SECURITY) -> None:
        """``security``: TLS and the login on the inter-broker listener."""
        self.broker_id = broker_id
        self.security = security
        self.endpoint_of = endpoint_of
        self.request_timeout_ms = request_timeout_ms
        self._connections: dict[int, KafkaConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def _connection(self, target: int) -> KafkaConnection:
        lock = self._locks.setdefault(target, asyncio.Lock())
        async with lock:
            conn = self._connections.get(target)
            if conn is not None and not conn.closed:
                return conn
            endpoint = self.endpoint_of(target)
            if endpoint is None:
                raise ConnectionError(f"broker {target} has no endpoint in the metadata")
            conn = await connect(*endpoint, client_id=f"broker-{self.broker_id}-txn",
                                 security=self.security, negotiate=True)
            self._connections[target] = conn
            return conn

    async def request(self, target: int, api_key: int, versions: tuple[int, int],
                      body: Any) -> Any:
        """One request to broker ``target`` at the highest version both speak; raises
        ConnectionError (also when the peer lacks the API) or asyncio.TimeoutError."""
        conn = await self._connection(target)
        version = conn.pick_version(api_key, *versions)   # the connection stays usable
        try:
            return await conn.request(api_key, version, body,
                                      timeout_s=self.request_timeout_ms / 1000)
        except (ConnectionError, OSError, asyncio.TimeoutError):
            conn.close()
            self._connections.pop(target, None)
            raise

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
