"""A joining controller's observer fetch (KIP-853), and a controller's directory id.

A controller that is not a voter yet fetches the metadata log from the active controller as
an observer (Fetch on ``__cluster_metadata``-0 with its replica id), as Kafka's new
controllers do. The active controller tracks that fetch (``ControllerApis.observe_observer``)
and AddRaftVoter refuses the controller until the fetch has reached the high watermark
recently (``quorum/voters.py``, caught up).

What Ketch does differently: the fetched records are not kept. Once added, the controller
receives the log through pysyncobj (entries, or the leader's dump), which is where a
voter's copy has to live; the fetch shows the leader that the controller runs, reaches it
and keeps pace with the log. The fetch stops once the voter set names this controller.

On a secured controllers' listener (``ketch up --secure``: SASL_SSL) the discovery and the
fetch run TLS and log in with this controller's own credentials for that listener
(``sasl.mechanism.controller.protocol`` and the listener's JAAS username/password), the
login brokers use there; ``quorum/__main__.py`` builds it.

The directory id: ``meta.properties`` in the metadata log directory, written on first use
(``version=1``, ``node.id``, ``directory.id`` as Kafka writes them). A wiped directory gets a
new one, which the voter set does not admit under the old voter's id.
"""
from __future__ import annotations

import asyncio
import logging
import os
import uuid
from typing import Callable

from clients.connection import KafkaConnection, connect
from clients.security.client_auth import PLAINTEXT_SECURITY, ClientSecurity
from clients.properties import format_properties, load_properties
from clients.protocol import ApiKey, messages
from clients.protocol.types import parse_uuid_text, random_uuid, uuid_text
from clients.records import decode_batches
from metadata_log.committed import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"


class ForeignDirectoryError(Exception):
    """The metadata log directory belongs to another node."""


def controller_directory_id(log_dir: str, node_id: int) -> uuid.UUID:
    """This controller's directory id, from its meta.properties (written on first use).
    Refuses another node's directory."""
    os.makedirs(log_dir, exist_ok=True)
    path = os.path.join(log_dir, META_PROPERTIES)
    if os.path.exists(path):
        meta = load_properties(path)
        if int(meta.get("node.id", node_id)) != node_id:
            raise ForeignDirectoryError(f"{path}: node.id {meta.get('node.id')} is not this controller's {node_id}")
        if "directory.id" in meta:
            return parse_uuid_text(meta["directory.id"])
    directory = random_uuid()
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(format_properties({"version": "1", "node.id": str(node_id),
                                   "directory.id": uuid_text(directory)}))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(log_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return directory


async def discover_voters(controllers: dict[int, tuple[str, int]], timeout_s: float = 5.0,
                          security: ClientSecurity = PLAINTEXT_SECURITY,
                          ) -> dict[int, tuple[tuple[str, int], tuple[str, int]]] | None:
    """The current voters as a controller reports them in DescribeQuorum v2 (each node's
    first listener and its RAFT listener), or None if none answered. A joining controller
    starts pysyncobj with these: pysyncobj accepts connections only from the addresses it
    knows, so it must know the voters, the leader among them, when it is added.
    A standby's answer names every voter too (from the voter set it has applied).
    ``security``: TLS and the login on the controllers' listener, the joining controller's
    own credentials for it (as a broker logs in to the controllers)."""
    for host, port in controllers.values():
        conn = None
        try:
            conn = await asyncio.wait_for(connect(host, port, client_id="joining-controller",
                                                  timeout_s=timeout_s, security=security,
                                                  negotiate=True), timeout_s)
            D = messages.DescribeQuorumRequest
            response = await conn.request(ApiKey.DESCRIBE_QUORUM, 2, D(topics=[D.TopicData(
                topic_name=METADATA_TOPIC, partitions=[D.PartitionData(partition_index=0)])]),
                timeout_s=timeout_s)
        except (OSError, ConnectionError, asyncio.TimeoutError) as e:
            log.debug("controller %s:%d did not describe the quorum: %s", host, port, e)
            continue
        finally:
            if conn is not None:
                conn.close()
        voters = {}
        for node in response.nodes or ():
            endpoints = {lst.name.upper(): (lst.host, lst.port) for lst in node.listeners}
            if node.listeners and "RAFT" in endpoints:
                voters[node.node_id] = ((node.listeners[0].host, node.listeners[0].port), endpoints["RAFT"])
        if voters:
            return voters
    return None


class JoiningFetcher:
    """Fetches the metadata log from the active controller until `is_voter()` says this
    controller was added."""

    def __init__(self, replica_id: int, controllers: dict[int, tuple[str, int]],
                 is_voter: Callable[[], bool], *, fetch_wait_ms: int = 500,
                 retry_backoff_ms: int = 200, security: ClientSecurity = PLAINTEXT_SECURITY) -> None:
        """``security``: as for ``discover_voters``."""
        assert controllers
        self.replica_id = replica_id
        self.security = security
        self.controllers = dict(controllers)
        self.is_voter = is_voter
        self.fetch_wait_ms = fetch_wait_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.fetch_offset = 0
        self._target = min(controllers)
        self._conn: KafkaConnection | None = None

    async def run(self) -> None:
        while not self.is_voter():
            try:
                await self.fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("joining fetch from controller %d failed: %s", self._target, e)
                self._drop(next_target=True)
                await asyncio.sleep(self.retry_backoff_ms / 1000)
        self._drop(next_target=False)
        log.info("controller %d is a voter: its observer fetch stops", self.replica_id)

    def _drop(self, next_target: bool) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if next_target:
            ids = sorted(self.controllers)
            self._target = ids[(ids.index(self._target) + 1) % len(ids)] if self._target in ids else ids[0]

    async def fetch_once(self) -> None:
        if self._conn is None or self._conn.closed:
            host, port = self.controllers[self._target]
            self._conn = await connect(host, port, client_id=f"joining-controller-{self.replica_id}",
                                       security=self.security, negotiate=True)
        conn = self._conn
        version = conn.pick_version(ApiKey.FETCH, 4, 17)
        request = messages.FetchRequest(
            replica_id=self.replica_id,
            replica_state=messages.FetchRequest.ReplicaState(replica_id=self.replica_id),
            max_wait_ms=self.fetch_wait_ms, min_bytes=1, max_bytes=8 << 20,
            topics=[messages.FetchRequest.FetchTopic(
                topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                partitions=[messages.FetchRequest.FetchPartition(
                    partition=METADATA_PARTITION, fetch_offset=self.fetch_offset,
                    partition_max_bytes=8 << 20)])])
        response = await conn.request(ApiKey.FETCH, version, request,
                                      timeout_s=self.fetch_wait_ms / 1000 + 10)
        partition = response.responses[0].partitions[0]
        if partition.error_code:
            raise ConnectionError(f"metadata fetch failed with error {partition.error_code}")
        leader = partition.current_leader.leader_id
        if leader >= 0 and leader != self._target:
            if leader not in self.controllers:
                found = await discover_voters(self.controllers, security=self.security)
                self.controllers.update({nid: kafka for nid, (kafka, _) in (found or {}).items()})
            if leader in self.controllers:
                self._target = leader   # only the active controller tracks observers
                self._drop(next_target=False)
                return
        if partition.snapshot_id.end_offset >= 0:
            # Below the log start: the records come through pysyncobj once added.
            self.fetch_offset = partition.snapshot_id.end_offset
            return
        for batch in decode_batches(partition.records or b""):
            self.fetch_offset = max(self.fetch_offset, batch.header.last_offset + 1)
