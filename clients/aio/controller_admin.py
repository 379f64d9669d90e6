"""ControllerAdmin: the admin client talking to the controllers themselves (KIP-919).

Kafka's tools take ``--bootstrap-controller`` (the client property
``bootstrap.controllers``) to reach the quorum without any broker: to find out who leads
it when brokers are down, or to run admin requests brokers do not forward. Ketch's
controllers serve the Kafka protocol on their listener (quorum/server.py): DescribeQuorum
and DescribeCluster on every controller, and the writes (CreateTopics, configs,
ElectLeaders, partition reassignment...) on the active one, which the others answer with
NOT_CONTROLLER.

``ControllerAdmin`` is ``Admin`` with its transport swapped: every call the broker-based
client routes to "the controller" or "any broker" goes to the active controller here, so
the call loop (deadlines, retries, typed errors) is the same code. The active controller
is found with DescribeQuorum: any controller names the leader it follows, and v2 answers
carry the controllers' endpoints. Calls that need a partition leader or a group
coordinator (offsets, groups, record deletion) cannot work without brokers and raise.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Mapping

from clients._core.config import ClientConfig
from clients.aio.admin import METADATA_TOPIC, Admin
from clients.connection import KafkaConnection, connect
from clients.errors import KafkaApiError, UnsupportedVersionError
from clients.protocol import ApiKey, messages
from clients.security.client_auth import ClientSecurity

__all__ = ["ControllerAdmin", "NoActiveControllerError"]

NO_LEADER = -1


class NoActiveControllerError(ConnectionError):
    """No controller named a live leader (an election is going on, or none is reachable).
    A ConnectionError: the call loop retries it until its deadline."""


def parse_controllers(spec: str) -> list[tuple[str, int]]:
    out = []
    for item in filter(None, (x.strip() for x in spec.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"a controller address must be HOST:PORT, not {item!r}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no controller address given")
    return out


class ControllerAdmin(Admin):
    """``Admin`` against ``bootstrap.controllers`` (module docstring)."""

    def __init__(self, controllers: str, config: Mapping[str, Any] | ClientConfig | None = None,
                 /, **overrides: Any) -> None:
        self._bootstrap_controllers = parse_controllers(controllers)
        given = dict(config.given()) if isinstance(config, ClientConfig) else dict(config or {})
        # Admin's config wants bootstrap.servers; here it only names the controllers.
        given["bootstrap.servers"] = controllers
        super().__init__(given, **overrides)
        # TLS and SASL to the controllers' listener (security.protocol and its keys).
        self._security = ClientSecurity.from_config(lambda key: self.config[key])
        self._addresses: dict[int, tuple[str, int]] = {}    # controller id -> endpoint
        self._conns: dict[tuple[str, int], KafkaConnection] = {}
        self._active: int | None = None

    async def start(self) -> "ControllerAdmin":
        self._started = True
        return self

    async def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # -- transport --

    async def _connection(self, address: tuple[str, int]) -> KafkaConnection:
        conn = self._conns.get(address)
        if conn is None or conn.closed:
            timeout_s = self.config["socket.connection.setup.timeout.ms"] / 1000
            conn = await connect(*address, client_id=self.config["client.id"] or "ketch-admin",
                                 timeout_s=timeout_s, security=self._security)
            try:
                await asyncio.wait_for(conn.negotiate_versions(), timeout_s)
            except BaseException:
                conn.close()
                raise
            self._conns[address] = conn
        return conn

    async def _send(self, address: tuple[str, int], api_key: ApiKey,
                    body: Any | Callable[[int], Any], versions: tuple[int, int],
                    request_ms: int) -> tuple[int, Any]:
        conn = await self._connection(address)
        peer = conn.api_versions.get(api_key)
        if peer is None or min(versions[1], peer[1]) < max(versions[0], peer[0]):
            raise UnsupportedVersionError(
                f"{ApiKey(api_key).name}: the controller at {address[0]}:{address[1]} supports "
                f"versions {'none' if peer is None else f'{peer[0]}-{peer[1]}'}, "
                f"we need {versions[0]}-{versions[1]}")
        version = min(versions[1], peer[1])
        payload = body(version) if callable(body) else body
        try:
            return version, await conn.request(api_key, version, payload,
                                               timeout_s=request_ms / 1000)
        except BaseException:
            self._conns.pop(address, None)
            conn.close()
            raise

    async def _request(self, node: int | None, api_key: ApiKey, body: Any,
                       versions: tuple[int, int], request_ms: int) -> tuple[int, Any]:
        if node is None:
            node = await self._find_active(request_ms)
        address = self._addresses.get(node)
        if address is None:
            raise NoActiveControllerError(f"controller {node} has no known endpoint")
        try:
            return await self._send(address, api_key, body, versions, request_ms)
        except (OSError, ConnectionError, asyncio.TimeoutError):
            if node == self._active:
                self._active = None     # dead or cut off: ask the quorum again
            raise

    async def _find_active(self, request_ms: int) -> int:
        """Ask the controllers, in turn, who leads the quorum; remember every endpoint."""
        if self._active is not None:
            return self._active
        D = messages.DescribeQuorumRequest
        body = D(topics=[D.TopicData(topic_name=METADATA_TOPIC,
                                     partitions=[D.PartitionData(partition_index=0)])])
        last: BaseException | None = None
        known = list(dict.fromkeys([*self._addresses.values(), *self._bootstrap_controllers]))
        for address in known:
            try:
                _, resp = await self._send(address, ApiKey.DESCRIBE_QUORUM, body, (0, 2), request_ms)
            except (OSError, ConnectionError, asyncio.TimeoutError) as e:
                last = e
                continue
            for n in resp.nodes or ():
                if n.listeners:
                    self._addresses[n.node_id] = (n.listeners[0].host, n.listeners[0].port)
            parts = [p for t in resp.topics for p in t.partitions]
            if not parts or parts[0].error_code != 0 or parts[0].leader_id == NO_LEADER:
                continue
            leader = parts[0].leader_id
            if leader in self._addresses:
                self._active = leader
                return leader
        raise NoActiveControllerError(
            "no controller named a reachable leader"
            + (f" (last error: {last})" if last is not None else ""))

    # -- routes: everything that is not a partition or group call goes to the leader --

    async def _any(self, _key: Any, remaining_ms: int) -> int:
        return await self._find_active(max(1, min(remaining_ms, self.config["request.timeout.ms"])))

    async def _controller(self, key: Any, remaining_ms: int) -> int:
        return await self._any(key, remaining_ms)

    async def _config_node(self, resource: Any, remaining_ms: int) -> int:
        # The active controller holds every config, per-broker ones included.
        return await self._any(resource, remaining_ms)

    async def _refresh_controller(self, _key: Any, error: BaseException) -> None:
        if not isinstance(error, KafkaApiError) or error.invalid_metadata \
                or error.error_code == 41:          # NOT_CONTROLLER
            self._active = None

    async def _coordinator(self, group_id: str, remaining_ms: int) -> int:
        raise NotImplementedError("group calls need brokers: use Admin with bootstrap.servers")

    async def _leader(self, tp: Any, remaining_ms: int) -> int:
        raise NotImplementedError("partition calls need brokers: use Admin with bootstrap.servers")
