"""`QuorumController`: the controller's decisions over the committed metadata image.

Theory of operation
-------------------
One object per controller process, active or standby. It holds the image of the
*committed* metadata log and nothing else that matters; every ``handle_*`` and ``poll``
decides on that image and returns a ``ControllerResult(records, response)`` without
changing it. The image changes only in ``replay(records, last_offset, epoch)``, called for
every committed batch in log order, on every controller alike (a standby is a controller
that is only ever replayed), so failover reloads nothing.

The shell (quorum/server.py) drives it like this::

    result = controller.handle_create_topics(request, now_ms)
    if result.records:
        await quorum.append([encode_record(r) for r in result.records])
        # ... the quorum's commit listener calls controller.replay(...) for this batch
    send(result.response)

Because decisions read committed state only, **a decision that writes must be taken when
no earlier write is still in flight**, or two decisions could each act on a state the
other is about to change (two leader elections for one partition, say). Since deciding
changes nothing, the shell can always decide first and look at the result: with no
records, answer at once (heartbeats mostly); with records while a write is in flight, drop
the result and decide again once that write has been replayed. When an append fails with
an unknown outcome (leader change), do not re-append the same records: wait until this
controller has replayed the new leader's log and decide again. The retried decision then
sees the first attempt if it was committed (topic exists, partition epoch moved on, the
broker is registered with the same incarnation) and answers accordingly. Records are
also checked when replayed: a committed batch that contradicts the state (a duplicate
topic, producer ids going backwards...) is skipped whole, on every replica alike
(``metadata_log.delta.replay_batch``), and ``replay`` reports it.

Derived state, moved on every ``replay`` from the batch's typed changes (never by a scan):
the ``BrokersToPartitions`` index (broker_index.py, Kafka's ``BrokersToIsrs``), through
which fencing, unfencing, controlled shutdown, a new incarnation, the periodic elections and
placement's broker load touch only the partitions concerned.

Soft state, not in the log and not replicated, as in Kafka:

- heartbeat arrival times (``HeartbeatTracker``), restarted by ``activate(now_ms)`` so
  that a new active controller gives every broker a full session before fencing it. The
  shell notes a heartbeat when it arrives (``note_heartbeat_received``), before it waits
  its turn behind the writes being committed: a session is kept by the broker's contact,
  not by how fast the controller gets to its heartbeats;
- the offset at which each broker's RegisterBrokerRecord was committed, for the
  "caught up" test; after loading a snapshot it falls back to the snapshot's offset,
  which can only be later (stricter);
- when the next periodic election scan is due;
- the fenced brokers that may still lead or be in ISRs (``_fencing``): a fencing batch
  moves at most ``controlled_shutdown_records_max`` partitions (cluster_control.py), and
  the next polls move the rest, one bounded batch each, until a poll finds nothing left;
- whether leaderless partitions may be left to elect (``_leaderless_left``): unfencing a
  broker elects at most ``controlled_shutdown_records_max`` of them in its batch, and the
  next polls elect the rest, one bounded batch each (all three brokers of a 100k-partition
  cluster fenced in turn left 71,000 leaderless partitions, elected in one Raft entry that
  every controller and broker then applied in one go);
- the partitions whose ISR or replicas changed since the last poll (``_follow_ups``): a
  reassignment that can complete, or a preferred replica back in the ISR, is acted on at
  the next poll (quorum/controller/reassignment.py), and ``wants_poll`` tells the shell
  to poll at once instead of at its next interval.

``poll(now_ms)`` returns the periodic work (fencing expired sessions, bootstrapping
metadata.version on an empty log, leaderless and preferred-leader elections) and how many
milliseconds may pass before it must be called again. Only the active controller polls.
"""
from __future__ import annotations

import random
from typing import Any, Iterable, Sequence

from clients.protocol import CorruptFrameError, messages
from metadata_log.features import ELR_FEATURE
from metadata_log.delta import (
    BatchOutcome, BrokerFenced, ConfigChange, MetadataReplayError, replay_batch,
)
from metadata_log.image import EMPTY_IMAGE, MetadataImage, Provenance
from metadata_log.records import decode_record
from metadata_log.features import SUPPORTED_FEATURES
from quorum.controller import (
    acl_control, cluster_control, config_control, feature_control, quota_control, reassignment,
    scram_control,
    replication_control,
)
from quorum.controller.broker_index import BrokersToPartitions
from quorum.controller.cluster_control import HeartbeatTracker
from quorum.controller.config import ControllerConfig
from quorum.controller.placement import BrokerLoad
from quorum.controller.producer_ids import allocate_producer_ids
from quorum.controller.result import ControllerResult

__all__ = ["QuorumController"]


class QuorumController:
    def __init__(self, config: ControllerConfig, rng: random.Random,
                 image: MetadataImage = EMPTY_IMAGE) -> None:
        self.config = config
        self.rng = rng
        self._image = image
        self._active = False
        self._heartbeats = HeartbeatTracker()
        self._registration_offsets: dict[int, int] = {}
        # Registrations at or before this offset came from a snapshot: exact offsets lost.
        self._snapshot_offset = image.provenance.offset
        self._next_election_scan_ms: int | None = None
        # Derived from the image and moved with it on every replay, never by a scan
        # (broker_index.py): the per-broker paths below touch only that broker's partitions.
        self._index = BrokersToPartitions.from_image(image)
        self._follow_ups: set[reassignment.PartitionKey] = set()
        self._fencing: set[int] = set()
        self._leaderless_left = False

    # ------------------------------------------------------------ state

    @property
    def image(self) -> MetadataImage:
        """The image of the committed log, as of the last ``replay``."""
        return self._image

    @property
    def is_active(self) -> bool:
        return self._active

    def activate(self, now_ms: int) -> None:
        """This controller became the active one (the Raft leader, its log replayed)."""
        self._active = True
        self._heartbeats.restart_all(self._image, now_ms)
        self._next_election_scan_ms = now_ms + self.config.leader_imbalance_check_interval_ms
        self._rescan_reassignments()
        # A fencing the previous active controller left unfinished: checked at the next polls.
        self._fencing = {b for b, r in self._image.cluster.brokers.items() if r.fenced}
        self._leaderless_left = True        # and one an unfencing left unfinished

    def _rescan_reassignments(self) -> None:
        """Follow-ups are soft state: a controller that becomes active (or loads a
        snapshot) looks for moving partitions itself, since the ISR change that lets one
        complete may have been replayed while it was a standby."""
        self._follow_ups |= {(t.topic_id, i) for t in self._image.topics.by_id.values()
                             for i, p in t.partitions.items() if reassignment.is_reassigning(p)}

    def deactivate(self) -> None:
        self._active = False
        self._next_election_scan_ms = None
        self._follow_ups.clear()
        self._fencing.clear()
        self._leaderless_left = False

    @property
    def wants_poll(self) -> bool:
        """True when replayed changes left work for the next poll (see module docstring)."""
        return self._active and bool(self._follow_ups)

    def replay(self, records: Sequence[Any], last_offset: int, epoch: int = -1) -> BatchOutcome:
        """Apply one committed batch; ``last_offset`` is the offset of its last record."""
        records = tuple(records)
        old_image = self._image
        outcome = replay_batch(old_image, records, Provenance(last_offset, epoch))
        if outcome.error is None:
            self._index.apply(old_image, outcome.image, outcome.changes)
            base_offset = last_offset - len(records) + 1
            for i, r in enumerate(records):
                if type(r) is messages.RegisterBrokerRecord:
                    self._registration_offsets[r.broker_id] = base_offset + i
                elif type(r) is messages.UnregisterBrokerRecord:
                    self._registration_offsets.pop(r.broker_id, None)
        self._image = outcome.image
        self._heartbeats.forget_missing(self._image)
        if self._active and outcome.error is None:
            self._fencing.update(c.broker_id for c in outcome.changes
                                 if type(c) is BrokerFenced)
            changed = reassignment.changed_partitions(outcome.changes)
            if changed:
                self._follow_ups |= {k for k in changed if self._needs_follow_up(k)}
        if self._active and any(isinstance(c, ConfigChange)
                                and c.name == "unclean.leader.election.enable"
                                for c in outcome.changes):
            # Turning unclean election on must bring leaderless partitions back now, not
            # at the next periodic scan (Kafka's controller does the same).
            self._next_election_scan_ms = 0
        return outcome

    def replay_encoded(self, records: Iterable[bytes], last_offset: int,
                       epoch: int = -1) -> BatchOutcome:
        """``replay`` for framed records; an undecodable batch is skipped like a
        contradictory one (every replica holds the same bytes and decides the same)."""
        try:
            decoded = [decode_record(r) for r in records]
        except CorruptFrameError as e:
            skipped = replay_batch(self._image, (), Provenance(last_offset, epoch))
            self._image = skipped.image
            return BatchOutcome(skipped.image, (), MetadataReplayError(f"undecodable: {e}"))
        return self.replay(decoded, last_offset, epoch)

    def _needs_follow_up(self, key: reassignment.PartitionKey) -> bool:
        t = self._image.topics.get_by_id(key[0])
        p = t.partitions.get(key[1]) if t is not None else None
        if p is None:
            return False
        if reassignment.is_reassigning(p):
            return True
        return (self.config.auto_leader_rebalance_enable
                and bool(reassignment.preferred_candidates(self._image, [key])))

    def load_image(self, image: MetadataImage) -> None:
        """Start over from a snapshot's image (metadata_log.snapshot.records_to_image)."""
        self._image = image
        self._snapshot_offset = image.provenance.offset
        self._registration_offsets.clear()
        self._heartbeats.forget_missing(image)
        self._index = BrokersToPartitions.from_image(image)
        self._follow_ups.clear()
        if self._active:
            self._rescan_reassignments()

    def registration_offset(self, broker_id: int) -> int:
        """Offset of the broker's RegisterBrokerRecord, or a later one (see above)."""
        offset = self._registration_offsets.get(broker_id)
        return self._snapshot_offset if offset is None else offset

    @property
    def index(self) -> BrokersToPartitions:
        """Broker id -> its partitions, for the committed image (read only)."""
        return self._index

    def _broker_load(self) -> BrokerLoad:
        return self._index.broker_load()

    # ------------------------------------------------------------ broker lifecycle

    def handle_broker_registration(self, request: messages.BrokerRegistrationRequest, now_ms: int
                                   ) -> ControllerResult[messages.BrokerRegistrationResponse]:
        return cluster_control.register_broker(self._image, request, self.config, self._index)

    def handle_broker_heartbeat(self, request: messages.BrokerHeartbeatRequest, now_ms: int
                                ) -> ControllerResult[messages.BrokerHeartbeatResponse]:
        """Also covers controlled shutdown (want_shut_down), as KRaft does."""
        self.note_heartbeat_received(request, now_ms)
        b = self._image.cluster.get(request.broker_id)
        result = cluster_control.broker_heartbeat(
            self._image, request, self.registration_offset(request.broker_id), self.config,
            self._index)
        unfenced = b is not None and b.fenced and not result.response.is_fenced
        if unfenced and result.response.error_code == 0:
            self._leaderless_left = True    # its batch elected a bounded share
        return result

    def note_heartbeat_received(self, request: messages.BrokerHeartbeatRequest, now_ms: int) -> None:
        """A heartbeat of the registered incarnation arrived (it is decided later, in its
        turn): its session is alive now. Behind a queue of large writes (a restarted
        broker's ISR expansions at 100k partitions, each a Raft commit) a heartbeat can
        wait for seconds, and a session counted from its turn could expire while the
        broker heartbeats on time; fencing a live broker moves its leaderships, which
        makes more writes."""
        b = self._image.cluster.get(request.broker_id)
        if self._active and b is not None and b.broker_epoch == request.broker_epoch:
            self._heartbeats.touch(b.broker_id, b.broker_epoch, now_ms)

    def handle_broker_disconnected(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """The connection broker ``broker_id`` last heartbeated on (as ``broker_epoch``)
        closed. Unless it heartbeats again within ``broker_disconnect_fence_ms``, the next
        ``poll`` fences it as if its session had expired."""
        b = self._image.cluster.get(broker_id)
        if self._active and b is not None and b.broker_epoch == broker_epoch and not b.fenced:
            self._heartbeats.disconnected(broker_id, broker_epoch, now_ms)

    def handle_unregister_broker(self, request: messages.UnregisterBrokerRequest, now_ms: int
                                 ) -> ControllerResult[messages.UnregisterBrokerResponse]:
        return cluster_control.unregister_broker(self._image, request, self.config,
                                                 self._index)

    # ------------------------------------------------------------ topics and partitions

    def handle_create_topics(self, request: messages.CreateTopicsRequest, now_ms: int
                             ) -> ControllerResult[messages.CreateTopicsResponse]:
        return replication_control.create_topics(
            self._image, request, self.config, self.rng, self._broker_load,
            self.config.partitions_per_request_max)

    def handle_delete_topics(self, request: messages.DeleteTopicsRequest, now_ms: int
                             ) -> ControllerResult[messages.DeleteTopicsResponse]:
        return replication_control.delete_topics(self._image, request)

    def handle_create_partitions(self, request: messages.CreatePartitionsRequest, now_ms: int
                                 ) -> ControllerResult[messages.CreatePartitionsResponse]:
        return replication_control.create_partitions(
            self._image, request, self.config, self.rng, self._broker_load,
            self.config.partitions_per_request_max)

    def handle_alter_partition(self, request: messages.AlterPartitionRequest, now_ms: int
                               ) -> ControllerResult[messages.AlterPartitionResponse]:
        return replication_control.alter_partition(self._image, request)

    # ------------------------------------------------------------ elections, reassignment

    def handle_elect_leaders(self, request: messages.ElectLeadersRequest, now_ms: int
                             ) -> ControllerResult[messages.ElectLeadersResponse]:
        return reassignment.elect_leaders(self._image, request)

    def handle_alter_partition_reassignments(
            self, request: messages.AlterPartitionReassignmentsRequest, now_ms: int
    ) -> ControllerResult[messages.AlterPartitionReassignmentsResponse]:
        return reassignment.alter_partition_reassignments(self._image, request)

    def handle_list_partition_reassignments(
            self, request: messages.ListPartitionReassignmentsRequest, now_ms: int
    ) -> ControllerResult[messages.ListPartitionReassignmentsResponse]:
        return reassignment.list_partition_reassignments(self._image, request)

    # ------------------------------------------------------------ configs, producer ids

    def handle_incremental_alter_configs(
            self, request: messages.IncrementalAlterConfigsRequest, now_ms: int
    ) -> ControllerResult[messages.IncrementalAlterConfigsResponse]:
        return config_control.incremental_alter_configs(
            self._image, request, self.config.remote_log_storage_system_enable)

    def handle_alter_configs(self, request: messages.AlterConfigsRequest, now_ms: int
                             ) -> ControllerResult[messages.AlterConfigsResponse]:
        return config_control.alter_configs(
            self._image, request, self.config.remote_log_storage_system_enable)

    def handle_alter_client_quotas(self, request: messages.AlterClientQuotasRequest, now_ms: int
                                   ) -> ControllerResult[messages.AlterClientQuotasResponse]:
        return quota_control.alter_client_quotas(self._image, request)

    def handle_create_acls(self, request: messages.CreateAclsRequest, now_ms: int
                           ) -> ControllerResult[messages.CreateAclsResponse]:
        return acl_control.create_acls(self._image, request, self.rng)

    def handle_delete_acls(self, request: messages.DeleteAclsRequest, now_ms: int
                           ) -> ControllerResult[messages.DeleteAclsResponse]:
        return acl_control.delete_acls(self._image, request)

    def handle_alter_user_scram_credentials(
            self, request: messages.AlterUserScramCredentialsRequest, now_ms: int
    ) -> ControllerResult[messages.AlterUserScramCredentialsResponse]:
        return scram_control.alter_user_scram_credentials(self._image, request)

    def handle_update_features(self, request: messages.UpdateFeaturesRequest, now_ms: int
                               ) -> ControllerResult[messages.UpdateFeaturesResponse]:
        return feature_control.update_features(self._image, request, SUPPORTED_FEATURES)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int
                              ) -> ControllerResult[messages.AllocateProducerIdsResponse]:
        return allocate_producer_ids(self._image, broker_id, broker_epoch,
                                     self.config.producer_id_block_size)

    def handle_allocate_producer_ids(
            self, request: messages.AllocateProducerIdsRequest, now_ms: int
    ) -> ControllerResult[messages.AllocateProducerIdsResponse]:
        return self.allocate_producer_ids(request.broker_id, request.broker_epoch)

    # ------------------------------------------------------------ periodic work

    def poll(self, now_ms: int) -> tuple[ControllerResult[None], int]:
        """(periodic records to append, ms until poll is next due)."""
        config = self.config
        if not self._active:
            return ControllerResult((), None), config.broker_heartbeat_interval_ms
        image = self._image
        records: list[Any] = []
        if "metadata.version" not in image.features.levels:
            # An empty log: finalize the metadata version first, as Kafka's bootstrap does.
            records.append(messages.FeatureLevelRecord(name="metadata.version",
                                                       feature_level=config.metadata_version))
            if config.eligible_leader_replicas_version:
                records.append(messages.FeatureLevelRecord(
                    name=ELR_FEATURE, feature_level=config.eligible_leader_replicas_version))
        assert self._next_election_scan_ms is not None
        next_due_ms = self._next_election_scan_ms
        expired = []
        for broker_id, b in sorted(image.cluster.brokers.items()):
            if b.fenced:
                continue
            deadline_ms = self._heartbeats.deadline(b, now_ms, config.broker_session_timeout_ms,
                                                    config.broker_disconnect_fence_ms)
            if deadline_ms <= now_ms:
                expired.append(broker_id)
            else:
                next_due_ms = min(next_due_ms, deadline_ms)
        # Elections wait for the next poll after fencing records: they must see the
        # fencing committed, or both could write a change for the same partition from
        # the same image.
        fencing: list[Any] = []
        if expired:
            fencing = cluster_control.fence_brokers(image, expired, config, self._index)
        elif self._fencing:
            fencing = cluster_control.fenced_leftovers(image, sorted(self._fencing), config,
                                                       self._index)
            if not fencing:
                self._fencing.clear()       # nothing left to move
        records += fencing
        leaderless: list[Any] = []
        if not fencing and self._leaderless_left:
            limit = config.controlled_shutdown_records_max
            leaderless = replication_control.changes_for_leaderless_partitions(
                image, replication_control.active_predicate(image), config, limit, self._index)
            records += leaderless
            if len(leaderless) < limit:
                self._leaderless_left = False
            else:
                next_due_ms = now_ms        # more to elect: again once these are committed
        if fencing or leaderless:
            pass        # the rest, if any, at the next poll (once these are committed)
        elif self._follow_ups:
            # Reassignments that can complete and preferred replicas back in the ISR: now,
            # not at the next periodic scan. Their own records come back through replay.
            follow, self._follow_ups = reassignment.follow_up_changes(
                image, self._follow_ups, preferred=config.auto_leader_rebalance_enable,
                limit=config.elections_per_poll_max)
            records += follow
            if self._follow_ups:
                next_due_ms = now_ms
        elif now_ms >= self._next_election_scan_ms:
            elections = self._election_scan(image)
            records += elections
            if len(elections) >= config.elections_per_poll_max:
                self._next_election_scan_ms = now_ms    # more to do: again after commit
            else:
                self._next_election_scan_ms = now_ms + config.leader_imbalance_check_interval_ms
            next_due_ms = min(next_due_ms, self._next_election_scan_ms)
        return ControllerResult(tuple(records), None), max(0, next_due_ms - now_ms)

    def _election_scan(self, image: MetadataImage) -> list[Any]:
        """Leaderless partitions first (availability), then preferred leaders (balance);
        each partition at most once, so the records never conflict."""
        config = self.config
        limit = config.elections_per_poll_max
        is_active = replication_control.active_predicate(image)
        records = replication_control.changes_for_leaderless_partitions(
            image, is_active, config, limit, self._index)
        if config.auto_leader_rebalance_enable and len(records) < limit:
            # Leaderless partitions are skipped there: an ONLINE election above already
            # picks the first eligible replica in preference order.
            records += replication_control.changes_for_preferred_leaders(
                image, is_active, limit - len(records), self._index)
        return records

