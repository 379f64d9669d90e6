"""Brokers: registration, heartbeats, fencing, unfencing and controlled shutdown.

Theory of operation
-------------------
A broker's life, as KRaft runs it (``ClusterControlManager``, ``BrokerHeartbeatManager``):

    register --> FENCED --(heartbeat: caught up, not want_fence)--> UNFENCED
                   ^                                                  |
                   |   session expired / want_fence / shut down now   |
                   +--------------------------------------------------+
                   UNFENCED --(heartbeat: want_shut_down)--> CONTROLLED_SHUTDOWN
                   CONTROLLED_SHUTDOWN --(leads nothing)--> fenced, should_shut_down

- Registration writes a RegisterBrokerRecord, always fenced. Its ``broker_epoch`` is the
  next offset of the log as the deciding image knows it, so it is never above the offset
  where the record lands and grows with every registration of the broker id.
  A retried registration (same incarnation, same listeners, rack and features) gets the
  current epoch back and writes nothing. A new incarnation (the process restarted)
  replaces the old registration, which fences the old one: its heartbeats now carry a
  stale epoch. Kafka refuses a new incarnation while the old session is alive
  (DUPLICATE_BROKER_REGISTRATION) and makes a restarted broker wait out the session;
  Ketch takes over at once and treats the restart as unclean: the broker leaves every
  ISR and leadership in the same batch, since it may have lost unflushed data.
- A heartbeat carries the broker's metadata offset. The broker is *caught up* once that
  offset reaches the offset of its own registration record; only then may it be
  unfenced, so that it never serves with metadata older than its registration.
- Unfencing writes BrokerRegistrationChangeRecord(fenced=-1) and, in the same batch,
  elects leaders for at most ``controlled_shutdown_records_max`` leaderless partitions
  that the broker can now lead; the controller's next polls elect the rest, one bounded
  batch each (QuorumController.poll).
- Fencing (session expired, or the broker asks) writes fenced=1 and, in the same batch,
  removes the broker from the ISRs and moves the leaderships of at most
  ``controlled_shutdown_records_max`` partitions (replication_control), its leaderships
  first; the controller's next polls move the rest in batches of that size
  (QuorumController.poll), as Kafka's controller appends a large non-atomic result in
  several batches. A broker in the ISR of 100,000 partitions is thus not one Raft entry
  of 100,000 records applied in one go by every controller and broker.
- Controlled shutdown (heartbeat with want_shut_down) writes in_controlled_shutdown=1 and
  moves leaderships away, then ISR memberships, in batches of at most
  ``controlled_shutdown_records_max`` partition changes, one batch per shutdown heartbeat
  (the broker sends them back to back); the heartbeat answers should_shut_down once there
  is nothing left to move, and the broker is fenced then.

Heartbeat arrival times are soft state (``HeartbeatTracker``): not in the log, kept by the
active controller only and restarted from "now" when a controller becomes active, as
Kafka does, so that a failover never fences live brokers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from metadata_log.image import BrokerRegistration, MetadataImage
from quorum.controller.broker_index import BrokersToPartitions
from quorum.controller.config import ControllerConfig
from quorum.controller.replication_control import (
    active_predicate, broker_leads_any, changes_for_leaderless_partitions,
    changes_for_leaving_brokers,
)
from quorum.controller.result import ControllerResult

__all__ = [
    "HeartbeatTracker", "broker_heartbeat", "fence_brokers", "fenced_leftovers", "register_broker",
    "unregister_broker",
]

_FENCE, _UNFENCE = 1, -1     # BrokerRegistrationChangeRecord.Fenced


@dataclass(slots=True)
class HeartbeatTracker:
    """Last heartbeat time per (broker id, broker epoch); soft state of the active
    controller. A registration with a new epoch starts a new session.

    Also when the connection a broker heartbeats on closed (``disconnected``): a broker
    process that dies on a live host has its sockets closed by the kernel at once, so the
    controller need not wait out the session timeout (issue 17's fast crash detection). A
    heartbeat after the close (on a new connection: a benign reconnect) forgets it. A
    paused process (SIGSTOP) or a partitioned host keeps its socket open and is fenced by
    the session timeout only."""
    last_contact_ms: dict[int, tuple[int, int]] = field(default_factory=dict)
    disconnected_ms: dict[int, tuple[int, int]] = field(default_factory=dict)

    def touch(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        self.last_contact_ms[broker_id] = (broker_epoch, now_ms)
        self.disconnected_ms.pop(broker_id, None)

    def disconnected(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        self.disconnected_ms[broker_id] = (broker_epoch, now_ms)

    def restart_all(self, image: MetadataImage, now_ms: int) -> None:
        self.last_contact_ms = {b.broker_id: (b.broker_epoch, now_ms)
                                for b in image.cluster.brokers.values()}
        self.disconnected_ms = {}

    def deadline(self, b: BrokerRegistration, now_ms: int, session_timeout_ms: int,
                 disconnect_fence_ms: int) -> int:
        """When this incarnation is fenced unless it heartbeats: a session timeout after
        its last contact, or ``disconnect_fence_ms`` after its connection closed (-1: never
        early)."""
        deadline_ms = self.session_start(b, now_ms) + session_timeout_ms
        lost = self.disconnected_ms.get(b.broker_id)
        if lost is not None and lost[0] == b.broker_epoch and disconnect_fence_ms >= 0:
            deadline_ms = min(deadline_ms, lost[1] + disconnect_fence_ms)
        return deadline_ms

    def session_start(self, b: BrokerRegistration, now_ms: int) -> int:
        """Last contact of this incarnation; a session unseen so far starts now."""
        entry = self.last_contact_ms.get(b.broker_id)
        if entry is None or entry[0] != b.broker_epoch:
            self.last_contact_ms[b.broker_id] = (b.broker_epoch, now_ms)
            return now_ms
        return entry[1]

    def forget_missing(self, image: MetadataImage) -> None:
        for broker_id in [b for b in self.last_contact_ms if b not in image.cluster.brokers]:
            del self.last_contact_ms[broker_id]
        for broker_id in [b for b in self.disconnected_ms if b not in image.cluster.brokers]:
            del self.disconnected_ms[broker_id]


def _registration_record(request: messages.BrokerRegistrationRequest, broker_epoch: int) -> messages.RegisterBrokerRecord:
    R = messages.RegisterBrokerRecord
    return R(
        broker_id=request.broker_id, is_migrating_zk_broker=request.is_migrating_zk_broker,
        incarnation_id=request.incarnation_id, broker_epoch=broker_epoch,
        end_points=[R.BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                     security_protocol=e.security_protocol)
                    for e in request.listeners],
        features=[R.BrokerFeature(name=f.name, min_supported_version=f.min_supported_version,
                                  max_supported_version=f.max_supported_version)
                  for f in request.features],
        rack=request.rack, fenced=True, in_controlled_shutdown=False,
        log_dirs=list(request.log_dirs))


def _same_registration(b: BrokerRegistration, request: messages.BrokerRegistrationRequest) -> bool:
    return (b.incarnation_id == request.incarnation_id
            and [(e.name, e.host, e.port, e.security_protocol) for e in b.endpoints]
            == [(e.name, e.host, e.port, e.security_protocol) for e in request.listeners]
            and [(f.name, f.min_supported_version, f.max_supported_version)
                 for f in b.features]
            == [(f.name, f.min_supported_version, f.max_supported_version)
                for f in request.features]
            and b.rack == request.rack and list(b.log_dirs) == list(request.log_dirs))


def register_broker(image: MetadataImage, request: messages.BrokerRegistrationRequest, config: ControllerConfig,
                    index: BrokersToPartitions | None = None
                    ) -> ControllerResult[messages.BrokerRegistrationResponse]:
    Response = messages.BrokerRegistrationResponse

    def fail(code: ErrorCode) -> ControllerResult:
        return ControllerResult((), Response(error_code=int(code), broker_epoch=-1))

    if config.cluster_id is not None and request.cluster_id != config.cluster_id:
        return fail(ErrorCode.INCONSISTENT_CLUSTER_ID)
    if request.broker_id < 0:
        return fail(ErrorCode.INVALID_REQUEST)
    names = [e.name for e in request.listeners]
    if len(set(names)) != len(names):
        return fail(ErrorCode.INVALID_REQUEST)
    # The broker must support every finalized feature it names. A feature it does not
    # name is not checked: Ketch brokers need not list metadata.version.
    finalized = image.features.levels
    for f in request.features:
        level = finalized.get(f.name)
        if level is not None and not f.min_supported_version <= level <= f.max_supported_version:
            return fail(ErrorCode.UNSUPPORTED_VERSION)
    existing = image.cluster.get(request.broker_id)
    if existing is not None and _same_registration(existing, request):
        return ControllerResult((), Response(error_code=0, broker_epoch=existing.broker_epoch))
    broker_epoch = image.provenance.offset + 1
    if existing is not None:
        broker_epoch = max(broker_epoch, existing.broker_epoch + 1)
    records: list[Any] = [_registration_record(request, broker_epoch)]
    if existing is not None:
        # KIP-966: a broker that does not name the epoch it had stopped uncleanly (its
        # unflushed records may be gone): it is no longer an eligible leader replica.
        unclean = [] if request.previous_broker_epoch == existing.broker_epoch \
            else [request.broker_id]
        records += changes_for_leaving_brokers(
            image, [request.broker_id],
            active_predicate(image, inactive=[request.broker_id]), config, index,
            unclean_shutdown=unclean)
    return ControllerResult(tuple(records), Response(error_code=0, broker_epoch=broker_epoch))


def fence_brokers(image: MetadataImage, broker_ids: list[int], config: ControllerConfig,
                  index: BrokersToPartitions | None = None) -> list[Any]:
    """Records fencing ``broker_ids`` (registered, unfenced) and moving their partitions,
    at most ``controlled_shutdown_records_max`` of them (the rest: ``fenced_leftovers``)."""
    records: list[Any] = []
    for broker_id in broker_ids:
        b = image.cluster.brokers[broker_id]
        assert not b.fenced, b
        records.append(messages.BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=b.broker_epoch, fenced=_FENCE))
    records += changes_for_leaving_brokers(
        image, broker_ids, active_predicate(image, inactive=broker_ids), config, index,
        limit=config.controlled_shutdown_records_max)
    return records


def fenced_leftovers(image: MetadataImage, broker_ids: list[int], config: ControllerConfig,
                     index: BrokersToPartitions | None = None) -> list[Any]:
    """The next batch moving partitions away from ``broker_ids``, fenced by an earlier
    batch that hit the limit; none when nothing is left to move."""
    fenced = [b for b in broker_ids if (r := image.cluster.get(b)) is not None and r.fenced]
    if not fenced:
        return []
    return changes_for_leaving_brokers(
        image, fenced, active_predicate(image, inactive=fenced), config, index,
        limit=config.controlled_shutdown_records_max)


def broker_heartbeat(image: MetadataImage, request: messages.BrokerHeartbeatRequest, registration_offset: int,
                     config: ControllerConfig, index: BrokersToPartitions | None = None
                     ) -> ControllerResult[messages.BrokerHeartbeatResponse]:
    """The KRaft heartbeat state machine (BrokerHeartbeatManager.calculateNextBrokerState).

    ``registration_offset`` is the log offset of the broker's RegisterBrokerRecord."""
    Response = messages.BrokerHeartbeatResponse
    b = image.cluster.get(request.broker_id)
    if b is None or b.broker_epoch != request.broker_epoch:
        return ControllerResult((), Response(error_code=int(ErrorCode.STALE_BROKER_EPOCH)))
    caught_up = request.current_metadata_offset >= registration_offset
    broker_id = b.broker_id

    def respond(records: list[Any], fenced: bool, shut_down: bool) -> ControllerResult:
        return ControllerResult(tuple(records), Response(
            error_code=0, is_caught_up=caught_up, is_fenced=fenced,
            should_shut_down=shut_down))

    if b.fenced:
        if request.want_shut_down:
            return respond([], True, True)        # a fenced broker leads nothing
        if not request.want_fence and caught_up and not b.in_controlled_shutdown:
            records: list[Any] = [messages.BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=b.broker_epoch, fenced=_UNFENCE)]
            records += changes_for_leaderless_partitions(
                image, active_predicate(image, active=[broker_id]), config,
                limit=config.controlled_shutdown_records_max, index=index)
            return respond(records, False, False)
        return respond([], True, False)
    if b.in_controlled_shutdown:
        if not request.want_shut_down:
            return respond([], False, False)      # Kafka ignores a change of mind
        # Every shutdown heartbeat moves the next bounded batch (leaderships first); one
        # more pass also catches partitions whose other replicas have since come back.
        # Once nothing is left to move, the broker is fenced and may go.
        records = changes_for_leaving_brokers(
            image, [broker_id], active_predicate(image, inactive=[broker_id]), config,
            index, limit=config.controlled_shutdown_records_max)
        if records:
            return respond(records, False, False)
        return respond(fence_brokers(image, [broker_id], config, index), True, True)
    if request.want_shut_down:
        if request.want_fence or not broker_leads_any(image, broker_id, index):
            return respond(fence_brokers(image, [broker_id], config, index), True, True)
        records = [messages.BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=b.broker_epoch, in_controlled_shutdown=1)]
        records += changes_for_leaving_brokers(
            image, [broker_id], active_predicate(image, inactive=[broker_id]), config, index,
            limit=config.controlled_shutdown_records_max)
        return respond(records, False, False)
    if request.want_fence:
        return respond(fence_brokers(image, [broker_id], config, index), True, False)
    return respond([], False, False)


def unregister_broker(image: MetadataImage, request: messages.UnregisterBrokerRequest, config: ControllerConfig,
                      index: BrokersToPartitions | None = None
                      ) -> ControllerResult[messages.UnregisterBrokerResponse]:
    """UnregisterBroker (KIP-631): forget a decommissioned broker."""
    Response = messages.UnregisterBrokerResponse
    b = image.cluster.get(request.broker_id)
    if b is None:
        return ControllerResult((), Response(
            error_code=int(ErrorCode.BROKER_ID_NOT_REGISTERED),
            error_message=f"Broker ID {request.broker_id} is not currently registered"))
    records: list[Any] = changes_for_leaving_brokers(
        image, [b.broker_id], active_predicate(image, inactive=[b.broker_id]), config, index)
    records.append(messages.UnregisterBrokerRecord(broker_id=b.broker_id,
                                                   broker_epoch=b.broker_epoch))
    return ControllerResult(tuple(records), Response(error_code=0, error_message=None))
