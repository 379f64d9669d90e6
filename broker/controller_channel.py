"""The broker's link to the controller quorum.

Brokers reach the controllers through their Kafka listeners: the voters given statically
(``controller.quorum.voters``) or learned from the quorum after starting from
``controller.quorum.bootstrap.servers`` (``broker/controller_endpoints.py``, shared with the
heartbeat channel and the metadata fetch). ``follow_voters`` keeps that knowledge current
with DescribeQuorum v2, so a controller added later is used and one removed is not tried.
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

from broker.controller_endpoints import ControllerEndpoints, voter_endpoints
from clients.clock import monotonic_ms
from clients.connection import KafkaConnection, connect
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.security.client_auth import PLAINTEXT_SECURITY, ClientSecurity

log = logging.getLogger(__name__)

__all__ = ["ControllerChannel", "ControllerUnavailableError", "quorum_leader"]


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


def quorum_leader(resp: messages.DescribeQuorumResponse) -> int:
    """The leader a DescribeQuorum answer names (-1: none)."""
    return next((p.leader_id for t in resp.topics for p in t.partitions), -1)


class ControllerChannel:
    def __init__(self, endpoints: ControllerEndpoints, client_id: str,
                 retry_backoff_ms: int = 100,
                 on_connection_lost: Callable[[], None] | None = None,
                 security: ClientSecurity = PLAINTEXT_SECURITY,
                 listener_name: str = "CONTROLLER", keep_on_timeout: bool = False) -> None:
        """``endpoints``: where the controllers are and which is active (shared with the
        broker's other channels). ``security``: TLS and the SASL login on the controllers'
        listener (the broker's credentials for it, ``sasl.mechanism.controller.protocol``);
        ``listener_name``: that listener's name, the one picked from DescribeQuorum's nodes."""
        self.endpoints = endpoints
        self.security = security
        self.listener_name = listener_name
        # Told when a connection to a controller ends (the heartbeat channel's owner
        # heartbeats again at once: the controller fences a broker whose heartbeat
        # connection stays gone, ketch.broker.disconnect.fence.ms).
        self.on_connection_lost = on_connection_lost
        # A request that timed out leaves its connection open (its late answer is dropped):
        # the heartbeat channel's, whose close the controller takes for a dead broker. A
        # slow controller (under load) then fenced live brokers, moving every leadership.
        self.keep_on_timeout = keep_on_timeout
        self.client_id = client_id
        self.retry_backoff_ms = retry_backoff_ms
        # node id -> (connection, the address it was opened to)
        self._conns: dict[int, tuple[KafkaConnection, tuple[str, int]]] = {}
        self._generation = endpoints.generation
        self._closed = False

    @property
    def active_id(self) -> int | None:
        return self.endpoints.active_id

    async def _conn(self, node_id: int) -> KafkaConnection:
        self._forget_moved()
        address = self.endpoints.address(node_id)
        if address is None:
            raise ConnectionError(f"controller {node_id} is no voter any more")
        held = self._conns.get(node_id)
        if held is not None and not held[0].closed and held[1] == address:
            return held[0]
        if held is not None:
            held[0].close()
        conn = await connect(*address, client_id=self.client_id, timeout_s=2.0,
                             on_closed=self.on_connection_lost, security=self.security,
                             negotiate=True)
        self._conns[node_id] = (conn, address)
        return conn

    def _forget_moved(self) -> None:
        """Close connections to controllers that are no voters (or moved) since the voter
        set was last learned."""
        if self._generation == self.endpoints.generation:
            return
        self._generation = self.endpoints.generation
        wanted = set(self.endpoints.order())
        for node_id, (_, address) in list(self._conns.items()):
            if node_id not in wanted or self.endpoints.address(node_id) != address:
                self._drop(node_id)

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
        endpoints = self.endpoints
        while loop.time() < deadline:
            tried: set[int] = set()
            # The active controller first, then the others; a hint moves it to the front.
            while (node_id := endpoints.next_to_try(tried)) is not None:
                tried.add(node_id)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    conn = await self._conn(node_id)
                    version = conn.pick_version(api_key, *versions)
                    resp = await conn.request(api_key, version, body, timeout_s=remaining,
                                              close_on_timeout=not self.keep_on_timeout)
                except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                    last_error = e
                    if not (self.keep_on_timeout and isinstance(e, asyncio.TimeoutError)):
                        self._drop(node_id)
                    endpoints.unreachable(node_id)
                    continue
                code = _error_code_of(resp)
                if code == ErrorCode.NOT_CONTROLLER and not any_controller:
                    endpoints.leader_hint(getattr(resp, "controller_id", -1))
                    last_error = ConnectionError(f"controller {node_id} is not active")
                    continue
                named = leader_of(resp) if leader_of is not None else node_id
                if named != node_id and named >= 0:
                    endpoints.leader_hint(named)
                    if endpoints.active_id == named and named not in tried:
                        last_error = ConnectionError(f"controller {node_id} follows {named}")
                        continue
                if not any_controller:
                    endpoints.accepted(node_id)
                return version, resp
            endpoints.round_failed()
            await asyncio.sleep(self.retry_backoff_ms / 1000)
        raise ControllerUnavailableError(f"no active controller answered: {last_error}")

    async def refresh_voters(self, timeout_s: float = 5.0) -> bool:
        """Ask the controllers for the voters (DescribeQuorum v2's nodes) and keep them;
        True if they changed. A controller too old for v2 names no nodes: nothing learned."""
        D = messages.DescribeQuorumRequest
        request = D(topics=[D.TopicData(topic_name="__cluster_metadata",
                                        partitions=[D.TopicData.PartitionData(partition_index=0)])])
        try:
            # The leader's answer where it can be had: a removed controller that still runs
            # describes the voter set as it was when it left.
            version, resp = await self.request(ApiKey.DESCRIBE_QUORUM, (2, 2), request,
                                               timeout_s=timeout_s, any_controller=True,
                                               leader_of=quorum_leader)
        except ConnectionError as e:
            log.debug("describing the controller quorum failed: %s", e)
            self.endpoints.refresh_failed(monotonic_ms())
            return False
        voters = voter_endpoints(resp.nodes or (), self.listener_name)
        if not voters:      # refused (not authorized), or no voters named: not in a tight loop
            log.debug("DescribeQuorum named no voters (error %s)", resp.error_code)
            self.endpoints.refresh_failed(monotonic_ms())
            return False
        changed = self.endpoints.learn(voters, monotonic_ms())
        if changed:
            log.info("controller voters: %s", ", ".join(
                f"{n}@{h}:{p}" for n, (h, p) in sorted(voters.items())))
        return changed

    async def follow_voters(self) -> None:
        """Keep the voters current (run as a task for the broker's life; ``close`` ends it:
        a flag, as Python 3.11's wait_for can swallow a cancellation)."""
        while not self._closed:
            wait_ms = self.endpoints.poll(monotonic_ms())
            if wait_ms > 0:
                # Woken early at most every 200 ms: a hint naming an unknown controller
                # makes the refresh due at once.
                await asyncio.sleep(min(wait_ms, 200) / 1000)
                continue
            await self.refresh_voters()

    def _drop(self, node_id: int) -> None:
        held = self._conns.pop(node_id, None)
        if held is not None:
            held[0].close()

    def close(self) -> None:
        self._closed = True
        for node_id in list(self._conns):
            self._drop(node_id)
