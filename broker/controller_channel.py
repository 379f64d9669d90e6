"""The broker's link to the controller quorum.

Brokers reach the controllers through their Kafka listeners (``controller.quorum.voters``).
Writes (registration, heartbeats, AlterPartition, forwarded admin requests, producer id
blocks) must reach the *active* controller: a standby answers NOT_CONTROLLER, naming the
active one where it knows it, and the channel follows. Reads of the metadata log (the
metadata fetch) can go to any controller that has committed the records.

On a secured controller listener (``controller.listener.names`` mapped to SSL, SASL_PLAINTEXT
or SASL_SSL in ``listener.security.protocol.map``) every connection runs TLS and logs in
first, with the broker's ``ClientSecurity`` for that listener.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from clients.connection import KafkaConnection, connect
from clients.protocol.errors import ErrorCode
from clients.security.client_auth import PLAINTEXT_SECURITY, ClientSecurity

log = logging.getLogger(__name__)

__all__ = ["ControllerChannel", "ControllerUnavailableError"]


class ControllerUnavailableError(ConnectionError):
    """No controller answered in time (the quorum may have lost its majority)."""


def _error_code_of(body: Any) -> int:
    """The top-level error, or NOT_CONTROLLER where a per-item error says so (CreateTopics
    and friends carry errors per topic only)."""
    code = getattr(body, "error_code", ErrorCode.NONE)
    if code != ErrorCode.NONE:
        return code
    for name in getattr(type(body), "__slots__", ()):
        value = getattr(body, name, None)
        if isinstance(value, list):
            for item in value:
                if getattr(item, "error_code", None) == ErrorCode.NOT_CONTROLLER:
                    return ErrorCode.NOT_CONTROLLER
    return ErrorCode.NONE


class ControllerChannel:
    def __init__(self, voters: dict[int, tuple[str, int]], client_id: str,
                 retry_backoff_ms: int = 100,
                 on_connection_lost: Callable[[], None] | None = None,
                 security: ClientSecurity = PLAINTEXT_SECURITY) -> None:
        """``security``: TLS and the SASL login on the controllers' listener (the broker's
        credentials for it, ``sasl.mechanism.controller.protocol``)."""
        self.voters = voters
        self.security = security
        # Told when a connection to a controller ends (the heartbeat channel's owner
        # heartbeats again at once: the controller fences a broker whose heartbeat
        # connection stays gone, ketch.broker.disconnect.fence.ms).
        self.on_connection_lost = on_connection_lost
        self.client_id = client_id
        self.retry_backoff_ms = retry_backoff_ms
        self.active_id: int | None = None
        self._conns: dict[int, KafkaConnection] = {}
        self._lock = asyncio.Lock()

    async def _conn(self, node_id: int) -> KafkaConnection:
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        host, port = self.voters[node_id]
        conn = await connect(host, port, client_id=self.client_id, timeout_s=2.0,
                             on_closed=self.on_connection_lost, security=self.security,
                             negotiate=True)
        self._conns[node_id] = conn
        return conn

    def _candidates(self) -> list[int]:
        ids = sorted(self.voters)
        if self.active_id in self.voters:
            ids.remove(self.active_id)
            ids.insert(0, self.active_id)
        return ids

    async def request(self, api_key: int, versions: tuple[int, int], body: Any,
                      timeout_s: float = 10.0, any_controller: bool = False,
                      leader_of: Callable[[Any], int] | None = None) -> tuple[int, Any]:
        """Send to the active controller (or any, for reads); (version used, response).
        Retries through NOT_CONTROLLER and unreachable controllers until ``timeout_s``.
        ``leader_of(response)``: for a read every controller answers (DescribeQuorum), the
        leader the answer names; an answer from another controller is asked again there."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        last_error: BaseException | None = None
        while loop.time() < deadline:
            for node_id in self._candidates():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    conn = await self._conn(node_id)
                    version = conn.pick_version(api_key, *versions)
                    resp = await conn.request(api_key, version, body, timeout_s=remaining)
                except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                    last_error = e
                    self._drop(node_id)
                    continue
                code = _error_code_of(resp)
                if code == ErrorCode.NOT_CONTROLLER and not any_controller:
                    hinted = getattr(resp, "controller_id", -1)
                    self.active_id = hinted if hinted in self.voters else None
                    last_error = ConnectionError(f"controller {node_id} is not active")
                    continue
                named = leader_of(resp) if leader_of is not None else node_id
                if named != node_id and named in self.voters:
                    self.active_id = named
                    last_error = ConnectionError(f"controller {node_id} follows {named}")
                    break
                if not any_controller:
                    self.active_id = node_id
                return version, resp
            await asyncio.sleep(self.retry_backoff_ms / 1000)
        raise ControllerUnavailableError(f"no active controller answered: {last_error}")

    def _drop(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()
        if self.active_id == node_id:
            self.active_id = None

    def close(self) -> None:
        for node_id in list(self._conns):
            self._drop(node_id)
