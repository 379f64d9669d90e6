"""Committed offsets: who may commit, what a commit writes, what a fetch sees, what expires.

Theory of operation
-------------------
Committed offsets are durable state: they exist only as ``OffsetCommit`` records in
``__consumer_offsets`` and, in memory, as the ``CoordinatorImage`` those records replay to
(``records.py``). A commit therefore goes: validate (here) -> records to append -> the
shell appends them with acks=all -> on success the records are replayed into the image
and the client hears NONE; on failure nothing changes and the client hears a retriable
error (``commit_append_error``). Fetches read the image, so a client never sees an offset
that could be lost by a coordinator failover.

Who may commit (Kafka ``GroupCoordinator.handleCommitOffsets``; checked in this order):

=============================================  ==========================================
group is Dead                                   COORDINATOR_NOT_AVAILABLE (retry, rejoin)
group.instance.id owned by another member id    FENCED_INSTANCE_ID
generation < 0 and the group is Empty           accepted: a standalone ("simple") consumer
member id unknown to the group                  UNKNOWN_MEMBER_ID
generation differs                              ILLEGAL_GENERATION
group is CompletingRebalance                    REBALANCE_IN_PROGRESS (commit after sync)
group is Stable or PreparingRebalance           accepted (a rebalance in progress is
                                                signalled by the next heartbeat instead)
=============================================  ==========================================

A commit with generation >= 0 for a group that does not exist is ILLEGAL_GENERATION; one
with generation < 0 creates the group, Empty (Kafka does the same).

Retention (KIP-211, Kafka ``GroupMetadata.removeExpiredOffsets``), checked every
``offsets.retention.check.interval.ms``:

- a group that used the group protocol (it has a protocol type) and is now Empty: all its
  offsets expire ``offsets.retention.minutes`` after it became Empty;
- a Stable ``consumer`` group whose subscription is known: offsets of topics nobody
  subscribes to expire that long after their commit;
- a standalone group (no protocol type): each offset expires that long after its commit;
- otherwise nothing expires. An offset written with an explicit expire timestamp (value
  version 1, OffsetCommit v2-v4 with a retention time) expires at that time instead.
  Offsets with a commit or a deletion in flight never expire in the same pass.
"""
from __future__ import annotations

from typing import AbstractSet, Any, Iterable, Mapping

from clients.protocol import messages
from clients.protocol.errors import ERROR_INFO, ErrorCode

from broker.group.records import NO_LEADER_EPOCH, NO_TIMESTAMP, OffsetCommitValue
from broker.group.state import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState

__all__ = [
    "INVALID_OFFSET", "commit_append_error", "commit_value", "expired_offsets",
    "offset_delete_eligibility", "offset_fetch_response", "offsets_for", "txn_commit_value",
    "validate_offset_commit", "validate_txn_offset_commit",
]

INVALID_OFFSET = -1
NO_METADATA = ""
TopicPartitionKey = tuple[str, int]


def validate_offset_commit(group: ClassicGroup, member_id: str, group_instance_id: str | None,
                           generation_id: int) -> ErrorCode:
    """NONE if this member may commit now; the table in the module docstring."""
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if group.is_static_member_fenced(group_instance_id, member_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if generation_id < 0 and group.state is GroupState.EMPTY:
        return ErrorCode.NONE
    if not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    if group.state is GroupState.COMPLETING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    assert group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE), group
    return ErrorCode.NONE


def validate_txn_offset_commit(group: ClassicGroup, member_id: str,
                               group_instance_id: str | None, generation_id: int) -> ErrorCode:
    """NONE if a transactional producer may commit for this member now (Kafka's
    ClassicGroup.validateOffsetCommit with isTransactional). Unlike OffsetCommit, a
    request without member information (TxnOffsetCommit v0-v2) is accepted whatever the
    group's state, and a rebalance in progress does not refuse it."""
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and group.state is GroupState.EMPTY:
        return ErrorCode.NONE
    if generation_id < 0 and member_id == "" and group_instance_id is None:
        return ErrorCode.NONE
    if group.is_static_member_fenced(group_instance_id, member_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def txn_commit_value(partition: "messages.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition",
                     version: int, now_ms: int) -> OffsetCommitValue:
    """The record value a TxnOffsetCommit partition becomes (leader epoch from v2)."""
    leader_epoch = partition.committed_leader_epoch if version >= 2 else NO_LEADER_EPOCH
    return OffsetCommitValue(
        offset=partition.committed_offset,
        leader_epoch=leader_epoch if leader_epoch >= 0 else NO_LEADER_EPOCH,
        metadata=partition.committed_metadata if partition.committed_metadata is not None
        else NO_METADATA,
        commit_timestamp_ms=now_ms)


def commit_value(partition: "messages.OffsetCommitRequest.OffsetCommitRequestPartition",
                 version: int, retention_time_ms: int, now_ms: int) -> OffsetCommitValue:
    """The record value a committed partition becomes (Kafka KafkaApis, OffsetCommit)."""
    # v1 carries a per-partition commit timestamp; -1 (and every other version) means now.
    commit_timestamp_ms = partition.commit_timestamp if version == 1 else NO_TIMESTAMP
    if commit_timestamp_ms == NO_TIMESTAMP:
        commit_timestamp_ms = now_ms
    # v2-v4 may carry an explicit retention time, which Kafka turns into an expire time.
    expire_timestamp_ms = NO_TIMESTAMP
    if 2 <= version <= 4 and retention_time_ms != -1:
        expire_timestamp_ms = now_ms + retention_time_ms
    leader_epoch = partition.committed_leader_epoch if version >= 6 else NO_LEADER_EPOCH
    return OffsetCommitValue(
        offset=partition.committed_offset,
        leader_epoch=leader_epoch if leader_epoch >= 0 else NO_LEADER_EPOCH,
        metadata=partition.committed_metadata if partition.committed_metadata is not None
        else NO_METADATA,
        commit_timestamp_ms=commit_timestamp_ms,
        expire_timestamp_ms=expire_timestamp_ms,
    )


def commit_append_error(append_error: int) -> ErrorCode:
    """What a client hears when its commit's append failed (Kafka storeOffsets)."""
    e = ErrorCode(append_error) if append_error in ERROR_INFO \
        else ErrorCode.UNKNOWN_SERVER_ERROR
    if e in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
             ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if e in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if e in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
             ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return e


def expired_offsets(group: ClassicGroup, offsets: Mapping[TopicPartitionKey, OffsetCommitValue],
                    busy: set[TopicPartitionKey], now_ms: int,
                    retention_ms: int) -> list[TopicPartitionKey]:
    """Which of the group's committed offsets have expired (module docstring, Retention)."""
    subscribed: frozenset[str] = frozenset()
    if group.protocol_type is not None and group.state is GroupState.EMPTY:
        base_is_state_time = group.current_state_timestamp_ms != NO_TIMESTAMP
    elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
          and group.state is GroupState.STABLE):
        base_is_state_time = False
        subscribed = group.subscribed_topics
    elif group.protocol_type is None:
        base_is_state_time = False
    else:
        return []
    expired = []
    for tp, value in offsets.items():
        if tp in busy or tp[0] in subscribed:
            continue
        if value.expire_timestamp_ms != NO_TIMESTAMP:
            if now_ms >= value.expire_timestamp_ms:
                expired.append(tp)
            continue
        base_ms = group.current_state_timestamp_ms if base_is_state_time \
            else value.commit_timestamp_ms
        if now_ms - base_ms >= retention_ms:
            expired.append(tp)
    return sorted(expired)


def offset_delete_eligibility(group: ClassicGroup, partitions: Iterable[TopicPartitionKey]
                              ) -> tuple[ErrorCode, dict[TopicPartitionKey, ErrorCode]]:
    """OffsetDelete: (group error, per-partition error); NONE partitions may be deleted.

    An Empty group may drop any offset; a live ``consumer`` group only offsets of topics
    none of its members subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise); any other live
    group none (NON_EMPTY_GROUP). Kafka GroupCoordinator.handleDeleteOffsets."""
    if group.state is GroupState.DEAD:
        return ErrorCode.GROUP_ID_NOT_FOUND, {}
    if group.state is GroupState.EMPTY:
        return ErrorCode.NONE, {tp: ErrorCode.NONE for tp in partitions}
    if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
        subscribed = group.subscribed_topics or frozenset()
        return ErrorCode.NONE, {
            tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE
            for tp in partitions}
    return ErrorCode.NON_EMPTY_GROUP, {}


# ------------------------------------------------------------------ OffsetFetch

FetchedOffset = OffsetCommitValue | ErrorCode | None


def offsets_for(offsets: Mapping[TopicPartitionKey, OffsetCommitValue] | None,
                requested: list[tuple[str, list[int]]] | None,
                unstable: AbstractSet[TopicPartitionKey] = frozenset()
                ) -> list[tuple[str, list[tuple[int, FetchedOffset]]]]:
    """The (topic, [(partition, committed or None)]) a fetch answers, in request order;
    ``requested`` None means every committed partition of the group, sorted. A partition
    in ``unstable`` answers UNSTABLE_OFFSET_COMMIT instead of its offset."""
    offsets = offsets or {}

    def fetched(tp: TopicPartitionKey) -> FetchedOffset:
        return ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable else offsets.get(tp)
    if requested is None:
        by_topic: dict[str, list[tuple[int, FetchedOffset]]] = {}
        for (topic, partition) in sorted(offsets):
            by_topic.setdefault(topic, []).append((partition, fetched((topic, partition))))
        return list(by_topic.items())
    return [(topic, [(p, fetched((topic, p))) for p in partitions])
            for topic, partitions in requested]


def offset_fetch_response(version: int, groups: list[tuple[str, ErrorCode, list]],
                          requested_v0_1: list[tuple[str, list[int]]] | None = None
                          ) -> "messages.OffsetFetchResponse":
    """Shape an OffsetFetch answer for ``version``.

    ``groups``: (group id, error, offsets_for(...) result) per group; exactly one for
    v0-v7. v8+ uses the multi-group layout. Below v2 there is no top-level error: Kafka
    puts the group error in every requested partition instead."""
    R = messages.OffsetFetchResponse
    if version >= 8:
        out = []
        for group_id, error, topics in groups:
            out.append(R.OffsetFetchResponseGroup(
                group_id=group_id, error_code=int(error),
                topics=[] if error != ErrorCode.NONE else [
                    R.OffsetFetchResponseTopics(name=topic, partitions=[
                        _fetch_partition(R.OffsetFetchResponsePartitions, p, v)
                        for p, v in parts])
                    for topic, parts in topics]))
        return R(groups=out)
    assert len(groups) == 1
    _, error, topics = groups[0]
    if error != ErrorCode.NONE:
        if version < 2:
            return R(topics=[R.OffsetFetchResponseTopic(name=topic, partitions=[
                R.OffsetFetchResponsePartition(partition_index=p, committed_offset=INVALID_OFFSET,
                                               metadata=NO_METADATA, error_code=int(error))
                for p in parts]) for topic, parts in (requested_v0_1 or [])])
        return R(error_code=int(error), topics=[])
    return R(topics=[R.OffsetFetchResponseTopic(name=topic, partitions=[
        _fetch_partition(R.OffsetFetchResponsePartition, p, v) for p, v in parts])
        for topic, parts in topics])


def _fetch_partition(cls: Any, partition: int, value: FetchedOffset) -> Any:
    if value is None or isinstance(value, ErrorCode):
        return cls(partition_index=partition, committed_offset=INVALID_OFFSET,
                   committed_leader_epoch=NO_LEADER_EPOCH, metadata=NO_METADATA,
                   error_code=int(value or 0))
    return cls(partition_index=partition, committed_offset=value.offset,
               committed_leader_epoch=value.leader_epoch, metadata=value.metadata,
               error_code=0)
