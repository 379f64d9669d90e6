"""The group coordinator: Kafka's classic group protocol and offset storage, sans I/O.

Theory of operation
-------------------
One ``GroupCoordinator`` per broker serves every group whose ``__consumer_offsets``
partition this broker leads (``partition_for_group``). It is pure: the shell feeds it
requests, append results and the time, and carries out what it returns. It never reads a
clock, a socket or the log.

**Inputs.** ``handle_<api>_request``-style methods (``handle_join_group``,
``handle_sync_group``, ``handle_heartbeat``, ``handle_leave_group``,
``handle_offset_commit``, ``handle_offset_fetch``, ``handle_offset_delete``,
``handle_list_groups``, ``handle_describe_groups``, ``handle_delete_groups``,
``handle_txn_offset_commit``) take a
``token`` (any hashable the shell uses to find the waiting request), the decoded request
message, its API version and ``now_ms``. ``on_append_result`` reports how an ``Append``
ended; ``poll`` fires timers; ``begin_load`` / ``complete_load`` / ``unload_partition``
follow the leadership of ``__consumer_offsets`` partitions; ``on_partition_count_change``
reports topics whose partition count grew.

**Outputs** are effects, in order:

- ``Completion(token, response)``: send ``response`` (a ``clients.protocol.messages``
  response object already shaped for the request's version) to the request ``token``.
  Every request gets exactly one Completion: at once, or later from another input (a
  JoinGroup parked until the rebalance completes, a SyncGroup parked until the leader's
  assignment is written, an OffsetCommit parked until its records are acknowledged).
- ``Append(append_id, partition, records, timestamp_ms)``: append ``records`` (as one
  batch, ``Append.batch()``) to ``__consumer_offsets-<partition>`` with acks=all, then call
  ``on_append_result(append_id, error_code, now_ms)``. Successes for one partition must be
  reported in the order the appends were returned (failures may come earlier):
  acknowledged records are replayed into the partition's ``CoordinatorImage`` in that
  order, so the image stays equal to what the log replays to.

**Durable versus volatile state.** Committed offsets and the group snapshots in
``__consumer_offsets`` change only by replaying acknowledged records (STYLE.md: commands
return records, replay changes state); a failover rebuilds them with
``CoordinatorLoader`` from the same records. Membership (who is joining, heartbeats,
parked requests) is volatile, as in Kafka: it changes at once, and a group's snapshot is
written when it matters: when the leader's assignment makes the group Stable (the group
turns Stable, and followers get their assignment, only once the write is acknowledged),
when a rebalance leaves it Empty, when a static member is replaced, and as tombstones
when it is deleted.

**Timers** (all Kafka's): a dynamic member that stops heartbeating is removed after its
session timeout; a rebalance waits at most the largest rebalance timeout for members to
rejoin (then drops the dynamic ones that did not) and as long again for every member to
send SyncGroup (then drops those that did not and rebalances again); a group leaving
Empty waits ``group.initial.rebalance.delay.ms`` (extended while members keep arriving,
up to the rebalance timeout); a KIP-394 pending member id expires after the session
timeout; a new member's JoinGroup expires after 5 minutes; offsets are checked for
expiry every ``offsets.retention.check.interval.ms``. ``poll`` returns the milliseconds
until the earliest of them.

Rule sources: apache/kafka ``core/.../coordinator/group/GroupCoordinator.scala`` and
``group-coordinator/.../classic/ClassicGroup.java``; KIP-134 (initial delay), KIP-211
(offset retention), KIP-345 (static membership), KIP-389 (group.max.size), KIP-394
(member id required), KIP-814 (a returning static leader skips assignment).

Deliberate differences from Kafka, each for a reason given where it is coded: ties in
protocol votes are broken by join order; a lone member may change its assignors; a member
removed while a SyncGroup waits gets UNKNOWN_MEMBER_ID instead of silence; a retried
JoinGroup or SyncGroup answers the superseded one with REBALANCE_IN_PROGRESS; a group
refused before anything joined is not kept. The scan in ``poll`` is linear in groups and
members (a timer wheel would make it logarithmic).

**Transactional offsets** (TxnOffsetCommit, KIP-98/447): written as a transactional batch
under the producer's id and epoch, replayed as *pending* per producer id, and committed or
dropped when ``on_txn_marker`` reports that producer's COMMIT/ABORT marker on the
partition (replayed after any append still in flight, which precedes it in the log).
OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition with a
pending transactional offset; such offsets, and their group, never expire.
"""
from __future__ import annotations

import enum
import random
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Mapping

from clients.protocol import messages
from clients.protocol.acls import AclResourceType, authorized_operations
from clients.protocol.errors import ERROR_INFO, ErrorCode

from broker.group.effects import (
    Append, Completion, Effect, OnDone, group_append_error, join_response,
)
from broker.group.consumer_coordinator import (
    CONSUMER_PROTOCOL_TYPE, GROUP_TYPE_CONSUMER, ConsumerGroupProtocol,
)
from broker.group.consumer_group import ConsumerGroup, TopicsView
from broker.group.consumer_group import group_tombstones as consumer_group_tombstones
from broker.group.consumer_group import member_tombstones as consumer_group_member_tombstones
from clients._core.assignors import Assignment, encode_assignment
from clients.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from clients.types import TopicPartition
from broker.group.offsets import (
    commit_append_error, commit_value, expired_offsets, offset_delete_eligibility,
    offset_fetch_response, offsets_for, txn_commit_value, validate_offset_commit,
    validate_txn_offset_commit,
)
from broker.group.records import (
    CoordinatorImage, CoordinatorRecord, CoordinatorRecordError, GroupMetadataKey,
    GroupMetadataValue, MemberRecord, OffsetCommitKey, OffsetCommitValue,
    partition_for_group,
)
from broker.group.state import (
    UNKNOWN_MEMBER_ID, ClassicGroup, GroupState, Member, Parked,
)

__all__ = [
    "Append", "Completion", "Effect", "GroupConfig", "GroupCoordinator", "PartitionStatus",
    "group_append_error",
]

E = ErrorCode
S = GroupState
POLL_IDLE_MS = 600_000       # nothing scheduled: the shell wakes on its next input anyway
GROUP_TYPE_CLASSIC = "classic"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's broker properties for groups, under their own names (units last)."""
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offsets_topic_num_partitions: int = 50
    # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a JoinGroup of a member that has
    # never completed a join cannot be kept open longer than this.
    new_member_join_timeout_ms: int = 300_000
    # KIP-848 consumer groups (group.consumer.*); the first assignor is the default.
    consumer_group_session_timeout_ms: int = 45_000
    consumer_group_heartbeat_interval_ms: int = 5_000
    consumer_group_max_size: int = 2**31 - 1
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy: upgrade, downgrade, bidirectional or disabled.
    consumer_group_migration_policy: str = "bidirectional"

    def __post_init__(self) -> None:
        assert 0 < self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms
        assert self.group_initial_rebalance_delay_ms >= 0
        assert self.group_max_size >= 1
        assert self.offsets_retention_minutes >= 1
        assert self.offsets_retention_check_interval_ms >= 1
        assert self.offsets_topic_num_partitions >= 1
        assert 0 < self.consumer_group_heartbeat_interval_ms < self.consumer_group_session_timeout_ms
        assert self.consumer_group_assignors
        assert self.consumer_group_migration_policy in (
            "upgrade", "downgrade", "bidirectional", "disabled")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


class PartitionStatus(enum.Enum):
    LOADING = "LOADING"
    ACTIVE = "ACTIVE"


@dataclass(slots=True)
class _PendingAppend:
    partition: int
    records: tuple[CoordinatorRecord, ...]
    on_done: OnDone
    producer_id: int = NO_PRODUCER_ID     # a TxnOffsetCommit's records are transactional
    # Transaction markers appended to the partition after this append (and before the
    # next): (producer id, committed), replayed right after it, in log order.
    markers_after: list[tuple[int, bool]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Join:
    """The fields of one JoinGroup request, version differences resolved."""
    parked: Parked
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def require_known_member_id(self) -> bool:
        # KIP-394: from JoinGroup v4 a dynamic member must join twice, the second time with
        # the id the coordinator handed it, so a retried first join cannot leak members.
        return self.parked.version >= 4 and self.group_instance_id is None

    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)


# ------------------------------------------------------------------ response shapes

def _sync_response(version: int, error: ErrorCode, protocol_type: str | None = None,
                   protocol_name: str | None = None, assignment: bytes = b""
                   ) -> "messages.SyncGroupResponse":
    return messages.SyncGroupResponse(error_code=int(error), protocol_type=protocol_type,
                                      protocol_name=protocol_name, assignment=assignment)


def _leave_response(version: int, error: ErrorCode,
                    members: list[tuple[str, str | None, ErrorCode]]
                    ) -> "messages.LeaveGroupResponse":
    R = messages.LeaveGroupResponse
    if version >= 3:
        return R(error_code=int(error), members=[
            R.MemberResponse(member_id=m, group_instance_id=i, error_code=int(e))
            for m, i, e in members])
    # v0-v2 leave one member and have only the top-level error.
    if error == E.NONE and members:
        error = members[0][2]
    return R(error_code=int(error))


def _txn_commit_response(request: "messages.TxnOffsetCommitRequest",
                         errors: Mapping[tuple[str, int], ErrorCode] | ErrorCode
                         ) -> "messages.TxnOffsetCommitResponse":
    R = messages.TxnOffsetCommitResponse
    return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
        R.TxnOffsetCommitResponsePartition(
            partition_index=p.partition_index,
            error_code=int(errors if isinstance(errors, ErrorCode)
                           else errors[(t.name, p.partition_index)]))
        for p in t.partitions]) for t in request.topics])


def _commit_response(request: "messages.OffsetCommitRequest",
                     errors: Mapping[tuple[str, int], ErrorCode] | ErrorCode
                     ) -> "messages.OffsetCommitResponse":
    R = messages.OffsetCommitResponse
    return R(topics=[R.OffsetCommitResponseTopic(name=t.name, partitions=[
        R.OffsetCommitResponsePartition(
            partition_index=p.partition_index,
            error_code=int(errors if isinstance(errors, ErrorCode)
                           else errors[(t.name, p.partition_index)]))
        for p in t.partitions]) for t in request.topics])


class GroupCoordinator(ConsumerGroupProtocol):
    def __init__(self, config: GroupConfig | None = None,
                 rng: random.Random | None = None) -> None:
        self.config = config or GroupConfig()
        self._rng = rng or random.Random(0)
        self.active = True          # False after shutdown: COORDINATOR_NOT_AVAILABLE
        self._partitions: dict[int, PartitionStatus] = {}
        # Invariant: every group id with data in an ACTIVE partition's image has a group.
        self._groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups (consumer_coordinator.py). A group id is in one of the two maps.
        self._consumer_groups: dict[str, ConsumerGroup] = {}
        self._topics: TopicsView = {}   # name -> (topic id, partitions), from the metadata
        self._abandoned_effects: list[Effect] = []   # answers to a converted group's parked
        self._images: dict[int, CoordinatorImage] = {}   # ACTIVE partitions only
        self._pending: dict[int, _PendingAppend] = {}
        self._pending_order: dict[int, deque[int]] = {}  # partition -> append ids in order
        self._next_append_id = 0
        # (group, topic, partition) -> commits or deletions in flight; kept from expiring.
        self._busy_offsets: Counter[tuple[str, str, int]] = Counter()
        self._next_retention_check_ms: int | None = None

    # ================================================================== partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.config.offsets_topic_num_partitions)

    def partition_status(self, partition: int) -> PartitionStatus | None:
        return self._partitions.get(partition)

    def begin_load(self, partition: int) -> None:
        """This broker became leader of ``__consumer_offsets-<partition>``: requests for its
        groups get COORDINATOR_LOAD_IN_PROGRESS until ``complete_load``."""
        assert 0 <= partition < self.config.offsets_topic_num_partitions
        assert partition not in self._partitions, f"partition {partition} already loaded"
        self._partitions[partition] = PartitionStatus.LOADING

    def complete_load(self, partition: int, image: CoordinatorImage,
                      now_ms: int) -> list[Effect]:
        """Take over the groups the partition's records describe (``CoordinatorLoader``).

        Loaded groups with members are Stable and their members' session timers start
        now (Kafka GroupMetadata.loadGroup); groups with only offsets are Empty."""
        if self._partitions.get(partition) is not PartitionStatus.LOADING:
            return []     # unloaded while loading: the leadership has moved on
        self._partitions[partition] = PartitionStatus.ACTIVE
        self._images[partition] = image
        effects: list[Effect] = []
        for group_id in sorted(image.group_ids()):
            if self.partition_for(group_id) != partition:
                continue   # written under another partition count; unreachable here
            if group_id in image.consumer_groups:
                self._consumer_groups[group_id] = self._consumer_group_from_records(
                    group_id, image.consumer_group_records(group_id), now_ms)
                continue
            group = self._group_from_image(group_id, image, now_ms)
            self._groups[group_id] = group
            if len(group.members) > self.config.group_max_size:
                self._prepare_rebalance(group, now_ms, effects)
        if self._next_retention_check_ms is None:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
        return effects

    def unload_partition(self, partition: int, now_ms: int) -> list[Effect]:
        """This broker no longer leads the partition: its groups go Dead here, parked
        requests get NOT_COORDINATOR, appends in flight are abandoned (the new leader
        replays whatever of them reached the log)."""
        effects: list[Effect] = []
        if self._partitions.pop(partition, None) is None:
            return effects
        for group_id in [g for g in self._groups if self.partition_for(g) == partition]:
            group = self._groups.pop(group_id)
            self._complete_all_parked(group, E.NOT_COORDINATOR, effects)
            self._mark_dead(group, now_ms)
        for group_id in [g for g in self._consumer_groups if self.partition_for(g) == partition]:
            del self._consumer_groups[group_id]
        self._images.pop(partition, None)
        for append_id in self._pending_order.pop(partition, deque()):
            pending = self._pending.pop(append_id)
            pending.on_done(E.NOT_LEADER_OR_FOLLOWER, now_ms, effects)
        return effects

    def shutdown(self, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        for partition in sorted(self._partitions):
            effects += self.unload_partition(partition, now_ms)
        self.active = False
        return effects

    def image(self, partition: int) -> CoordinatorImage:
        return self._images[partition]

    def group(self, group_id: str) -> ClassicGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ClassicGroup]:
        return list(self._groups.values())

    def set_topics(self, topics: TopicsView) -> None:
        """The topics of the current metadata: consumer groups assign their partitions."""
        self._topics = topics

    def _pending_records(self, group_id: str) -> list[CoordinatorRecord]:
        """Records of ``group_id`` appended but not yet acknowledged, in append order."""
        out = []
        for append_id in self._pending_order.get(self.partition_for(group_id), ()):
            out += [r for r in self._pending[append_id].records if r.key.group_id == group_id]
        return out

    def _convert_to_classic_group(self, group: ConsumerGroup, leaving: str,
                                  now_ms: int) -> list[Effect]:
        """The downgrade (Kafka's ClassicGroup.fromConsumerGroup): the last member speaking
        the consumer protocol left, the others are classic members. They become a Stable
        classic group at the group epoch, each keeping its assignment, and a rebalance
        starts at once so that they rejoin under the classic protocol."""
        gid = group.group_id
        names = {tid: n for n, (tid, _) in self._topics.items()}
        classic = ClassicGroup(gid, now_ms)
        classic.generation_id = group.group_epoch
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        for m in group.members.values():
            if m.member_id == leaving or m.classic is None:
                continue
            classic.add_member(Member(
                m.member_id, m.instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                m.classic.protocols, assignment=encode_assignment(Assignment(tuple(
                    TopicPartition(names[t], p) for t, ps in sorted(m.assigned.items())
                    if t in names for p in sorted(ps)))),
                heartbeat_deadline_ms=now_ms + m.classic.session_timeout_ms))
        classic.leader_id = next(iter(classic.members))
        classic.protocol_name = classic.select_protocol()
        classic.state = S.STABLE          # as a loaded group: not a transition
        classic.subscribed_topics = classic.compute_subscribed_topics()
        records = [r for member_id in sorted(group.members)
                   for r in consumer_group_member_tombstones(gid, member_id)]
        records += consumer_group_tombstones(gid)
        records.append(self._group_record(classic))
        del self._consumer_groups[gid]
        self._groups[gid] = classic
        # A lost snapshot leaves the log with the consumer group, which a new coordinator
        # loads; its classic members then rejoin it as they do here. Nothing is lost.
        effects: list[Effect] = [self._append(gid, records, now_ms, _ignore_append_result)]
        self._prepare_rebalance(classic, now_ms, effects)
        return effects

    def _abandon_classic_group(self, classic: ClassicGroup, now_ms: int) -> None:
        """A classic group converted to a consumer group: waiting members rejoin."""
        effects: list[Effect] = []
        self._complete_all_parked(classic, E.REBALANCE_IN_PROGRESS, effects)
        self._abandoned_effects += effects
        self._mark_dead(classic, now_ms)
        del self._groups[classic.group_id]

    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Every live group this coordinator holds, with its committed offsets (for the
        broker's consumer-lag metrics)."""
        out = {}
        for group_id in [*self._groups, *self._consumer_groups]:
            committed = self._committed(group_id)
            if committed:
                out[group_id] = {tp: v.offset for tp, v in committed.items()}
        return out

    # ================================================================== appends

    def on_append_result(self, append_id: int, error_code: int, now_ms: int) -> list[Effect]:
        """An ``Append`` ended: NONE once acks=all is satisfied, else the produce error."""
        pending = self._pending.pop(append_id, None)
        effects: list[Effect] = []
        if pending is None:
            return effects     # its partition was unloaded; already answered
        error = ErrorCode(error_code) if error_code in ERROR_INFO \
            else E.UNKNOWN_SERVER_ERROR
        order = self._pending_order[pending.partition]
        # Replay must follow the log: a success may only be reported once every earlier
        # append to the partition is resolved. A failure changes nothing, so it may come
        # early (an append refused at once while an earlier one awaits replication).
        assert error != E.NONE or order[0] == append_id, \
            "successful appends to one partition must be reported in append order"
        position = order.index(append_id)
        order.remove(append_id)
        image = self._images[pending.partition]
        if error == E.NONE:
            for record in pending.records:
                image.replay(record, pending.producer_id)
        pending.on_done(error, now_ms, effects)
        if pending.markers_after and position > 0:
            # A failure reported early: the markers follow the append still before it.
            self._pending[order[position - 1]].markers_after += pending.markers_after
        else:
            for producer_id, committed in pending.markers_after:
                self._replay_end_txn(pending.partition, producer_id, committed, now_ms)
        if error == E.NONE:
            # A group whose records outlived its in-memory object (a commit acknowledged
            # after the group was deleted) comes back as the log would load it.
            for group_id in {r.key.group_id for r in pending.records}:
                if group_id in image.consumer_groups:
                    if group_id not in self._consumer_groups:
                        self._consumer_groups[group_id] = self._consumer_group_from_records(
                            group_id, image.consumer_group_records(group_id), now_ms)
                    continue
                if group_id in self._consumer_groups:
                    continue      # its offsets outlived its records: it stays as it is
                if group_id not in self._groups and group_id in image.group_ids():
                    self._groups[group_id] = self._group_from_image(group_id, image, now_ms)
        return effects

    def _append(self, group_id: str, records: list[CoordinatorRecord], now_ms: int,
                on_done: OnDone, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH) -> Append:
        partition = self.partition_for(group_id)
        assert self._partitions.get(partition) is PartitionStatus.ACTIVE
        append_id = self._next_append_id
        self._next_append_id += 1
        self._pending[append_id] = _PendingAppend(partition, tuple(records), on_done,
                                                  producer_id)
        self._pending_order.setdefault(partition, deque()).append(append_id)
        return Append(append_id, partition, tuple(records), now_ms, producer_id, producer_epoch)

    # ================================================================== transactions

    def on_txn_marker(self, partition: int, producer_id: int, committed: bool,
                      now_ms: int) -> list[Effect]:
        """A COMMIT (``committed``) or ABORT marker of ``producer_id`` was appended to
        ``__consumer_offsets-<partition>``'s leader log: its pending transactional offsets
        become visible or are dropped.

        Appends still awaiting their acknowledgement precede the marker in the log, so
        the marker is replayed after them (their offsets may be the transaction's). A
        partition still loading needs nothing: the loader reads the marker from the log."""
        if self._partitions.get(partition) is not PartitionStatus.ACTIVE:
            return []
        order = self._pending_order.get(partition)
        if order:
            self._pending[order[-1]].markers_after.append((producer_id, committed))
        else:
            self._replay_end_txn(partition, producer_id, committed, now_ms)
        return []

    def _replay_end_txn(self, partition: int, producer_id: int, committed: bool,
                        now_ms: int) -> None:
        image = self._images[partition]
        for group_id in sorted(image.replay_end_txn(producer_id, committed)):
            # A group deleted while the transaction was open comes back, as a load would.
            if group_id not in self._groups and group_id not in self._consumer_groups \
                    and group_id not in image.consumer_groups:
                self._groups[group_id] = self._group_from_image(group_id, image, now_ms)

    def handle_txn_offset_commit(self, token: Hashable,
                                 request: "messages.TxnOffsetCommitRequest",
                                 version: int, now_ms: int) -> list[Effect]:
        """TxnOffsetCommit: the offsets are written as a transactional batch under the
        producer's id and epoch (the log fences a stale epoch) and stay pending, invisible
        to OffsetFetch, until the transaction's marker lands on the partition
        (``on_txn_marker``). Kafka's OffsetMetadataManager.commitTransactionalOffset."""
        effects: list[Effect] = []
        group_id = request.group_id

        def reply(errors: Mapping[tuple[str, int], ErrorCode] | ErrorCode) -> list[Effect]:
            effects.append(Completion(token, _txn_commit_response(request, errors)))
            return effects

        error = self._status_error(group_id)
        if error is not None:
            return reply(error)
        # v3+ (KIP-447) carries the consumer's group metadata, so a zombie is fenced here.
        generation_id = request.generation_id if version >= 3 else -1
        member_id = request.member_id if version >= 3 else UNKNOWN_MEMBER_ID
        instance_id = request.group_instance_id if version >= 3 else None
        consumer_group = self._consumer_groups.get(group_id)
        group: ClassicGroup | None = self._groups.get(group_id)
        if consumer_group is not None:
            error = self._validate_consumer_group_commit(
                consumer_group, member_id, instance_id, generation_id, version, now_ms,
                transactional=True)
            if error == E.STALE_MEMBER_EPOCH:
                error = E.ILLEGAL_GENERATION     # Kafka's validateTransactionalOffsetCommit
        else:
            if group is None:
                if generation_id >= 0:
                    return reply(E.ILLEGAL_GENERATION)
                group = ClassicGroup(group_id, now_ms)
            error = validate_txn_offset_commit(group, member_id, instance_id, generation_id)
        if error != E.NONE:
            return reply(error)

        errors: dict[tuple[str, int], ErrorCode] = {}
        records: list[CoordinatorRecord] = []
        committed: list[tuple[str, str, int]] = []
        for topic in request.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                    errors[tp] = E.OFFSET_METADATA_TOO_LARGE
                    continue
                errors[tp] = E.NONE
                records.append(CoordinatorRecord(
                    OffsetCommitKey(group_id, topic.name, p.partition_index),
                    txn_commit_value(p, version, now_ms)))
                committed.append((group_id, topic.name, p.partition_index))
        if not records:
            return reply(errors)
        if group is not None:
            self._groups.setdefault(group_id, group)
        self._busy_offsets.update(committed)

        def done(error: ErrorCode, now: int, out: list[Effect]) -> None:
            self._busy_offsets.subtract(committed)
            self._busy_offsets += Counter()
            if error != E.NONE:
                # Fencing errors of the log (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
                # INVALID_TXN_STATE) reach the producer unchanged.
                failed = group_append_error(error)
                for _, topic_name, partition in committed:
                    errors[(topic_name, partition)] = failed
            out.append(Completion(token, _txn_commit_response(request, errors)))

        effects.append(self._append(group_id, records, now_ms, done,
                                    request.producer_id, request.producer_epoch))
        return effects

    # ================================================================== validation

    def _status_error(self, group_id: str | None, allow_empty_id: bool = False) -> ErrorCode | None:
        # Kafka GroupCoordinator.validateGroupStatus. OffsetCommit/Fetch, DescribeGroups and
        # DeleteGroups accept the empty group id of old standalone consumers.
        if group_id is None or (group_id == "" and not allow_empty_id):
            return E.INVALID_GROUP_ID
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        status = self._partitions.get(self.partition_for(group_id))
        if status is None:
            return E.NOT_COORDINATOR
        if status is PartitionStatus.LOADING:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """group.max.size (Kafka acceptJoiningMember): while preparing, count members that
        have joined, so the last to rejoin of an oversized group are the ones refused."""
        limit = self.config.group_max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.state is S.PREPARING_REBALANCE:
            return ((group.has(member_id) and group.members[member_id].awaiting_join is not None)
                    or group.num_awaiting_join() < limit)
        return group.has(member_id) or len(group.members) < limit

    # ================================================================== JoinGroup

    def handle_join_group(self, token: Hashable, request: "messages.JoinGroupRequest",
                          version: int, client_id: str, client_host: str,
                          now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        parked = Parked(token, version)

        def reply(error: ErrorCode, member_id: str = request.member_id) -> list[Effect]:
            effects.append(Completion(token, join_response(version, error, member_id)))
            return effects

        error = self._status_error(request.group_id)
        if error is not None:
            return reply(error)
        cfg = self.config
        session_timeout_ms = request.session_timeout_ms
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return reply(E.INVALID_SESSION_TIMEOUT)
        # v0 has no rebalance timeout; the session timeout stands in (JoinGroupRequest.json).
        rebalance_timeout_ms = request.rebalance_timeout_ms
        if version < 1 or rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        protocols: dict[str, bytes] = {}
        for p in request.protocols:
            protocols.setdefault(p.name, bytes(p.metadata))   # a name counts once, first wins
        join = _Join(parked, request.member_id,
                     request.group_instance_id if version >= 5 else None, client_id,
                     client_host, session_timeout_ms, rebalance_timeout_ms,
                     request.protocol_type, tuple(protocols.items()))
        consumer_group = self._consumer_groups.get(request.group_id)
        if consumer_group is not None:
            return self._classic_join_to_consumer_group(consumer_group, join, now_ms)

        group = self._groups.get(request.group_id)
        created = False
        if group is None:
            if join.member_id != UNKNOWN_MEMBER_ID:
                return reply(E.UNKNOWN_MEMBER_ID)
            group = self._groups[request.group_id] = ClassicGroup(request.group_id, now_ms)
            created = True

        if not self._accept_joining_member(group, join.member_id):
            if group.has(join.member_id):
                self._remove_member_and_update_group(group, group.members[join.member_id],
                                                     now_ms, effects)
            reply(E.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        elif join.member_id == UNKNOWN_MEMBER_ID:
            self._join_unknown_member(group, join, now_ms, effects)
        else:
            self._join_known_member(group, join, now_ms, effects)

        if group.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms, effects)
        if created and group.is_unused():
            del self._groups[group.group_id]   # refused before anything joined
        return effects

    def _reply_join(self, join: _Join, error: ErrorCode, member_id: str,
                    effects: list[Effect]) -> None:
        effects.append(Completion(join.parked.token,
                                  join_response(join.parked.version, error, member_id)))

    def _join_unknown_member(self, group: ClassicGroup, join: _Join, now_ms: int,
                             effects: list[Effect]) -> None:
        if group.state is S.DEAD:
            # Deleted or moving away under our feet; the client rediscovers and retries.
            return self._reply_join(join, E.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID, effects)
        if not group.supports_protocols(join.protocol_type, join.names()):
            return self._reply_join(join, E.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, effects)
        prefix = join.group_instance_id if join.group_instance_id is not None else join.client_id
        new_member_id = f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"
        if join.group_instance_id is not None:
            old_member_id = group.current_static_member_id(join.group_instance_id)
            if old_member_id is not None:
                return self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, join, now_ms, effects)
            return self._add_member_and_rebalance(group, new_member_id, join, now_ms, effects)
        if join.require_known_member_id:
            group.pending_members[new_member_id] = now_ms + join.session_timeout_ms
            return self._reply_join(join, E.MEMBER_ID_REQUIRED, new_member_id, effects)
        return self._add_member_and_rebalance(group, new_member_id, join, now_ms, effects)

    def _join_known_member(self, group: ClassicGroup, join: _Join, now_ms: int,
                           effects: list[Effect]) -> None:
        member_id = join.member_id
        if group.state is S.DEAD:
            return self._reply_join(join, E.COORDINATOR_NOT_AVAILABLE, member_id, effects)
        if not group.supports_protocols(join.protocol_type, join.names(), member_id):
            return self._reply_join(join, E.INCONSISTENT_GROUP_PROTOCOL, member_id, effects)
        if group.is_pending(member_id):
            if join.group_instance_id is not None:
                # Pending ids are handed to dynamic members only (KIP-394); Kafka treats
                # this as a broken client. It rejoins from scratch.
                return self._reply_join(join, E.UNKNOWN_MEMBER_ID, member_id, effects)
            return self._add_member_and_rebalance(group, member_id, join, now_ms, effects)
        if group.is_static_member_fenced(join.group_instance_id, member_id):
            return self._reply_join(join, E.FENCED_INSTANCE_ID, member_id, effects)
        if not group.has(member_id) or (join.group_instance_id is not None
                                        and join.group_instance_id not in group.static_members):
            return self._reply_join(join, E.UNKNOWN_MEMBER_ID, member_id, effects)
        member = group.members[member_id]
        if group.state is S.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, join, now_ms, effects)
        if group.state is S.COMPLETING_REBALANCE:
            if member.matches(join.protocols):
                # It lost our JoinGroup response; hand it the current generation again.
                return self._reply_current_generation(group, member, join, effects)
            return self._update_member_and_rebalance(group, member, join, now_ms, effects)
        if group.state is S.STABLE:
            # The leader rejoining forces a rebalance: that is how a consumer leader asks
            # for one when topic metadata changed without its subscription changing.
            if group.is_leader(member_id) or not member.matches(join.protocols):
                return self._update_member_and_rebalance(group, member, join, now_ms, effects)
            return self._reply_current_generation(group, member, join, effects)
        raise AssertionError(f"member {member_id} in a {group.state.value} group")

    def _reply_current_generation(self, group: ClassicGroup, member: Member, join: _Join,
                                  effects: list[Effect]) -> None:
        members = self._join_members(group) if group.is_leader(member.member_id) else []
        effects.append(Completion(join.parked.token, join_response(
            join.parked.version, E.NONE, member.member_id, group.generation_id,
            group.protocol_type, group.protocol_name, group.leader_id or "", False, members)))

    def _join_members(self, group: ClassicGroup) -> list:
        assert group.protocol_name is not None
        M = messages.JoinGroupResponse.JoinGroupResponseMember
        return [M(member_id=m.member_id, group_instance_id=m.group_instance_id,
                  metadata=m.metadata(group.protocol_name)) for m in group.members.values()]

    def _park_join(self, member: Member, parked: Parked, effects: list[Effect]) -> None:
        if member.awaiting_join is not None:
            # A retried JoinGroup supersedes the first; the first is answered so the shell
            # does not hold it forever, with an error that makes a live client rejoin.
            old = member.awaiting_join
            effects.append(Completion(old.token, join_response(
                old.version, E.REBALANCE_IN_PROGRESS, member.member_id)))
        member.awaiting_join = parked

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, join: _Join,
                                  now_ms: int, effects: list[Effect]) -> None:
        member = Member(member_id, join.group_instance_id, join.client_id, join.client_host,
                        join.rebalance_timeout_ms, join.session_timeout_ms, join.protocol_type,
                        join.protocols, awaiting_join=join.parked, is_new=True,
                        heartbeat_deadline_ms=now_ms + self.config.new_member_join_timeout_ms)
        if group.state is S.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True       # KIP-134: keep the initial delay going
        group.add_member(member)
        self._maybe_prepare_rebalance(group, now_ms, effects)

    def _update_member_and_rebalance(self, group: ClassicGroup, member: Member, join: _Join,
                                     now_ms: int, effects: list[Effect]) -> None:
        self._park_join(member, join.parked, effects)
        group.update_member_protocols(member, join.protocols, join.rebalance_timeout_ms,
                                      join.session_timeout_ms)
        self._maybe_prepare_rebalance(group, now_ms, effects)

    def _update_static_member_and_rebalance(self, group: ClassicGroup, old_member_id: str,
                                            new_member_id: str, join: _Join, now_ms: int,
                                            effects: list[Effect]) -> None:
        """KIP-345: a static member came back without its member id (a restart)."""
        assert join.group_instance_id is not None
        member = group.members[old_member_id]
        leader_before = group.leader_id
        # The old incarnation is a zombie from now on: fence whatever it has waiting.
        self._complete_parked(member, E.FENCED_INSTANCE_ID, effects)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.replace_static_member(join.group_instance_id, old_member_id, new_member_id)
        member.awaiting_join = join.parked
        group.update_member_protocols(member, join.protocols, join.rebalance_timeout_ms,
                                      join.session_timeout_ms)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

        if group.state is S.STABLE:
            if group.select_protocol() != group.protocol_name:
                return self._maybe_prepare_rebalance(group, now_ms, effects)
            # Nothing changed for the assignment: persist the new member id and answer
            # without a rebalance once that is written.
            generation_id = group.generation_id
            parked = join.parked

            def done(error: ErrorCode, now: int, out: list[Effect]) -> None:
                current = (self._groups.get(group.group_id) is group
                           and group.state is S.STABLE and group.generation_id == generation_id
                           and group.members.get(new_member_id) is member
                           and member.awaiting_join is parked)
                if not current:
                    return   # a rebalance, removal or unload has taken over this request
                member.awaiting_join = None
                if error != E.NONE:
                    # Undo: the old member id stays the one the log knows.
                    group.update_member_protocols(member, *old)
                    assert join.group_instance_id is not None   # only static members rejoin so
                    group.replace_static_member(join.group_instance_id, new_member_id,
                                                old_member_id)
                    member.heartbeat_deadline_ms = now + member.session_timeout_ms
                    out.append(Completion(parked.token, join_response(
                        parked.version, group_append_error(error), UNKNOWN_MEMBER_ID)))
                    return
                if parked.version >= 9 and group.is_leader(new_member_id):
                    # KIP-814: the leader learns it leads but must not reassign.
                    response = join_response(
                        parked.version, E.NONE, new_member_id, generation_id,
                        group.protocol_type, group.protocol_name, new_member_id, True,
                        self._join_members(group))
                else:
                    # Before v9 the old leader id is returned, so a returning leader acts
                    # as a follower and takes the stored assignment from SyncGroup.
                    response = join_response(
                        parked.version, E.NONE, new_member_id, generation_id,
                        group.protocol_type, group.protocol_name, leader_before or "")
                out.append(Completion(parked.token, response))

            effects.append(self._append(group.group_id, [self._group_record(group)], now_ms, done))
        elif group.state is S.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(group, now_ms, effects)
        else:
            assert group.state is S.PREPARING_REBALANCE, group

    # ------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance(self, group: ClassicGroup, now_ms: int,
                                 effects: list[Effect]) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms, effects)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int,
                           effects: list[Effect]) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS,
                                                       now_ms, effects)
        group.sync_deadline_ms = None
        from_empty = group.state is S.EMPTY
        group.transition_to(S.PREPARING_REBALANCE, now_ms)
        if from_empty:
            delay_ms = self.config.group_initial_rebalance_delay_ms
            group.join_is_initial = True
            group.join_deadline_ms = now_ms + delay_ms
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
        else:
            group.join_is_initial = False
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            self._maybe_complete_join(group, now_ms, effects)

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int,
                             effects: list[Effect]) -> None:
        if (group.state is S.PREPARING_REBALANCE and not group.join_is_initial
                and group.has_all_members_joined()):
            self._complete_join(group, now_ms, effects)

    def _on_join_deadline(self, group: ClassicGroup, now_ms: int, effects: list[Effect]) -> None:
        if group.join_is_initial and group.new_member_added and group.initial_delay_remaining_ms > 0:
            # KIP-134: members are still arriving; wait another delay, within the budget
            # of the rebalance timeout (Kafka InitialDelayedJoin).
            group.new_member_added = False
            delay_ms = min(self.config.group_initial_rebalance_delay_ms,
                           group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms = max(group.initial_delay_remaining_ms - delay_ms, 0)
            group.join_deadline_ms = now_ms + delay_ms
            return
        self._complete_join(group, now_ms, effects)

    def _complete_join(self, group: ClassicGroup, now_ms: int, effects: list[Effect]) -> None:
        """Kafka onCompleteJoin: start the next generation with the members that joined."""
        assert group.state is S.PREPARING_REBALANCE
        group.join_deadline_ms = None
        group.join_is_initial = False
        group.new_member_added = False
        # Dynamic members that did not rejoin in time are gone; static ones keep their
        # place until their session expires (KIP-345).
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                self._drop_member(group, member, E.UNKNOWN_MEMBER_ID, effects)
        if group.members and not group.maybe_elect_new_joined_leader():
            # Only static members that did not rejoin are left: wait again.
            group.join_deadline_ms = now_ms + max(group.rebalance_timeout_ms(), 1)
            return
        group.init_next_generation(now_ms)
        if group.state is S.EMPTY:
            effects.append(self._append(group.group_id, [self._group_record(group)], now_ms,
                                        _ignore_append_result))
            return
        leader_members = self._join_members(group)
        for member in group.members.values():
            parked = member.awaiting_join
            if parked is not None:
                member.awaiting_join = None
                effects.append(Completion(parked.token, join_response(
                    parked.version, E.NONE, member.member_id, group.generation_id,
                    group.protocol_type, group.protocol_name, group.leader_id or "", False,
                    leader_members if group.is_leader(member.member_id) else [])))
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()

    def _on_sync_deadline(self, group: ClassicGroup, now_ms: int, effects: list[Effect]) -> None:
        """Members of the new generation that never sent SyncGroup are dropped (Kafka
        onExpirePendingSync); if the leader is among them nobody gets an assignment."""
        group.sync_deadline_ms = None
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync_members:
            return
        for member_id in [m for m in group.members if m in group.pending_sync_members]:
            self._drop_member(group, group.members[member_id], E.UNKNOWN_MEMBER_ID, effects)
        self._prepare_rebalance(group, now_ms, effects)

    # ================================================================== SyncGroup

    def handle_sync_group(self, token: Hashable, request: "messages.SyncGroupRequest",
                          version: int, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []

        def reply(error: ErrorCode) -> list[Effect]:
            effects.append(Completion(token, _sync_response(version, error)))
            return effects

        error = self._status_error(request.group_id)
        if error is not None:
            return reply(error)
        consumer_group = self._consumer_groups.get(request.group_id)
        if consumer_group is not None:
            error, assignment, name = self._classic_sync_to_consumer_group(
                consumer_group, request, version, now_ms)
            effects.append(Completion(token, _sync_response(
                version, error, CONSUMER_PROTOCOL_TYPE if error == E.NONE else None, name,
                assignment)))
            return effects
        group = self._groups.get(request.group_id)
        member_id = request.member_id
        instance_id = request.group_instance_id if version >= 3 else None
        if group is None:
            return reply(E.UNKNOWN_MEMBER_ID)
        if group.state is S.DEAD:
            return reply(E.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(instance_id, member_id):
            return reply(E.FENCED_INSTANCE_ID)
        if not group.has(member_id):
            return reply(E.UNKNOWN_MEMBER_ID)
        if request.generation_id != group.generation_id:
            return reply(E.ILLEGAL_GENERATION)
        if version >= 5 and (
                (request.protocol_type is not None and request.protocol_type != group.protocol_type)
                or (request.protocol_name is not None
                    and request.protocol_name != group.protocol_name)):
            return reply(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is S.EMPTY:
            return reply(E.UNKNOWN_MEMBER_ID)
        if group.state is S.PREPARING_REBALANCE:
            return reply(E.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        self._received_sync(group, member_id)
        if group.state is S.STABLE:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            effects.append(Completion(token, _sync_response(
                version, E.NONE, group.protocol_type, group.protocol_name, member.assignment)))
            return effects

        assert group.state is S.COMPLETING_REBALANCE
        if member.awaiting_sync is not None:
            old = member.awaiting_sync   # a retry supersedes it; see _park_join
            effects.append(Completion(old.token, _sync_response(old.version,
                                                                E.REBALANCE_IN_PROGRESS)))
        member.awaiting_sync = Parked(token, version)
        if group.is_leader(member_id):
            self._store_assignment(group, request, now_ms, effects)
        return effects

    def _received_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            group.sync_deadline_ms = None

    def _store_assignment(self, group: ClassicGroup, request: "messages.SyncGroupRequest",
                          now_ms: int, effects: list[Effect]) -> None:
        """The leader's assignment: write the group snapshot, then go Stable and answer."""
        given = {a.member_id: bytes(a.assignment) for a in request.assignments}
        # Members the leader left out get an empty assignment; ids it made up are ignored.
        assignment = {member_id: given.get(member_id, b"") for member_id in group.members}
        generation_id = group.generation_id

        def done(error: ErrorCode, now: int, out: list[Effect]) -> None:
            # Another join may have restarted the rebalance while the write was in flight.
            if (self._groups.get(group.group_id) is not group
                    or group.state is not S.COMPLETING_REBALANCE
                    or group.generation_id != generation_id):
                return
            if error != E.NONE:
                self._reset_and_propagate_assignment_error(group, group_append_error(error),
                                                           now, out)
                self._maybe_prepare_rebalance(group, now, out)
                return
            assert set(group.members) == set(assignment), group
            for member_id, member in group.members.items():
                member.assignment = assignment[member_id]
            self._propagate_assignment(group, E.NONE, now, out)
            group.transition_to(S.STABLE, now)

        effects.append(self._append(group.group_id, [self._group_record(group, assignment)],
                                    now_ms, done))

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode, now_ms: int,
                              effects: list[Effect]) -> None:
        ok = error == E.NONE
        for member in group.members.values():
            parked = member.awaiting_sync
            if parked is None:
                continue
            member.awaiting_sync = None
            effects.append(Completion(parked.token, _sync_response(
                parked.version, error, group.protocol_type if ok else None,
                group.protocol_name if ok else None, member.assignment if ok else b"")))
            # Its session timer was suspended while it waited; it restarts now.
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode,
                                              now_ms: int, effects: list[Effect]) -> None:
        assert group.state is S.COMPLETING_REBALANCE
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now_ms, effects)

    # ================================================================== Heartbeat

    def handle_heartbeat(self, token: Hashable, request: "messages.HeartbeatRequest",
                         version: int, now_ms: int) -> list[Effect]:
        def reply(error: ErrorCode) -> list[Effect]:
            return [Completion(token, messages.HeartbeatResponse(error_code=int(error)))]

        error = self._status_error(request.group_id)
        if error is E.COORDINATOR_LOAD_IN_PROGRESS:
            # Kafka answers blindly while loading: the member keeps its place meanwhile.
            return reply(E.NONE)
        if error is not None:
            return reply(error)
        consumer_group = self._consumer_groups.get(request.group_id)
        if consumer_group is not None:
            return reply(self._classic_heartbeat_to_consumer_group(consumer_group, request,
                                                                   version, now_ms))
        group = self._groups.get(request.group_id)
        member_id = request.member_id
        instance_id = request.group_instance_id if version >= 3 else None
        if group is None:
            return reply(E.UNKNOWN_MEMBER_ID)
        if group.state is S.DEAD:
            return reply(E.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(instance_id, member_id):
            return reply(E.FENCED_INSTANCE_ID)
        if not group.has(member_id):
            return reply(E.UNKNOWN_MEMBER_ID)
        if request.generation_id != group.generation_id:
            return reply(E.ILLEGAL_GENERATION)
        if group.state is S.EMPTY:
            return reply(E.UNKNOWN_MEMBER_ID)
        member = group.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            return reply(E.REBALANCE_IN_PROGRESS)   # the signal to rejoin
        return reply(E.NONE)

    # ================================================================== LeaveGroup

    def handle_leave_group(self, token: Hashable, request: "messages.LeaveGroupRequest",
                           version: int, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        if version >= 3:
            leaving = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            leaving = [(request.member_id, None)]
        error = self._status_error(request.group_id)
        if error is not None:
            effects.append(Completion(token, _leave_response(version, error, [])))
            return effects
        consumer_group = self._consumer_groups.get(request.group_id)
        if consumer_group is not None:
            results, appends = self._classic_leave_to_consumer_group(
                consumer_group, [(m or "", i) for m, i in leaving], now_ms)
            effects += appends
            effects.append(Completion(token, _leave_response(version, E.NONE, results)))
            return effects
        group = self._groups.get(request.group_id)
        if group is None:
            effects.append(Completion(token, _leave_response(
                version, E.NONE, [(m, i, E.UNKNOWN_MEMBER_ID) for m, i in leaving])))
            return effects
        if group.state is S.DEAD:
            effects.append(Completion(token, _leave_response(
                version, E.COORDINATOR_NOT_AVAILABLE, [])))
            return effects
        results = []
        for member_id, instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                # KIP-345 admin removal by group.instance.id alone.
                current = group.current_static_member_id(instance_id)
                if current is None:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_member_and_update_group(group, group.members[current], now_ms,
                                                     effects)
                results.append((member_id, instance_id, E.NONE))
            elif group.is_pending(member_id):
                self._remove_pending_member(group, member_id, now_ms, effects)
                results.append((member_id, instance_id, E.NONE))
            elif group.is_static_member_fenced(instance_id, member_id):
                results.append((member_id, instance_id, E.FENCED_INSTANCE_ID))
            elif group.has(member_id):
                self._remove_member_and_update_group(group, group.members[member_id], now_ms,
                                                     effects)
                results.append((member_id, instance_id, E.NONE))
            else:
                results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
        effects.append(Completion(token, _leave_response(version, E.NONE, results)))
        return effects

    # ------------------------------------------------------------------ removal

    def _complete_parked(self, member: Member, error: ErrorCode, effects: list[Effect]) -> None:
        if member.awaiting_join is not None:
            parked, member.awaiting_join = member.awaiting_join, None
            effects.append(Completion(parked.token,
                                      join_response(parked.version, error, member.member_id)))
        if member.awaiting_sync is not None:
            parked, member.awaiting_sync = member.awaiting_sync, None
            effects.append(Completion(parked.token, _sync_response(parked.version, error)))

    def _complete_all_parked(self, group: ClassicGroup, error: ErrorCode,
                             effects: list[Effect]) -> None:
        for member in group.members.values():
            self._complete_parked(member, error, effects)

    def _drop_member(self, group: ClassicGroup, member: Member, error: ErrorCode,
                     effects: list[Effect]) -> None:
        """Remove a member; whatever it had waiting gets ``error``. No rebalance here."""
        if member.awaiting_join is not None:
            # UNKNOWN_MEMBER_ID with no member id: a client still alive joins afresh.
            parked, member.awaiting_join = member.awaiting_join, None
            effects.append(Completion(parked.token,
                                      join_response(parked.version, error, UNKNOWN_MEMBER_ID)))
        self._complete_parked(member, error, effects)
        group.remove_member(member.member_id)
        if group.sync_deadline_ms is not None and not group.pending_sync_members:
            group.sync_deadline_ms = None

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member, now_ms: int,
                                        effects: list[Effect]) -> None:
        self._drop_member(group, member, E.UNKNOWN_MEMBER_ID, effects)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now_ms, effects)
        elif group.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms, effects)

    def _remove_pending_member(self, group: ClassicGroup, member_id: str, now_ms: int,
                               effects: list[Effect]) -> None:
        del group.pending_members[member_id]
        if group.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms, effects)

    def _mark_dead(self, group: ClassicGroup, now_ms: int) -> None:
        group.join_deadline_ms = None
        group.sync_deadline_ms = None
        group.pending_members.clear()
        group.transition_to(S.DEAD, now_ms)

    # ================================================================== timers

    def poll(self, now_ms: int) -> tuple[list[Effect], int]:
        """Fire every timer due at ``now_ms``; return the effects and the milliseconds
        until the next deadline (0: call again at once)."""
        effects: list[Effect] = []
        for group_id in list(self._groups):
            group = self._groups.get(group_id)
            if group is not None and group.state is not S.DEAD:
                self._poll_group(group, now_ms, effects)
        self._poll_consumer_groups(now_ms, effects)
        if self._next_retention_check_ms is not None and now_ms >= self._next_retention_check_ms:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
            self._expire_offsets(now_ms, effects)
        return effects, self._ms_until_next_deadline(now_ms)

    def _due_timers(self, group: ClassicGroup) -> list[tuple[int, int, str]]:
        """(deadline, kind, member id): kind 0 pending member, 1 session, 2 join, 3 sync."""
        timers = [(deadline, 0, m) for m, deadline in group.pending_members.items()]
        timers += [(m.heartbeat_deadline_ms, 1, member_id)
                   for member_id, m in group.members.items() if m.session_timer_running()]
        if group.join_deadline_ms is not None:
            timers.append((group.join_deadline_ms, 2, ""))
        if group.sync_deadline_ms is not None:
            timers.append((group.sync_deadline_ms, 3, ""))
        return timers

    def _poll_group(self, group: ClassicGroup, now_ms: int, effects: list[Effect]) -> None:
        # Fire the timers due now, earliest first; each is re-checked before it fires since
        # an earlier one may have changed the group. Timers set while firing (at now_ms at
        # the earliest) wait for the next poll, so one poll always ends.
        for deadline, kind, member_id in sorted(t for t in self._due_timers(group) if t[0] <= now_ms):
            if group.state is S.DEAD or self._groups.get(group.group_id) is not group:
                return
            if kind == 0:
                if group.pending_members.get(member_id) == deadline:
                    self._remove_pending_member(group, member_id, now_ms, effects)
            elif kind == 1:
                member = group.members.get(member_id)
                if (member is not None and member.session_timer_running()
                        and member.heartbeat_deadline_ms <= now_ms):
                    self._remove_member_and_update_group(group, member, now_ms, effects)
            elif kind == 2:
                if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
                    self._on_join_deadline(group, now_ms, effects)
            elif group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
                self._on_sync_deadline(group, now_ms, effects)

    def _ms_until_next_deadline(self, now_ms: int) -> int:
        deadlines = [t[0] for g in self._groups.values() if g.state is not S.DEAD
                     for t in self._due_timers(g)]
        deadlines += self._consumer_deadlines()
        if self._next_retention_check_ms is not None:
            deadlines.append(self._next_retention_check_ms)
        if not deadlines:
            return POLL_IDLE_MS
        return max(0, min(deadlines) - now_ms)

    # ================================================================== topics

    def on_partition_count_change(self, topics: Iterable[str], now_ms: int) -> list[Effect]:
        """Topics gained partitions: groups consuming them rebalance so that the new
        partitions get assigned (the classic protocol otherwise waits for the consumer
        leader to notice and rejoin)."""
        changed = set(topics)
        effects: list[Effect] = []
        for group in list(self._groups.values()):
            if (group.state in (S.STABLE, S.COMPLETING_REBALANCE)
                    and group.subscribed_topics is not None and group.subscribed_topics & changed):
                self._prepare_rebalance(group, now_ms, effects)
        return effects

    # ================================================================== group records

    def _group_record(self, group: ClassicGroup,
                      assignment: Mapping[str, bytes] | None = None) -> CoordinatorRecord:
        members: tuple[MemberRecord, ...] = ()
        if group.members:
            assert group.protocol_name is not None
            members = tuple(MemberRecord(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(group.protocol_name),
                assignment[member_id] if assignment is not None else m.assignment)
                for member_id, m in group.members.items())
        value = GroupMetadataValue(group.protocol_type or "", group.generation_id,
                                   group.protocol_name, group.leader_id,
                                   group.current_state_timestamp_ms, members)
        return CoordinatorRecord(GroupMetadataKey(group.group_id), value)

    def _group_from_image(self, group_id: str, image: CoordinatorImage,
                          now_ms: int) -> ClassicGroup:
        """A group as its records describe it (Kafka GroupMetadata.loadGroup)."""
        group = ClassicGroup(group_id, now_ms)
        value = image.groups.get(group_id)
        if value is None:
            return group     # offsets only: a standalone consumer's group
        group.generation_id = value.generation_id
        group.current_state_timestamp_ms = value.current_state_timestamp_ms
        if value.members:
            if value.protocol_name is None:
                raise CoordinatorRecordError(f"group {group_id} has members but no protocol")
            for r in value.members:
                group.add_member(Member(
                    r.member_id, r.group_instance_id, r.client_id, r.client_host,
                    r.rebalance_timeout_ms, r.session_timeout_ms, value.protocol_type,
                    ((value.protocol_name, r.subscription),), assignment=r.assignment,
                    heartbeat_deadline_ms=now_ms + r.session_timeout_ms))
            if value.leader_id in group.members:
                group.leader_id = value.leader_id
            group.protocol_name = value.protocol_name
            # Loading is not a transition: a group written with members was Stable.
            group.state = S.STABLE
            group.subscribed_topics = group.compute_subscribed_topics()
        group.protocol_type = value.protocol_type or None
        return group

    # ================================================================== offsets

    def _committed(self, group_id: str) -> dict[tuple[str, int], OffsetCommitValue] | None:
        group = self._groups.get(group_id)
        if group_id not in self._consumer_groups and (group is None or group.state is S.DEAD):
            return None
        return self._images[self.partition_for(group_id)].offsets.get(group_id)

    def handle_offset_commit(self, token: Hashable, request: "messages.OffsetCommitRequest",
                             version: int, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        group_id = request.group_id

        def reply(errors: Mapping[tuple[str, int], ErrorCode] | ErrorCode) -> list[Effect]:
            effects.append(Completion(token, _commit_response(request, errors)))
            return effects

        error = self._status_error(group_id, allow_empty_id=True)
        if error is not None:
            return reply(error)
        generation_id = request.generation_id_or_member_epoch if version >= 1 else -1
        member_id = request.member_id if version >= 1 else UNKNOWN_MEMBER_ID
        instance_id = request.group_instance_id if version >= 7 else None
        consumer_group = self._consumer_groups.get(group_id)
        group: ClassicGroup | None = self._groups.get(group_id)
        if consumer_group is not None:
            error = self._validate_consumer_group_commit(consumer_group, member_id, instance_id,
                                                         generation_id, version, now_ms)
            if error != E.NONE:
                return reply(error)
        else:
            if group is None:
                if generation_id >= 0:
                    return reply(E.ILLEGAL_GENERATION)   # a generation of a group that is gone
                # A standalone consumer storing offsets: the group will exist, Empty (below).
                group = ClassicGroup(group_id, now_ms)
            error = validate_offset_commit(group, member_id, instance_id, generation_id)
            if error != E.NONE:
                return reply(error)
            member = group.members.get(member_id)
            if member is not None:
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

        retention_time_ms = request.retention_time_ms if 2 <= version <= 4 else -1
        errors: dict[tuple[str, int], ErrorCode] = {}
        records: list[CoordinatorRecord] = []
        committed: list[tuple[str, str, int]] = []
        for topic in request.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                    errors[tp] = E.OFFSET_METADATA_TOO_LARGE
                    continue
                errors[tp] = E.NONE
                records.append(CoordinatorRecord(
                    OffsetCommitKey(group_id, topic.name, p.partition_index),
                    commit_value(p, version, retention_time_ms, now_ms)))
                committed.append((group_id, topic.name, p.partition_index))
        if not records:
            return reply(errors)
        if group is not None:
            self._groups.setdefault(group_id, group)
        self._busy_offsets.update(committed)

        def done(error: ErrorCode, now: int, out: list[Effect]) -> None:
            self._busy_offsets.subtract(committed)
            self._busy_offsets += Counter()
            if error != E.NONE:
                failed = commit_append_error(error)
                for _, topic_name, partition in committed:
                    errors[(topic_name, partition)] = failed
            out.append(Completion(token, _commit_response(request, errors)))

        effects.append(self._append(group_id, records, now_ms, done))
        return effects

    def handle_offset_fetch(self, token: Hashable, request: "messages.OffsetFetchRequest",
                            version: int, now_ms: int) -> list[Effect]:
        def answer(group_id: str, topics: list | None, member_id: str | None = None,
                   member_epoch: int = -1) -> tuple[str, ErrorCode, list]:
            requested = None if topics is None else [(t.name, list(t.partition_indexes))
                                                     for t in topics]
            error = self._status_error(group_id, allow_empty_id=True)
            if error is None and member_id is not None:
                error = self._validate_consumer_group_fetch(group_id, member_id, member_epoch)
            if error is not None:
                return group_id, error, []
            # require_stable (v7+): a partition with a transactional commit awaiting its
            # marker answers UNSTABLE_OFFSET_COMMIT; the consumer retries (KIP-447).
            unstable: set[tuple[str, int]] = set()
            if version >= 7 and request.require_stable:
                unstable = self._images[self.partition_for(group_id)] \
                    .pending_txn_partitions(group_id)
            return group_id, E.NONE, offsets_for(self._committed(group_id), requested, unstable)

        if version >= 8:
            groups = [answer(g.group_id, g.topics,
                             g.member_id if version >= 9 else None,
                             g.member_epoch if version >= 9 else -1) for g in request.groups]
            return [Completion(token, offset_fetch_response(version, groups))]
        topics = request.topics if version >= 2 or request.topics is not None else []
        requested = [(t.name, list(t.partition_indexes)) for t in topics or []]
        return [Completion(token, offset_fetch_response(
            version, [answer(request.group_id, topics)], requested))]

    def handle_offset_delete(self, token: Hashable, request: "messages.OffsetDeleteRequest",
                             version: int, now_ms: int) -> list[Effect]:
        R = messages.OffsetDeleteResponse
        group_id = request.group_id

        def response(error: ErrorCode, errors: Mapping[tuple[str, int], ErrorCode]) -> Completion:
            return Completion(token, R(
                error_code=int(error),
                topics=[] if error != E.NONE else [R.OffsetDeleteResponseTopic(
                    name=t.name, partitions=[R.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=int(errors[(t.name, p.partition_index)]))
                        for p in t.partitions]) for t in request.topics]))

        error = self._status_error(group_id, allow_empty_id=True)
        group = self._groups.get(group_id)
        if error is None and group is None:
            error = E.GROUP_ID_NOT_FOUND
        if error is not None:
            return [response(error, {})]
        assert group is not None
        requested = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        error, errors = offset_delete_eligibility(group, requested)
        if error != E.NONE:
            return [response(error, {})]
        committed = self._committed(group_id) or {}
        deletable = sorted({tp for tp, e in errors.items() if e == E.NONE and tp in committed})
        if not deletable:
            return [response(E.NONE, errors)]
        busy = [(group_id, topic, partition) for topic, partition in deletable]
        self._busy_offsets.update(busy)

        def done(error: ErrorCode, now: int, out: list[Effect]) -> None:
            self._busy_offsets.subtract(busy)
            self._busy_offsets += Counter()
            if error != E.NONE:
                for tp in deletable:
                    errors[tp] = group_append_error(error)
            out.append(response(E.NONE, errors))

        return [self._append(group_id, [
            CoordinatorRecord(OffsetCommitKey(group_id, topic, partition), None)
            for topic, partition in deletable], now_ms, done)]

    def _expire_offsets(self, now_ms: int, effects: list[Effect]) -> None:
        """The retention pass (offsets.py docstring); Empty groups left with no offsets are
        deleted too (Kafka cleanupGroupMetadata)."""
        retention_ms = self.config.offsets_retention_ms
        for group_id in sorted(self._groups):
            group = self._groups[group_id]
            if group.state is S.DEAD:
                continue
            offsets = self._images[self.partition_for(group_id)].offsets.get(group_id, {})
            busy = {(t, p) for (g, t, p) in self._busy_offsets if g == group_id}
            # Kafka keeps offsets with a transaction open on them (and so the group).
            busy |= self._images[self.partition_for(group_id)].pending_txn_partitions(group_id)
            expired = expired_offsets(group, offsets, busy, now_ms, retention_ms)
            drop_group = group.is_unused() and not busy and len(expired) == len(offsets)
            if not expired and not drop_group:
                continue
            records = [CoordinatorRecord(OffsetCommitKey(group_id, t, p), None) for t, p in expired]
            if drop_group:
                self._mark_dead(group, now_ms)
                records.append(CoordinatorRecord(GroupMetadataKey(group_id), None))
                effects.append(self._append(group_id, records, now_ms,
                                            self._on_group_deleted(group)))
                continue
            marks = [(group_id, t, p) for t, p in expired]
            self._busy_offsets.update(marks)

            def done(error: ErrorCode, now: int, out: list[Effect], marks=marks) -> None:
                self._busy_offsets.subtract(marks)
                self._busy_offsets += Counter()

            effects.append(self._append(group_id, records, now_ms, done))

    # ================================================================== admin

    def handle_list_groups(self, token: Hashable, request: "messages.ListGroupsRequest",
                           version: int, now_ms: int) -> list[Effect]:
        R = messages.ListGroupsResponse
        if not self.active:
            return [Completion(token, R(error_code=int(E.COORDINATOR_NOT_AVAILABLE)))]
        loading = any(s is PartitionStatus.LOADING for s in self._partitions.values())
        states = {s.lower() for s in request.states_filter} if version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if version >= 5 else set()
        listed = []
        if not types or GROUP_TYPE_CLASSIC in types:
            for group_id in sorted(self._groups):
                group = self._groups[group_id]
                if group.state is S.DEAD or (states and group.state.value.lower() not in states):
                    continue
                listed.append(R.ListedGroup(group_id=group_id,
                                            protocol_type=group.protocol_type or "",
                                            group_state=group.state.value,
                                            group_type=GROUP_TYPE_CLASSIC))
        if not types or GROUP_TYPE_CONSUMER in types:
            for group_id in sorted(self._consumer_groups):
                cgroup = self._consumer_groups[group_id]
                if states and cgroup.state.lower() not in states:
                    continue
                listed.append(R.ListedGroup(group_id=group_id, protocol_type=CONSUMER_PROTOCOL_TYPE,
                                            group_state=cgroup.state,
                                            group_type=GROUP_TYPE_CONSUMER))
        listed.sort(key=lambda g: g.group_id)
        error = E.COORDINATOR_LOAD_IN_PROGRESS if loading else E.NONE
        return [Completion(token, R(error_code=int(error), groups=listed))]

    def handle_describe_groups(self, token: Hashable, request: "messages.DescribeGroupsRequest",
                               version: int, now_ms: int) -> list[Effect]:
        R = messages.DescribeGroupsResponse
        described = []
        for group_id in request.groups:
            error = self._status_error(group_id, allow_empty_id=True)
            if error is not None:
                described.append(R.DescribedGroup(error_code=int(error), group_id=group_id))
                continue
            consumer_group = self._consumer_groups.get(group_id)
            if consumer_group is not None:
                described.append(self._describe_as_classic(consumer_group, version,
                                                           request.include_authorized_operations))
                continue
            group = self._groups.get(group_id)
            if group is None or group.state is S.DEAD:
                described.append(R.DescribedGroup(group_id=group_id, group_state=S.DEAD.value))
                continue
            stable = group.state is S.STABLE
            members = [R.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                # Metadata and assignment are only meaningful once the group is Stable.
                member_metadata=(m.metadata(group.protocol_name)
                                 if stable and group.protocol_name is not None else b""),
                member_assignment=m.assignment if stable else b"")
                for m in group.members.values()]
            described.append(R.DescribedGroup(
                group_id=group_id, group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "", members=members,
                authorized_operations=authorized_operations(
                    AclResourceType.GROUP, version >= 3 and request.include_authorized_operations)))
        return [Completion(token, R(groups=described))]

    def handle_delete_groups(self, token: Hashable, request: "messages.DeleteGroupsRequest",
                             version: int, now_ms: int) -> list[Effect]:
        R = messages.DeleteGroupsResponse
        effects: list[Effect] = []
        group_ids = list(dict.fromkeys(request.groups_names))   # each group once, in order
        results: dict[str, ErrorCode | None] = {}

        def maybe_reply(out: list[Effect]) -> None:
            done = {g: e for g, e in results.items() if e is not None}
            if len(done) == len(results):
                out.append(Completion(token, R(results=[
                    R.DeletableGroupResult(group_id=g, error_code=int(done[g]))
                    for g in group_ids])))

        appends: list[Append] = []
        for group_id in group_ids:
            error = self._status_error(group_id, allow_empty_id=True)
            group = self._groups.get(group_id)
            consumer_group = self._consumer_groups.get(group_id)
            if error is not None:
                results[group_id] = error
            elif consumer_group is not None:
                if consumer_group.members:
                    results[group_id] = E.NON_EMPTY_GROUP
                    continue
                results[group_id] = None

                def deleted(error: ErrorCode, now: int, out: list[Effect],
                            group_id=group_id) -> None:
                    if error == E.NONE:
                        self._consumer_groups.pop(group_id, None)
                    results[group_id] = E.NONE if error == E.NONE else group_append_error(error)
                    maybe_reply(out)
                appends += self._write(consumer_group, self._delete_consumer_group_records(
                    consumer_group), 0, now_ms, deleted)
            elif group is None or group.state is S.DEAD:
                results[group_id] = E.GROUP_ID_NOT_FOUND
            elif group.state is not S.EMPTY:
                results[group_id] = E.NON_EMPTY_GROUP
            else:
                results[group_id] = None
                offsets = self._images[self.partition_for(group_id)].offsets.get(group_id, {})
                records = [CoordinatorRecord(OffsetCommitKey(group_id, t, p), None)
                           for t, p in sorted(offsets)]
                records.append(CoordinatorRecord(GroupMetadataKey(group_id), None))
                self._mark_dead(group, now_ms)

                def done(error: ErrorCode, now: int, out: list[Effect], group_id=group_id,
                         on_deleted=self._on_group_deleted(group)) -> None:
                    on_deleted(error, now, out)
                    results[group_id] = E.NONE if error == E.NONE else group_append_error(error)
                    maybe_reply(out)

                appends.append(self._append(group_id, records, now_ms, done))
        effects.extend(appends)
        maybe_reply(effects)
        return effects

    def _on_group_deleted(self, group: ClassicGroup) -> OnDone:
        """Continuation of a group's tombstones: forget it, or bring it back from the
        records if they could not be written."""
        def done(error: ErrorCode, now_ms: int, out: list[Effect]) -> None:
            if self._groups.get(group.group_id) is not group:
                return   # unloaded meanwhile
            partition = self.partition_for(group.group_id)
            del self._groups[group.group_id]
            if error != E.NONE:
                # The log still holds the group: it is what the log says, as a reload
                # would make it.
                image = self._images[partition]
                self._groups[group.group_id] = self._group_from_image(group.group_id, image,
                                                                      now_ms)
        return done


def _ignore_append_result(error: ErrorCode, now_ms: int, effects: list) -> None:
    # The Empty snapshot after a rebalance: if it is lost, a failover brings back the
    # previous generation, whose members then time out; Kafka accepts the same.
    return
