"""Cluster: the one way every Ketch client reaches brokers.

Holds one pipelined `KafkaConnection` per node (bootstrap servers get the negative ids
-1, -2, ... until the first Metadata response names the brokers, as the Java client's
NetworkClient does), negotiates API versions on each new connection, keeps the latest
`ClusterMetadata` view, coalesces concurrent metadata refreshes, caches group
coordinators, and applies Kafka's backoffs: `reconnect.backoff.ms` growing to
`reconnect.backoff.max.ms` per node, `retry.backoff.ms` to `retry.backoff.max.ms` between
metadata attempts, each with +-20% jitter (Kafka's ExponentialBackoff).

What it does not do: retry a request. A broken connection or a request that timed out
raises a `ConnectionError` subclass and the caller (producer, consumer, admin) decides,
since only it knows whether the request is safe to resend. The next request to that
node reconnects (after the node's backoff).
"""
from __future__ import annotations

import asyncio
import itertools
import random
import socket
from collections.abc import Iterable, Mapping
from typing import Any, Callable

from clients._core.config import ClientConfig
from clients._core.metadata import BrokerMetadata, ClusterMetadata
from clients.connection import KafkaConnection, open_stream
from clients.security.client_auth import ClientSecurity
from clients.errors import (
    ClientClosedError, CoordinatorNotAvailableError, KafkaApiError, KafkaConnectionError, KafkaTimeoutError,
    LeaderNotAvailableError, NoBrokersAvailableError, NodeNotReadyError, RequestTimeoutError,
    UnknownTopicOrPartitionError, UnsupportedVersionError, for_code,
)
from clients.protocol import ApiKey, messages
from clients.protocol import _schemas
from clients.protocol.api_keys import REQUEST_NAMES
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

__all__ = ["Cluster", "METADATA_VERSIONS", "FIND_COORDINATOR_VERSIONS", "ExponentialBackoff", "dedicated_node"]

METADATA_VERSIONS = (4, 12)           # v4: allow_auto_topic_creation; v10+: topic ids
FIND_COORDINATOR_VERSIONS = (0, 6)    # v4+: batched coordinator_keys
_client_ids = itertools.count(1)


# A second connection to a broker, for requests it may hold a long time (a JoinGroup waits
# for the whole rebalance): responses on one connection come in request order, so fetches
# sent after a held JoinGroup would wait for it. Kafka's Java client talks to its group
# coordinator over a connection of its own, id Integer.MAX_VALUE - node id; so does Ketch's.
DEDICATED_NODE_BASE = 2**31 - 1


def dedicated_node(node_id: int) -> int:
    """The id of a second connection to broker `node_id` (pass it to `Cluster.request`)."""
    assert 0 <= node_id < DEDICATED_NODE_BASE // 2
    return DEDICATED_NODE_BASE - node_id


class ExponentialBackoff:
    """Kafka's ExponentialBackoff: initial * 2^attempts, capped, with +-jitter."""

    def __init__(self, initial_ms: int, max_ms: int, rng: random.Random, jitter: float = 0.2,
                 multiplier: float = 2.0) -> None:
        self.initial_ms, self.max_ms, self.rng = initial_ms, max(initial_ms, max_ms), rng
        self.jitter, self.multiplier = jitter, multiplier

    def backoff_ms(self, attempts: int) -> float:
        if self.initial_ms == 0:
            return 0.0
        base = min(self.initial_ms * self.multiplier ** max(attempts, 0), self.max_ms)
        return base * self.rng.uniform(1 - self.jitter, 1 + self.jitter)


def our_versions(api_key: int) -> tuple[int, int]:
    """The versions Ketch's codec can write and read for an API."""
    return _schemas.SCHEMAS[REQUEST_NAMES[api_key]][2]


class _Node:
    """Connection state of one broker (or bootstrap server)."""

    __slots__ = ("node_id", "address", "conn", "connecting", "failures", "ready_at",
                 "in_flight", "last_used")

    def __init__(self, node_id: int, address: tuple[str, int]) -> None:
        self.node_id = node_id
        self.address = address
        self.conn: KafkaConnection | None = None
        self.connecting: asyncio.Future | None = None
        self.failures = 0              # consecutive failed connects (drives the backoff)
        self.ready_at = 0.0            # loop time before which we do not reconnect
        self.in_flight = 0
        self.last_used = 0.0

    @property
    def connected(self) -> bool:
        return self.conn is not None and not self.conn.closed


class Cluster:
    def __init__(self, config: ClientConfig, *, rng: random.Random | None = None) -> None:
        self.config = config
        self.client_id: str = config["client.id"] or f"ketch-{config.kind}-{next(_client_ids)}"
        self._rng = rng or random.Random()
        self._bootstrap: list[tuple[str, int]] = []
        for server in config["bootstrap.servers"]:
            host, _, port = server.rpartition(":")
            self._bootstrap.append((host.strip("[]"), int(port)))
        self._metadata = ClusterMetadata.empty()
        self._nodes: dict[int, _Node] = {}
        self._coordinator_addresses: dict[int, tuple[str, int]] = {}
        self._coordinators: dict[tuple[str, int], int] = {}
        # In-flight metadata refreshes: (topics or None for all, auto-create flag, task).
        self._refreshing: list[tuple[frozenset[str] | None, bool, asyncio.Task]] = []
        self._interesting: set[str] = set()     # topics the periodic refresh keeps fresh
        self._reconnect = ExponentialBackoff(config["reconnect.backoff.ms"],
                                             config["reconnect.backoff.max.ms"], self._rng)
        self.retry_backoff = ExponentialBackoff(config["retry.backoff.ms"],
                                         config["retry.backoff.max.ms"], self._rng)
        self._setup_timeout = ExponentialBackoff(config["socket.connection.setup.timeout.ms"],
                                                 config["socket.connection.setup.timeout.max.ms"],
                                                 self._rng)
        self._request_timeout_s = config["request.timeout.ms"] / 1000
        # TLS and SASL per connection (security.protocol and its keys).
        self.security = ClientSecurity.from_config(lambda key: config[key])
        self._maintain_task: asyncio.Task | None = None
        self._closed = False

    # --- lifecycle ---

    async def start(self) -> None:
        """First metadata from a bootstrap server (topics: none, just the brokers)."""
        await self.refresh_metadata([])
        self._maintain_task = asyncio.get_running_loop().create_task(self._maintain())

    async def close(self) -> None:
        self._closed = True
        tasks = [t for _, _, t in self._refreshing]
        if self._maintain_task is not None:
            tasks.append(self._maintain_task)
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except BaseException:  # noqa: BLE001 -- cancelled or failed, we are closing anyway
                pass
        for node in self._nodes.values():
            if node.connecting is not None:
                node.connecting.cancel()
            if node.conn is not None:
                node.conn.close()
                await node.conn.wait_closed()
        self._nodes.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    def now_ms(self) -> int:
        """The event loop's clock (monotonic, not clients.clock's wall now_ms): metadata
        ages and backoffs here are compared with the loop's own timers."""
        return int(asyncio.get_running_loop().time() * 1000)

    # --- metadata ---

    @property
    def metadata(self) -> ClusterMetadata:
        return self._metadata

    def update_leaders(self, leaders: Mapping[TopicPartition, tuple[int, int]],
                       endpoints: Iterable[BrokerMetadata]) -> set[str]:
        """KIP-951: leaders a Fetch or Produce answer named, into the view; returns the
        topics of the partitions the view did not take them for (not newer, no endpoint,
        unknown): those still need a Metadata refresh."""
        self._metadata = self._metadata.with_current_leaders(leaders, endpoints)
        return {tp.topic for tp, leader in leaders.items()
                if self._metadata.leader_for(tp) != leader}

    def add_topics(self, topics: Iterable[str]) -> None:
        """Topics the periodic refresh (metadata.max.age.ms) keeps in the view."""
        self._interesting.update(topics)

    def remove_topics(self, topics: Iterable[str]) -> None:
        self._interesting.difference_update(topics)

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                               allow_auto_topic_creation: bool = False) -> ClusterMetadata:
        """A fresh Metadata response for `topics` (None: all), merged into the view.

        A refresh already in flight that covers the same topics is shared rather than
        repeated, so a burst of NOT_LEADER errors costs one Metadata request."""
        self._check_open()
        want = None if topics is None else frozenset(topics)
        for covers, auto, task in self._refreshing:
            if auto == allow_auto_topic_creation and (
                    covers is None or (want is not None and want <= covers)):
                return await asyncio.shield(task)
        task = asyncio.get_running_loop().create_task(
            self._refresh(want, allow_auto_topic_creation))
        entry = (want, allow_auto_topic_creation, task)
        self._refreshing.append(entry)
        task.add_done_callback(lambda t: (self._refreshing.remove(entry), t.cancelled() or
                                          t.exception()))
        return await asyncio.shield(task)

    async def _refresh(self, want: frozenset[str] | None, auto: bool) -> ClusterMetadata:
        def body(version: int) -> Any:
            topics = None if want is None else [
                messages.MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(want)]
            return messages.MetadataRequest(topics=topics, allow_auto_topic_creation=auto)

        errors: list[str] = []
        for node_id in self._metadata_candidates():
            try:
                _, resp = await self.request(node_id, ApiKey.METADATA, body,
                                             versions=METADATA_VERSIONS)
            except (ConnectionError, UnsupportedVersionError) as e:
                errors.append(f"node {node_id}: {e}")
                continue
            fresh = ClusterMetadata.from_response(resp, self.now_ms())
            self._metadata = self._metadata.merge(fresh, all_topics=want is None)
            self._forget_gone_brokers()
            return self._metadata
        raise NoBrokersAvailableError(
            "no broker answered Metadata (bootstrap.servers="
            f"{','.join(self.config['bootstrap.servers'])}): " + "; ".join(errors[-4:]))

    def _metadata_candidates(self) -> list[int]:
        """Known brokers, least loaded and not backing off first; bootstrap servers last
        (the rebootstrap of KIP-899 when every known broker has failed)."""
        now = asyncio.get_running_loop().time()
        known = list(self._metadata.brokers)
        self._rng.shuffle(known)
        known.sort(key=lambda n: self._load_key(n, now))
        boot = [-(i + 1) for i in range(len(self._bootstrap))]
        self._rng.shuffle(boot)
        if not known or self.config["metadata.recovery.strategy"] == "rebootstrap":
            return known + boot
        return known

    def _load_key(self, node_id: int, now: float) -> tuple[int, int]:
        node = self._nodes.get(node_id)
        if node is None:
            return (1, 0)
        if node.connected:
            return (0, node.in_flight)
        return (2 if node.ready_at > now else 1, 0)

    def _forget_gone_brokers(self) -> None:
        for node_id, node in list(self._nodes.items()):
            if node_id < 0:
                continue
            b = self._metadata.brokers.get(node_id)
            if b is not None and (b.host, b.port) != node.address and node.in_flight == 0:
                if node.conn is not None:  # the broker moved: reconnect to the new address
                    node.conn.close()
                del self._nodes[node_id]

    async def leader_for(self, tp: TopicPartition, *, timeout_ms: int | None = None,
                         allow_auto_topic_creation: bool = False) -> tuple[int, int]:
        """(leader id, leader epoch), refreshing metadata while unknown, up to the timeout
        (default.api.timeout.ms, or max.block.ms for a producer)."""
        known = self._metadata.leader_for(tp)
        if known is not None:
            return known
        self.add_topics([tp.topic])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._default_timeout_ms(timeout_ms) / 1000
        attempt = 0
        while True:
            try:
                await self.refresh_metadata([tp.topic],
                                            allow_auto_topic_creation=allow_auto_topic_creation)
            except NoBrokersAvailableError:
                if loop.time() >= deadline:
                    raise
            known = self._metadata.leader_for(tp)
            if known is not None:
                return known
            delay = self.retry_backoff.backoff_ms(attempt) / 1000
            attempt += 1
            if loop.time() + delay >= deadline:
                raise self._why_no_leader(tp, timeout_ms)
            await asyncio.sleep(delay)

    def _why_no_leader(self, tp: TopicPartition, timeout_ms: int | None) -> Exception:
        waited = f"after {self._default_timeout_ms(timeout_ms)} ms of metadata retries"
        t = self._metadata.topic(tp.topic)
        if t is None or t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return UnknownTopicOrPartitionError(
                f"topic {tp.topic!r} does not exist (and was not auto-created) {waited}")
        if t.error_code != ErrorCode.NONE:
            return for_code(t.error_code)(f"topic {tp.topic!r}: {ErrorCode(t.error_code).name} {waited}")
        if tp.partition not in t.partitions:
            return UnknownTopicOrPartitionError(
                f"topic {tp.topic!r} has {len(t.partitions)} partitions, no partition "
                f"{tp.partition} {waited}")
        return LeaderNotAvailableError(f"{tp} has no live leader {waited}")

    def _default_timeout_ms(self, timeout_ms: int | None) -> int:
        if timeout_ms is not None:
            return timeout_ms
        if "default.api.timeout.ms" in self.config:
            return self.config["default.api.timeout.ms"]
        return self.config["max.block.ms"]

    async def controller(self) -> int:
        """The active controller's id as Metadata reports it (KIP-590: brokers answer with
        a random live broker that forwards; the admin client sends to it all the same)."""
        meta = await self.refresh_metadata([])
        if meta.controller_id < 0:
            raise KafkaConnectionError("Metadata names no controller")
        return meta.controller_id

    # --- coordinators ---

    async def coordinator(self, key: str, key_type: int = 0, *,
                          timeout_ms: int | None = None) -> int:
        """The node coordinating a group (key_type 0) or transactional id (1), cached until
        `invalidate_coordinator`; retried while the broker says it is not available."""
        cached = self._coordinators.get((key, key_type))
        if cached is not None:
            return cached
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._default_timeout_ms(timeout_ms) / 1000
        attempt = 0
        while True:
            try:
                node_id = await self._find_coordinator(key, key_type)
                self._coordinators[(key, key_type)] = node_id
                return node_id
            except (ConnectionError, KafkaApiError) as e:
                if isinstance(e, KafkaApiError) and not e.retriable:
                    raise
                delay = self.retry_backoff.backoff_ms(attempt) / 1000
                attempt += 1
                if loop.time() + delay >= deadline:
                    raise KafkaTimeoutError(
                        f"no coordinator for {key!r} within "
                        f"{self._default_timeout_ms(timeout_ms)} ms: {e}") from e
                await asyncio.sleep(delay)

    async def _find_coordinator(self, key: str, key_type: int) -> int:
        def body(version: int) -> Any:
            if version >= 4:
                return messages.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            return messages.FindCoordinatorRequest(key=key, key_type=key_type)

        version, resp = await self.request(None, ApiKey.FIND_COORDINATOR, body,
                                           versions=FIND_COORDINATOR_VERSIONS)
        if version >= 4:
            (c,) = resp.coordinators
            code, node_id, host, port, message = c.error_code, c.node_id, c.host, c.port, c.error_message
        else:
            code, node_id, host, port, message = (resp.error_code, resp.node_id, resp.host,
                                                  resp.port, resp.error_message)
        if code != ErrorCode.NONE:
            raise for_code(code)(f"FindCoordinator({key!r}): {message or ErrorCode(code).name}")
        if node_id < 0:
            raise CoordinatorNotAvailableError(f"FindCoordinator({key!r}) named node {node_id}")
        self._coordinator_addresses[node_id] = (host, port)
        return node_id

    def invalidate_coordinator(self, key: str, key_type: int = 0) -> None:
        self._coordinators.pop((key, key_type), None)

    # --- requests ---

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id > DEDICATED_NODE_BASE // 2:
            return self._address(DEDICATED_NODE_BASE - node_id)
        if node_id < 0:
            index = -node_id - 1
            if index >= len(self._bootstrap):
                raise NodeNotReadyError(f"no bootstrap server {node_id}")
            return self._bootstrap[index]
        b = self._metadata.brokers.get(node_id)
        if b is not None:
            return b.host, b.port
        if node_id in self._coordinator_addresses:
            return self._coordinator_addresses[node_id]
        raise NodeNotReadyError(f"broker {node_id} is not in the metadata")

    def least_loaded_node(self) -> int:
        """A connected broker with the fewest requests in flight, else a broker not in
        backoff, else a bootstrap server (Java NetworkClient.leastLoadedNode)."""
        candidates = self._metadata_candidates()
        if not candidates:
            raise NoBrokersAvailableError("no brokers known and no bootstrap servers")
        return candidates[0]

    async def ready(self, node_id: int) -> KafkaConnection:
        """A connected, version-negotiated connection to the node (waiting out its
        reconnect backoff). Raises NodeNotReadyError if connecting fails."""
        self._check_open()
        node = self._nodes.get(node_id)
        address = self._address(node_id)
        if node is None or node.address != address:
            node = self._nodes[node_id] = _Node(node_id, address)
        if node.connected:
            return node.conn  # type: ignore[return-value]
        if node.connecting is None:
            node.connecting = asyncio.get_running_loop().create_task(self._connect(node))
        return await asyncio.shield(node.connecting)

    async def _connect(self, node: _Node) -> KafkaConnection:
        loop = asyncio.get_running_loop()
        try:
            wait = node.ready_at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            timeout_s = self._setup_timeout.backoff_ms(node.failures) / 1000
            try:
                reader, writer = await open_stream(*node.address, self.security, timeout_s)
                self._tune_socket(writer)
                conn = KafkaConnection(reader, writer, client_id=self.client_id)
                try:
                    await asyncio.wait_for(conn.negotiate_versions(), timeout_s)
                    if self.security.sasl_mechanism is not None:
                        await conn.sasl_authenticate(self.security, timeout_s)
                except BaseException:
                    conn.close()
                    raise
            except (OSError, asyncio.TimeoutError, ConnectionError) as e:
                node.failures += 1
                node.ready_at = loop.time() + self._reconnect.backoff_ms(node.failures - 1) / 1000
                what = "timed out" if isinstance(e, asyncio.TimeoutError) else str(e) or type(e).__name__
                raise NodeNotReadyError(
                    f"cannot connect to node {node.node_id} at {node.address[0]}:"
                    f"{node.address[1]}: {what}") from e
            node.failures = 0
            node.conn = conn
            node.last_used = loop.time()
            return conn
        finally:
            node.connecting = None

    def _tune_socket(self, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is None:
            return
        for key, opt in (("send.buffer.bytes", socket.SO_SNDBUF),
                         ("receive.buffer.bytes", socket.SO_RCVBUF)):
            if self.config[key] != -1:
                sock.setsockopt(socket.SOL_SOCKET, opt, self.config[key])

    def _pick_version(self, conn: KafkaConnection, api_key: int,
                      versions: tuple[int, int] | None) -> int:
        lo, hi = our_versions(api_key)
        if versions is not None:
            lo, hi = max(lo, versions[0]), min(hi, versions[1])
        peer = conn.api_versions.get(api_key)
        if peer is None or min(hi, peer[1]) < max(lo, peer[0]):
            raise UnsupportedVersionError(
                f"{ApiKey(api_key).name}: the broker supports versions "
                f"{'none' if peer is None else f'{peer[0]}-{peer[1]}'}, we need {lo}-{hi}")
        return min(hi, peer[1])

    async def request(self, node_id: int | None, api_key: ApiKey,
                      body: Any | Callable[[int], Any], *,
                      versions: tuple[int, int] | None = None,
                      timeout_ms: int | None = None) -> tuple[int, Any]:
        """Send one request to `node_id` (None: the least loaded node); (version, response).

        The response's error codes are the caller's to read. A broken connection raises a
        ConnectionError subclass; a response later than `timeout_ms` (request.timeout.ms)
        raises RequestTimeoutError and closes the connection."""
        if node_id is None:
            node_id = self.least_loaded_node()
        conn = await self.ready(node_id)
        node = self._nodes[node_id]
        version = self._pick_version(conn, api_key, versions)
        payload = body(version) if callable(body) else body
        timeout_s = self._request_timeout_s if timeout_ms is None else timeout_ms / 1000
        node.in_flight += 1
        try:
            response = await conn.request(api_key, version, payload, timeout_s=timeout_s)
        except asyncio.TimeoutError:
            raise RequestTimeoutError(
                f"{ApiKey(api_key).name} to node {node_id}: no response within "
                f"{int(timeout_s * 1000)} ms") from None
        finally:
            node.in_flight -= 1
            node.last_used = asyncio.get_running_loop().time()
        return version, response

    def send_without_response(self, node_id: int, api_key: ApiKey, body: Any,
                              versions: tuple[int, int] | None = None) -> None:
        """Write a request that gets no response (Produce with acks=0). The node must be
        connected (`await ready(node_id)` first)."""
        node = self._nodes.get(node_id)
        if node is None or not node.connected:
            raise NodeNotReadyError(f"node {node_id} is not connected")
        conn = node.conn
        assert conn is not None
        version = self._pick_version(conn, api_key, versions)
        conn.send_without_response(api_key, version, body(version) if callable(body) else body)
        node.last_used = asyncio.get_running_loop().time()

    def in_flight(self, node_id: int) -> int:
        node = self._nodes.get(node_id)
        return 0 if node is None else node.in_flight

    def is_connected(self, node_id: int) -> bool:
        node = self._nodes.get(node_id)
        return node is not None and node.connected

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the client is closed")

    # --- housekeeping ---

    async def _maintain(self) -> None:
        """metadata.max.age.ms refreshes and connections.max.idle.ms closes."""
        loop = asyncio.get_running_loop()
        max_age_s = self.config["metadata.max.age.ms"] / 1000
        idle_s = self.config["connections.max.idle.ms"] / 1000
        while True:
            age_s = (self.now_ms() - self._metadata.updated_ms) / 1000
            await asyncio.sleep(max(0.05, min(max_age_s - age_s, idle_s / 2 if idle_s > 0 else 60)))
            if (self.now_ms() - self._metadata.updated_ms) / 1000 >= max_age_s:
                try:
                    await self.refresh_metadata(sorted(self._interesting))
                except (ConnectionError, KafkaApiError):
                    pass  # the next request that needs metadata retries on its own
            now = loop.time()
            for node in list(self._nodes.values()):
                if (node.connected and node.in_flight == 0 and idle_s > 0
                        and now - node.last_used > idle_s):
                    assert node.conn is not None
                    node.conn.close()
