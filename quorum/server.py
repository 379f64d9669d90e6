"""The controller process's asyncio side: a Kafka-protocol listener in front of the quorum.

    socket -> quorum.network.KafkaServer -> ControllerApis.handle
        reads  (any controller, from its committed log):
               Fetch / FetchSnapshot on __cluster_metadata-0 (observers follow the log),
               DescribeQuorum, DescribeCluster, ApiVersions
        writes (the active controller only; a standby answers NOT_CONTROLLER):
               ControllerDriver.write: QuorumController.handle_<api> -> records
               -> MetadataQuorum.append -> commit -> replay -> response
               (ElectLeaders and the reassignment APIs too; ListPartitionReassignments
               is a decision without records, answered at once)

DescribeQuorum: the active controller reports every voter and observer (log end offset,
last fetch and last caught-up times: quorum/progress.py). Voters' positions come from
pysyncobj (``RaftQuorum.voter_progress``); observers' from their metadata Fetch requests
to this controller and, since a broker may fetch from a standby, from the
``current_metadata_offset`` of their heartbeats, which always reach the active one. A
standby reports only itself, and names the leader it follows.

Writes are serialized: one decision at a time, each computed on the committed state and
answered once its records are committed and replayed. That is Kafka's controller event
queue without its speculative pipeline: simpler (no in-memory state to revert when an
append fails) at the cost of one commit latency (~1-2 ms) per metadata write, which is far
below what brokers' heartbeats and admin requests need. A write whose commit takes longer
than ``write_timeout_ms`` is answered REQUEST_TIMED_OUT, and the next write waits until the
outcome of that one is known (it may still commit), so no decision is ever made on state
that misses a record still in flight.

The periodic ``poll`` (fencing brokers whose session expired, preferred-leader elections)
runs on the active controller as one more write.

Brokers follow the metadata log as observers: Fetch with topic ``__cluster_metadata`` (or
its topic id, Kafka's ``Uuid.METADATA_TOPIC_ID``) partition 0 returns committed records as
v2 record batches after the fetch offset, one batch per committed Raft entry, with
``partition_leader_epoch`` = the epoch of the controller that wrote it. An empty answer
waits up to ``max_wait_ms`` (long polling). Below the log start the answer carries
``snapshot_id``, and the observer loads that snapshot with FetchSnapshot.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any, Callable, Sequence

from clients.clock import monotonic_ms, now_ms
from clients.protocol import (
    ApiKey, RequestReceived, UnsupportedRequest,
    messages,
)
from clients.protocol import _schemas
from clients.protocol.acls import CLUSTER_NAME, AclOperation, AclResourceType, authorized_operations
from clients.protocol.error_responses import error_response
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch
from metadata_log.acls import AclsImage
from metadata_log.authorizer import StandardAuthorizer
from metadata_log.image import Provenance
from metadata_log.records import decode_record, encode_record
from metadata_log.snapshot import image_to_records, records_to_image
from metadata_log.committed import (
    METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID, CommittedBatch, MetadataSnapshot,
)
from quorum.network import SASL_VERSIONS, ClientInfo
from quorum.port import LeaderAndEpoch, MetadataQuorum, NotControllerError
from quorum.progress import ReplicaProgress, ReplicaTracker
from quorum.replicated_log import ReadStatus
from clients.protocol.types import ZERO_UUID
from quorum.voters import CONTROLLER_ENDPOINT, RAFT_ENDPOINT, Refusal, Voter

log = logging.getLogger(__name__)

SNAPSHOT_RECORDS_PER_BATCH = 1000
CONTROLLER_ENDPOINT_TYPE = 2        # DescribeCluster's EndpointType: 1 brokers, 2 controllers
FETCH_BYTES_MAX_DEFAULT = 8 * 1024 * 1024


# -- the log as record batches ---------------------------------------------------------------


class MetadataLogReader:
    """Committed batches and snapshots as Kafka v2 record batch bytes, cached: every broker
    reads the same batches, so each is encoded once."""

    def __init__(self, cache_entries_max: int = 100_000) -> None:
        self._batches: dict[int, bytes] = {}        # base offset -> encoded batch
        self.cache_entries_max = cache_entries_max
        self._snapshot_key: tuple[int, int] | None = None
        self._snapshot_bytes = b""

    def batch_bytes(self, batch: CommittedBatch) -> bytes:
        data = self._batches.get(batch.base_offset)
        if data is None:
            data = build_batch(
                (Record(batch.base_offset + i, batch.append_time_ms, None, r)
                 for i, r in enumerate(batch.records)),
                base_offset=batch.base_offset, partition_leader_epoch=batch.epoch)
            if len(self._batches) >= self.cache_entries_max:
                self._batches.pop(next(iter(self._batches)))
            self._batches[batch.base_offset] = data
        return data

    def forget_below(self, offset: int) -> None:
        for base in [b for b in self._batches if b < offset]:
            del self._batches[base]

    def forget_all(self) -> None:
        self._batches.clear()

    def snapshot_bytes(self, snapshot: MetadataSnapshot) -> bytes:
        """The snapshot's records as record batches, offsets 0..n-1 (Kafka's snapshot files
        number their records from 0 too)."""
        key = (snapshot.end_offset, snapshot.epoch)
        if key != self._snapshot_key:
            parts = []
            for start in range(0, len(snapshot.records), SNAPSHOT_RECORDS_PER_BATCH):
                chunk = snapshot.records[start:start + SNAPSHOT_RECORDS_PER_BATCH]
                parts.append(build_batch(
                    (Record(start + i, 0, None, r) for i, r in enumerate(chunk)),
                    base_offset=start, partition_leader_epoch=snapshot.epoch))
            self._snapshot_key, self._snapshot_bytes = key, b"".join(parts)
        return self._snapshot_bytes


# -- the controller, as the driver sees it ------------------------------------------------------

# Write APIs: api key -> the QuorumController (quorum/controller) method that decides it.
WRITE_HANDLERS: dict[int, str] = {
    ApiKey.BROKER_REGISTRATION: "handle_broker_registration",
    ApiKey.BROKER_HEARTBEAT: "handle_broker_heartbeat",
    ApiKey.ALTER_PARTITION: "handle_alter_partition",
    ApiKey.CREATE_TOPICS: "handle_create_topics",
    ApiKey.DELETE_TOPICS: "handle_delete_topics",
    ApiKey.CREATE_PARTITIONS: "handle_create_partitions",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "handle_incremental_alter_configs",
    ApiKey.ALTER_CONFIGS: "handle_alter_configs",
    ApiKey.ALTER_CLIENT_QUOTAS: "handle_alter_client_quotas",
    ApiKey.CREATE_ACLS: "handle_create_acls",
    ApiKey.DELETE_ACLS: "handle_delete_acls",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "handle_alter_user_scram_credentials",
    ApiKey.UPDATE_FEATURES: "handle_update_features",
    ApiKey.ALLOCATE_PRODUCER_IDS: "handle_allocate_producer_ids",
    ApiKey.UNREGISTER_BROKER: "handle_unregister_broker",
    ApiKey.ELECT_LEADERS: "handle_elect_leaders",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "handle_alter_partition_reassignments",
    # A read, answered from the active controller's image (a standby's may lag): the
    # decision has no records, so it is answered at once.
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "handle_list_partition_reassignments",
}


def _encode_records(records: Sequence[Any]) -> list[bytes]:
    return [encode_record(r) for r in records]


class ControllerDriver:
    """Keeps a QuorumController in step with the committed log (a QuorumListener), runs
    write decisions one at a time on the active controller, polls it, and takes metadata
    snapshots. With `controller_factory=None` it only follows the log (records stay opaque
    bytes): the fetch path and the quorum work without controller logic."""

    def __init__(self, quorum: MetadataQuorum, controller_factory: Callable[[], Any] | None,
                 *, write_timeout_ms: int = 5000, poll_interval_ms: int = 250,
                 snapshot_bytes: int = 20 * 1024 * 1024,
                 clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.quorum = quorum
        self.controller_factory = controller_factory
        self.controller: Any = controller_factory() if controller_factory else None
        self.write_timeout_ms = write_timeout_ms
        self.poll_interval_ms = poll_interval_ms
        self.snapshot_bytes = snapshot_bytes
        self.clock_ms = clock_ms
        self.reader = MetadataLogReader()
        self._write_lock = asyncio.Lock()
        # The last append whose outcome is not known yet; the next decision waits for it.
        self._unresolved: asyncio.Future[int] | None = None
        self._snapshotting = False
        self._was_active = False
        self._poll_task: asyncio.Task[None] | None = None
        self._poll_now = asyncio.Event()
        self.replay_errors = 0
        # For the metrics (quorum/admin_http.py): read at scrape time.
        self.records_committed = 0
        self.records_appended = 0          # by this controller, while active
        self.leader_changes = 0
        self.snapshot_time_ms: int | None = None    # wall time the newest snapshot was taken
        self.observe_commit_ms: Callable[[float], None] = lambda ms: None
        self._records_since_freeze = 0
        self._last_freeze = time.monotonic()
        quorum.register(self)

    # -- QuorumListener --

    def handle_commit(self, batch: CommittedBatch) -> None:
        if self.controller is not None:
            outcome = self.controller.replay_encoded(batch.records, batch.last_offset, batch.epoch)
            if outcome.error is not None:
                # Skipped whole, on every controller alike (replay_batch): the writer's bug.
                self.replay_errors += 1
                log.error("committed batch at %d skipped: %s", batch.base_offset, outcome.error)
            if getattr(self.controller, "wants_poll", False):
                self._poll_now.set()        # follow-ups of this batch: at once
        self.records_committed += len(batch.records)
        self._records_since_freeze += len(batch.records)
        self._maybe_freeze_gc()
        self._maybe_snapshot(batch)

    def _maybe_freeze_gc(self) -> None:
        """Keep the image out of the cyclic GC. A full collection walks every tracked object:
        at 100k partitions that is 70 ms on a quiet core and 150-300 ms on a busy one, and
        it holds the GIL, so pysyncobj's thread misses heartbeats and followers call
        elections (seen in bench/quorum.py as "raft tick thread stalled"). The image is
        immutable and acyclic, so after a young collection we move the survivors to the
        permanent generation (gc.freeze: a list splice), where refcounting still frees
        them. The cost: a cycle that becomes garbage after being frozen is not collected."""
        if self._records_since_freeze >= 1000 or time.monotonic() - self._last_freeze > 10:
            gc.collect(1)
            gc.freeze()
            self._records_since_freeze = 0
            self._last_freeze = time.monotonic()

    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None:
        self.reader.forget_all()
        if self.controller_factory is None:
            return
        self.controller = self.controller_factory()
        if snapshot.records:
            image = records_to_image((decode_record(r) for r in snapshot.records),
                                     Provenance(snapshot.end_offset - 1, snapshot.epoch))
            self.controller.load_image(image)
            self._records_since_freeze += len(snapshot.records)
            self._maybe_freeze_gc()
        if self._was_active:
            self.controller.activate(self.clock_ms())

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader_changes += 1
        active = self.quorum.is_active
        if active != self._was_active:
            log.info("%s at epoch %d (leader %d, committed offset %d)",
                     "active controller" if active else "standby", leader.epoch,
                     leader.leader_id, self.quorum.last_committed_offset)
        if self.controller is not None and active != self._was_active:
            if active:
                self.controller.activate(self.clock_ms())   # fresh broker sessions from now
                self._poll_now.set()                        # bootstrap, fencing: at once
            else:
                self.controller.deactivate()
        self._was_active = active

    # -- writes --

    async def write(self, api_key: int, request: Any) -> Any:
        method = WRITE_HANDLERS[api_key]
        if self.controller is None or not self.quorum.is_active:
            return error_response(api_key, request, ErrorCode.NOT_CONTROLLER,
                                  f"not the active controller (active: {self.quorum.leader_id})")
        if api_key == ApiKey.BROKER_HEARTBEAT:
            # The session counts from arrival, however long the heartbeat then queues.
            self.controller.note_heartbeat_received(request, self.clock_ms())
        if self._unresolved is None and not self._write_lock.locked():
            # Deciding changes nothing: a decision without records (most heartbeats) is
            # answered at once, without queueing behind writes.
            decision = getattr(self.controller, method)(request, self.clock_ms())
            if not decision.records:
                return decision.response
        try:
            async with asyncio.timeout(self.write_timeout_ms / 1000):
                async with self._write_lock:
                    await self._settle_unresolved()
                    if not self.quorum.is_active:
                        raise NotControllerError(self.quorum.leader_id)
                    decision = getattr(self.controller, method)(request, self.clock_ms())
                    await self._commit(decision.records)
                    return decision.response
        except NotControllerError as e:
            return error_response(api_key, request, ErrorCode.NOT_CONTROLLER, str(e))
        except TimeoutError:
            return error_response(api_key, request, ErrorCode.REQUEST_TIMED_OUT,
                                  "the metadata quorum did not commit in time "
                                  "(is a majority of controllers running?)")

    async def _settle_unresolved(self) -> None:
        if self._unresolved is not None:
            try:
                await asyncio.shield(self._unresolved)
            except NotControllerError:
                pass        # lost: the log says what happened, we replayed it
            self._unresolved = None

    async def _commit(self, records: Sequence[Any]) -> None:
        if not records:
            return
        started = time.perf_counter()
        future = self.quorum.append(_encode_records(records))
        self._unresolved = future
        await asyncio.shield(future)        # the timeout leaves it in _unresolved
        self._unresolved = None
        self.records_appended += len(records)
        self.observe_commit_ms((time.perf_counter() - started) * 1000)

    async def run_poll_loop(self) -> None:
        wait_ms = self.poll_interval_ms
        # A flag, not only cancel(): Python 3.11's wait_for can swallow a cancellation
        # that races with the awaited event.
        self._stopped = False
        while not self._stopped:
            try:
                await asyncio.wait_for(self._poll_now.wait(),
                                       min(wait_ms, self.poll_interval_ms) / 1000)
            except asyncio.TimeoutError:
                pass
            self._poll_now.clear()
            wait_ms = self.poll_interval_ms
            if self.controller is None or not self.quorum.is_active:
                continue
            try:
                async with asyncio.timeout(self.write_timeout_ms / 1000):
                    async with self._write_lock:
                        await self._settle_unresolved()
                        if not self.quorum.is_active:
                            continue
                        decision, wait_ms = self.controller.poll(self.clock_ms())
                        await self._commit(decision.records)
                        if decision.records:
                            wait_ms = 0     # more may be due now that these are replayed
            except (NotControllerError, TimeoutError):
                pass
            except Exception:
                log.exception("controller poll failed")

    def start(self) -> None:
        self._poll_task = asyncio.get_running_loop().create_task(self.run_poll_loop())

    def broker_disconnected(self, broker_id: int, broker_epoch: int) -> None:
        """The connection a broker heartbeated on closed: the controller decides when to
        fence it, and the poll loop wakes to do it when due."""
        if self.controller is None or not self.quorum.is_active:
            return
        self.controller.handle_broker_disconnected(broker_id, broker_epoch, self.clock_ms())
        self._poll_now.set()

    async def stop(self) -> None:
        self._stopped = True
        if self._poll_task is not None:
            self._poll_task.cancel()
            try:
                await self._poll_task
            except asyncio.CancelledError:
                pass

    # -- snapshots --

    def _maybe_snapshot(self, batch: CommittedBatch) -> None:
        if (self._snapshotting or self.controller is None
                or self.quorum.log.size_bytes < self.snapshot_bytes):
            return
        image = getattr(self.controller, "image", None)
        if image is None:
            return
        self._snapshotting = True
        asyncio.get_running_loop().create_task(self._snapshot(image, batch))

    async def _snapshot(self, image: Any, batch: CommittedBatch) -> None:
        """The image after `batch` is immutable, so it can be encoded while commits go on.
        On this thread, yielding between chunks, rather than in a worker thread: a third
        thread competing for the GIL can starve pysyncobj's thread for hundreds of ms (the
        GIL's forced switch hands it to *a* waiting thread, not to the one that waited)."""
        try:
            records = image_to_records(image)
            await asyncio.sleep(0)
            encoded: list[bytes] = []
            for start in range(0, len(records), SNAPSHOT_RECORDS_PER_BATCH):
                encoded.extend(_encode_records(records[start:start + SNAPSHOT_RECORDS_PER_BATCH]))
                await asyncio.sleep(0)
            snapshot = MetadataSnapshot(batch.next_offset, batch.epoch, tuple(encoded))
            if (batch.next_offset <= self.quorum.log.high_watermark
                    and batch.next_offset > self.quorum.log.log_start_offset):
                self.quorum.install_snapshot(snapshot)
                self.snapshot_time_ms = int(time.time() * 1000)
                self.reader.forget_below(snapshot.end_offset)
                log.info("metadata snapshot at %d: %d records", snapshot.end_offset, len(encoded))
        except Exception:
            log.exception("metadata snapshot failed")
        finally:
            self._snapshotting = False


# -- the Kafka APIs ---------------------------------------------------------------------------


# Kafka 4.0 dropped the oldest versions of these (KIP-896); a controller serves the rest
# of each schema's range.
_KAFKA_4_MINIMA: dict[str, int] = {
    "FetchRequest": 4, "CreateTopicsRequest": 2, "DeleteTopicsRequest": 1,
}


def _schema_range(name: str) -> tuple[int, int]:
    lo, hi = _schemas.SCHEMAS[name][2]
    return max(lo, _KAFKA_4_MINIMA.get(name, lo)), hi


SERVED_APIS: dict[int, str] = {
    ApiKey.API_VERSIONS: "ApiVersionsRequest",
    ApiKey.FETCH: "FetchRequest",
    ApiKey.FETCH_SNAPSHOT: "FetchSnapshotRequest",
    ApiKey.DESCRIBE_QUORUM: "DescribeQuorumRequest",
    ApiKey.DESCRIBE_CLUSTER: "DescribeClusterRequest",
    **{k: v for k, v in {
        ApiKey.BROKER_REGISTRATION: "BrokerRegistrationRequest",
        ApiKey.BROKER_HEARTBEAT: "BrokerHeartbeatRequest",
        ApiKey.ALTER_PARTITION: "AlterPartitionRequest",
        ApiKey.CREATE_TOPICS: "CreateTopicsRequest",
        ApiKey.DELETE_TOPICS: "DeleteTopicsRequest",
        ApiKey.CREATE_PARTITIONS: "CreatePartitionsRequest",
        ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigsRequest",
        ApiKey.ALTER_CONFIGS: "AlterConfigsRequest",
        ApiKey.ALTER_CLIENT_QUOTAS: "AlterClientQuotasRequest",
        ApiKey.CREATE_ACLS: "CreateAclsRequest",
        ApiKey.DELETE_ACLS: "DeleteAclsRequest",
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentialsRequest",
        ApiKey.UPDATE_FEATURES: "UpdateFeaturesRequest",
        ApiKey.ALLOCATE_PRODUCER_IDS: "AllocateProducerIdsRequest",
        ApiKey.UNREGISTER_BROKER: "UnregisterBrokerRequest",
        ApiKey.ELECT_LEADERS: "ElectLeadersRequest",
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignmentsRequest",
        ApiKey.LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignmentsRequest",
    }.items()},
}
# KIP-853: served where the controller runs a VoterMembership (quorum/membership.py).
MEMBERSHIP_APIS: dict[int, str] = {
    ApiKey.ADD_RAFT_VOTER: "AddRaftVoterRequest",
    ApiKey.REMOVE_RAFT_VOTER: "RemoveRaftVoterRequest",
    ApiKey.UPDATE_RAFT_VOTER: "UpdateRaftVoterRequest",
}


# With an authorizer (authorizer.class.name in the controller's properties), what the
# principal of a connection to a controller needs on the cluster, as Kafka's ControllerApis:
# brokers' own requests and the metadata fetch need CLUSTER_ACTION. Admin requests reach a
# controller forwarded by a broker, which authorized the client's principal before
# forwarding (broker/apis.py; Ketch has no Envelope carrying that principal), so here they
# need CLUSTER_ACTION (the forwarding broker) or the cluster-wide operation (an admin
# client using bootstrap.controllers); per-topic ACLs are checked by brokers only.
_CLUSTER_ACTION_APIS = {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION,
                        ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT}
_DESCRIBE_APIS = {ApiKey.DESCRIBE_QUORUM, ApiKey.DESCRIBE_CLUSTER,
                  ApiKey.LIST_PARTITION_REASSIGNMENTS}


class ControllerApis:
    def __init__(self, node_id: int, quorum: MetadataQuorum, driver: ControllerDriver,
                 voters: dict[int, tuple[str, int]], listener_name: str = "CONTROLLER",
                 cluster_id: str | None = None, fetch_wait_max_ms: int = 30_000,
                 authorizer: StandardAuthorizer | None = None,
                 membership: Any = None, raft_port_offset: int = 10000) -> None:
        self.authorizer = authorizer
        self.node_id = node_id
        self.quorum = quorum
        self.driver = driver
        self.static_voters = voters
        # quorum.membership.VoterMembership: the dynamic voter set (KIP-853); None: static.
        self.membership = membership
        self.raft_port_offset = raft_port_offset
        self.listener_name = listener_name
        self.cluster_id = cluster_id
        self.fetch_wait_max_ms = fetch_wait_max_ms
        # Observers (brokers) as this controller saw them while active, in the epoch it
        # leads (quorum/progress.py): from their Fetch requests to it and, for brokers
        # fetching from a standby, from their heartbeats' current_metadata_offset.
        self.observers = ReplicaTracker()
        self._observers_epoch = -1
        self.wall_clock_ms: Callable[[], int] = now_ms
        # broker id -> (connection id, broker epoch) of its last accepted heartbeat.
        self._heartbeat_connections: dict[int, tuple[int, int]] = {}

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        """The voters' Kafka listeners: the current voter set, or the configured one."""
        if self.membership is None:
            return self.static_voters
        return dict(self.membership.current().listeners())

    def last_caught_up_ms(self, replica_id: int) -> int:
        """When an observer's fetch last reached the high watermark (-1: never, or not
        while this controller was active): AddRaftVoter's caught-up check."""
        tracker = self._observer_tracker()
        return -1 if tracker is None else tracker.get(replica_id).last_caught_up_timestamp

    def _observer_tracker(self) -> ReplicaTracker | None:
        """The observers of the epoch this node leads, or None when it is not active."""
        if not self.quorum.is_active:
            return None
        if self._observers_epoch != self.quorum.epoch:
            self.observers.reset()
            self._observers_epoch = self.quorum.epoch
        return self.observers

    def observe_observer(self, replica_id: int, log_end_offset: int) -> None:
        tracker = self._observer_tracker()
        if tracker is None or replica_id < 0 or replica_id in self.voters or log_end_offset < 0:
            return
        now_ms = self.wall_clock_ms()
        hw = self.quorum.log.high_watermark
        # Nobody holds more than the committed log (a heartbeat may claim more).
        tracker.observe_fetch(replica_id, min(log_end_offset, hw), hw, now_ms)
        tracker.forget_idle(now_ms)

    def served(self) -> dict[int, tuple[int, int]]:
        apis = {k: _schema_range(n) for k, n in SERVED_APIS.items()}
        if self.membership is not None:
            apis.update({k: _schema_range(n) for k, n in MEMBERSHIP_APIS.items()})
        apis.update(SASL_VERSIONS)      # the network layer serves them (quorum/network.py)
        if self.driver.controller is None and self.driver.controller_factory is None:
            for k in WRITE_HANDLERS:
                apis.pop(k, None)
        return apis

    # ApiHandler (quorum.network): the shared listener calls these, one request at a time
    # per connection, so a long-polling fetch holds only its own connection.

    def handle_unsupported(self, event: UnsupportedRequest) -> tuple[int, Any] | None:
        if event.api_key != ApiKey.API_VERSIONS:
            return None     # close: an API key or version no schema knows
        # KIP-511: answer an unknown ApiVersions version with v0 and error 35.
        return 0, self.api_versions(ErrorCode.UNSUPPORTED_VERSION)

    async def handle(self, event: RequestReceived, client: Any = None) -> tuple[int, Any]:
        key, version, body = event.header.api_key, event.header.api_version, event.body
        if key == ApiKey.API_VERSIONS:
            return version, self.api_versions(ErrorCode.NONE)
        if self.authorizer is not None and client is not None and not self._authorized(key, client):
            return version, error_response(key, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                           "not allowed on the cluster")
        if key == ApiKey.FETCH:
            return version, await self.fetch(body, version)
        if key == ApiKey.FETCH_SNAPSHOT:
            return version, self.fetch_snapshot(body)
        if key == ApiKey.DESCRIBE_QUORUM:
            return version, self.describe_quorum(body)
        if key == ApiKey.DESCRIBE_CLUSTER:
            return version, self.describe_cluster(body, client)
        if key in MEMBERSHIP_APIS and self.membership is not None:
            return version, await self.change_voters(key, body)
        if key in WRITE_HANDLERS and key in self.served():
            response = await self.driver.write(key, body)
            if key == ApiKey.BROKER_HEARTBEAT and response.error_code == ErrorCode.NONE:
                # The broker's metadata position: the last offset it applied, +1.
                self.observe_observer(body.broker_id, body.current_metadata_offset + 1)
                if client is not None:
                    self._heartbeat_connections[body.broker_id] = (client.connection_id,
                                                                   body.broker_epoch)
            return version, response
        return version, error_response(key, body, ErrorCode.UNSUPPORTED_VERSION,
                                       "not served by a controller")

    # -- KIP-853: AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter --

    async def change_voters(self, key: int, request: Any) -> Any:
        if request.cluster_id is not None and self.cluster_id and request.cluster_id != self.cluster_id:
            return error_response(key, request, ErrorCode.INCONSISTENT_CLUSTER_ID,
                                  f"this is cluster {self.cluster_id}")
        if not self.quorum.is_active:
            return error_response(key, request, ErrorCode.NOT_CONTROLLER,
                                  f"not the active controller (active: {self.quorum.leader_id})")
        assert self.membership is not None
        try:
            if key == ApiKey.REMOVE_RAFT_VOTER:
                refusal = await self.membership.remove(request.voter_id, request.voter_directory_id)
            else:
                voter = self._voter_of(request)
                if isinstance(voter, Refusal):
                    refusal = voter
                elif key == ApiKey.ADD_RAFT_VOTER:
                    refusal = await self.membership.add(voter)
                else:
                    refusal = await self.membership.update(voter)
        except NotControllerError as e:
            return error_response(key, request, ErrorCode.NOT_CONTROLLER, str(e))
        except TimeoutError:
            return error_response(key, request, ErrorCode.REQUEST_TIMED_OUT,
                                  "the voter change did not commit in time (it may still)")
        if refusal is not None:
            return error_response(key, request, refusal.error_code, refusal.message)
        if key == ApiKey.UPDATE_RAFT_VOTER:
            leader = self.quorum.leader
            host, port = self.voters.get(leader.leader_id, ("", 0))
            return messages.UpdateRaftVoterResponse(
                error_code=ErrorCode.NONE, current_leader=messages.UpdateRaftVoterResponse.CurrentLeader(
                    leader_id=leader.leader_id, leader_epoch=leader.epoch, host=host, port=port))
        return error_response(key, request, ErrorCode.NONE, None)

    def _voter_of(self, request: Any) -> Voter | Refusal:
        """The voter an add or update names: its Kafka listener (the one named as this
        controller's, or CONTROLLER) and its Raft address (a listener named RAFT; else
        the Kafka port + ketch.raft.port.offset, as controller.quorum.voters does)."""
        listeners = {lst.name.upper(): (lst.host, lst.port) for lst in request.listeners}
        kafka = listeners.get(self.listener_name.upper()) or listeners.get(CONTROLLER_ENDPOINT)
        if kafka is None:
            return Refusal(ErrorCode.INVALID_REQUEST,
                           f"the voter has no {self.listener_name} listener")
        raft = listeners.get(RAFT_ENDPOINT, (kafka[0], kafka[1] + self.raft_port_offset))
        return Voter(request.voter_id, request.voter_directory_id, kafka[0], kafka[1], *raft)

    def _authorized(self, key: int, client: Any) -> bool:
        assert self.authorizer is not None
        controller = self.driver.controller
        acls = controller.image.acls if controller is not None else AclsImage()

        def allowed(op: AclOperation) -> bool:
            assert self.authorizer is not None
            return self.authorizer.authorize(acls, client.principal, client.host, op,
                                             AclResourceType.CLUSTER, CLUSTER_NAME)
        if allowed(AclOperation.CLUSTER_ACTION):
            return True
        if key in _CLUSTER_ACTION_APIS:
            return False
        return allowed(AclOperation.DESCRIBE if key in _DESCRIBE_APIS else AclOperation.ALTER)

    def connection_closed(self, client: ClientInfo) -> None:
        """KafkaServer's hook: if a broker heartbeated on this connection last, tell the
        controller it went away (a closed socket, not a silent one: its process died)."""
        for broker_id, (connection_id, broker_epoch) in list(self._heartbeat_connections.items()):
            if connection_id == client.connection_id:
                del self._heartbeat_connections[broker_id]
                self.driver.broker_disconnected(broker_id, broker_epoch)

    def api_versions(self, code: int) -> Any:
        return messages.ApiVersionsResponse(error_code=code, api_keys=[
            messages.ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self.served().items())])

    # -- metadata fetch --

    def _is_metadata_topic(self, topic: messages.FetchRequest.FetchTopic, version: int) -> bool:
        if version >= 13:
            return topic.topic_id == METADATA_TOPIC_ID
        return topic.topic == METADATA_TOPIC

    async def fetch(self, request: messages.FetchRequest, version: int) -> messages.FetchResponse:
        wanted = [(t, p) for t in request.topics for p in t.partitions
                  if self._is_metadata_topic(t, version) and p.partition == METADATA_PARTITION]
        if wanted:
            replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
            self.observe_observer(replica_id, min(p.fetch_offset for _, p in wanted))
        if wanted and request.max_wait_ms > 0:
            # Long poll: wait for a record at the lowest fetch offset asked for.
            offset = min(p.fetch_offset for _, p in wanted)
            log_ = self.quorum.log
            if log_.log_start_offset <= offset and log_.last_committed_offset < offset:
                wait_ms = min(request.max_wait_ms, self.fetch_wait_max_ms)
                await self.quorum.wait_for_commit(offset, wait_ms / 1000)
        budget = request.max_bytes if version >= 3 and request.max_bytes > 0 else FETCH_BYTES_MAX_DEFAULT
        responses = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                if not self._is_metadata_topic(topic, version) or p.partition != METADATA_PARTITION:
                    code = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    partitions.append(messages.FetchResponse.PartitionData(
                        partition_index=p.partition, error_code=code, high_watermark=-1))
                    continue
                data, used = self._read_metadata(p, min(budget, max(p.partition_max_bytes, 1)))
                budget = max(budget - used, 0)
                partitions.append(data)
            responses.append(messages.FetchResponse.FetchableTopicResponse(
                topic=topic.topic, topic_id=topic.topic_id, partitions=partitions))
        return messages.FetchResponse(responses=responses)

    def _read_metadata(self, p: messages.FetchRequest.FetchPartition, max_bytes: int
                       ) -> tuple[messages.FetchResponse.PartitionData, int]:
        log_ = self.quorum.log
        leader = self.quorum.leader
        read = log_.read(p.fetch_offset, max_bytes)
        # Built once, when what the partition carries is known.
        snapshot_id = messages.FetchResponse.SnapshotId()  # the schema's default: none
        records = b""
        if read.status is ReadStatus.SNAPSHOT_NEEDED:
            snapshot_id = messages.FetchResponse.SnapshotId(
                end_offset=read.snapshot_end_offset, epoch=read.snapshot_epoch)
        elif read.status is ReadStatus.OFFSET_OUT_OF_RANGE:
            # Past what this controller has committed: it may lag the controller the observer
            # read before. Nothing yet, not an error (the observer asks again).
            pass
        else:
            records = b"".join(self.driver.reader.batch_bytes(b) for b in read.batches)
        data = messages.FetchResponse.PartitionData(
            partition_index=METADATA_PARTITION, high_watermark=read.high_watermark,
            last_stable_offset=read.high_watermark, log_start_offset=read.log_start_offset,
            current_leader=messages.FetchResponse.LeaderIdAndEpoch(
                leader_id=leader.leader_id, leader_epoch=leader.epoch),
            snapshot_id=snapshot_id, records=records)
        return data, len(records)

    def fetch_snapshot(self, request: messages.FetchSnapshotRequest
                       ) -> messages.FetchSnapshotResponse:
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                partitions.append(self._snapshot_part(topic.name, p, request.max_bytes))
            topics.append(messages.FetchSnapshotResponse.TopicSnapshot(name=topic.name,
                                                                       partitions=partitions))
        return messages.FetchSnapshotResponse(topics=topics)

    def _snapshot_part(self, name: str, p: messages.FetchSnapshotRequest.PartitionSnapshot,
                       max_bytes: int) -> messages.FetchSnapshotResponse.PartitionSnapshot:
        leader = self.quorum.leader
        current_leader = messages.FetchSnapshotResponse.LeaderIdAndEpoch(
            leader_id=leader.leader_id, leader_epoch=leader.epoch)
        # The response's own SnapshotId class (the request's is another class, same fields).
        snapshot_id = messages.FetchSnapshotResponse.SnapshotId(
            end_offset=p.snapshot_id.end_offset, epoch=p.snapshot_id.epoch)

        def refused(code: ErrorCode) -> messages.FetchSnapshotResponse.PartitionSnapshot:
            return messages.FetchSnapshotResponse.PartitionSnapshot(
                index=p.partition, error_code=code, snapshot_id=snapshot_id,
                current_leader=current_leader, unaligned_records=b"")

        if name != METADATA_TOPIC or p.partition != METADATA_PARTITION:
            return refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        snapshot = self.quorum.log.snapshot
        if (snapshot is None or snapshot.end_offset != p.snapshot_id.end_offset
                or snapshot.epoch != p.snapshot_id.epoch):
            return refused(ErrorCode.SNAPSHOT_NOT_FOUND)
        data = self.driver.reader.snapshot_bytes(snapshot)
        if not 0 <= p.position <= len(data):
            return refused(ErrorCode.POSITION_OUT_OF_RANGE)
        return messages.FetchSnapshotResponse.PartitionSnapshot(
            index=p.partition, snapshot_id=snapshot_id, current_leader=current_leader,
            size=len(data), position=p.position,
            unaligned_records=data[p.position:p.position + max(max_bytes, 1)])

    # -- describe --

    def describe_quorum(self, request: messages.DescribeQuorumRequest
                        ) -> messages.DescribeQuorumResponse:
        m = messages.DescribeQuorumResponse
        leader = self.quorum.leader
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                if topic.topic_name != METADATA_TOPIC or p.partition_index != METADATA_PARTITION:
                    partitions.append(m.PartitionData(partition_index=p.partition_index,
                                                      error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                voters, observers = self._replica_states()
                partitions.append(m.PartitionData(
                    partition_index=METADATA_PARTITION, leader_id=leader.leader_id,
                    leader_epoch=leader.epoch, high_watermark=self.quorum.log.high_watermark,
                    current_voters=voters, observers=observers))
            topics.append(m.TopicData(topic_name=topic.topic_name, partitions=partitions))
        if self.membership is None:
            nodes = [m.Node(node_id=v, listeners=[m.Listener(name=self.listener_name, host=h, port=p)])
                     for v, (h, p) in sorted(self.voters.items())]
        else:
            nodes = [m.Node(node_id=v.voter_id, listeners=[
                m.Listener(name=self.listener_name, host=v.host, port=v.port),
                m.Listener(name=RAFT_ENDPOINT, host=v.raft_host, port=v.raft_port)])
                for v in self.membership.current().voters]
        return m(topics=topics, nodes=nodes)

    def _replica_states(self) -> tuple[list[Any], list[Any]]:
        """Voters and observers for DescribeQuorum. The active controller reports every
        one (quorum/progress.py). A standby knows only its own position, and reports no
        observers; its answer still names the leader and epoch it follows. (Kafka's
        standbys answer NOT_LEADER_OR_FOLLOWER; Ketch's tools use the leader id a standby
        gives to find the active controller.)"""
        m = messages.DescribeQuorumResponse
        hw = self.quorum.log.high_watermark
        now_ms = self.wall_clock_ms()
        own = ReplicaProgress(self.node_id, hw, now_ms, now_ms)

        directories = ({v.voter_id: v.directory_id for v in self.membership.current().voters}
                       if self.membership is not None else {})

        def state(p: ReplicaProgress) -> Any:
            return m.ReplicaState(replica_id=p.replica_id, log_end_offset=p.log_end_offset,
                                  replica_directory_id=directories.get(p.replica_id, ZERO_UUID),
                                  last_fetch_timestamp=p.last_fetch_timestamp,
                                  last_caught_up_timestamp=p.last_caught_up_timestamp)

        tracker = self._observer_tracker()
        if tracker is None:
            return [state(own) if v == self.node_id else state(ReplicaProgress(v, -1, -1, -1))
                    for v in sorted(self.voters)], []
        others: dict[int, ReplicaProgress] = {}
        voter_progress = getattr(self.quorum, "voter_progress", None)
        if voter_progress is not None:
            term, progress = voter_progress()
            if term == self.quorum.epoch:
                others = {p.replica_id: p for p in progress}
        voter_ids = sorted(self.voters)
        voters = [state(own if v == self.node_id else others.get(v, ReplicaProgress(v, -1, -1, -1)))
                  for v in voter_ids]
        tracker.forget_idle(now_ms)
        # A controller added as a voter fetched as an observer before: it is a voter now
        # (Kafka's LeaderState reports a replica in one list only).
        return voters, [state(p) for p in tracker.replicas() if p.replica_id not in voter_ids]

    def describe_cluster(self, request: messages.DescribeClusterRequest | None = None,
                         client: Any = None) -> messages.DescribeClusterResponse:
        """The registered, unfenced brokers; with endpoint_type 2 (v1+, KIP-919: an admin
        client bootstrapped from the controllers) the controllers instead."""
        m = messages.DescribeClusterResponse
        asked = request is not None and request.include_cluster_authorized_operations
        operations = authorized_operations(AclResourceType.CLUSTER, asked)
        if asked and self.authorizer is not None and client is not None:
            controller = self.driver.controller
            operations = self.authorizer.authorized_operations(
                controller.image.acls if controller is not None else AclsImage(),
                client.principal, client.host, AclResourceType.CLUSTER, CLUSTER_NAME)
        if request is not None and request.endpoint_type == CONTROLLER_ENDPOINT_TYPE:
            return m(cluster_id=self.cluster_id or "", controller_id=self.quorum.leader_id,
                     endpoint_type=CONTROLLER_ENDPOINT_TYPE, cluster_authorized_operations=operations,
                     brokers=[
                         m.DescribeClusterBroker(broker_id=v, host=h, port=p, rack=None)
                         for v, (h, p) in sorted(self.voters.items())])
        brokers = []
        image = getattr(self.driver.controller, "image", None)
        if image is not None:
            for broker_id, b in sorted(image.cluster.brokers.items()):
                if b.fenced or not b.endpoints:
                    continue
                endpoint = b.endpoints[0]
                brokers.append(m.DescribeClusterBroker(broker_id=broker_id, host=endpoint.host,
                                                       port=endpoint.port, rack=b.rack))
        return m(cluster_id=self.cluster_id or "", controller_id=self.quorum.leader_id,
                 brokers=brokers, cluster_authorized_operations=operations)
