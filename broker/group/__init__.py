"""The group coordinator: consumer groups and committed offsets.

Lives here (pure, sans-I/O): ``coordinator`` (``GroupCoordinator``: JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit/Fetch/Delete, List/Describe/DeleteGroups, timers, and
the ``Completion``/``Append`` effects), ``state`` (``ClassicGroup``, ``GroupState`` and its
transition table), ``offsets`` (commit validation, fetch shapes, retention rules) and
``records`` (the ``__consumer_offsets`` record formats, ``partition_for_group``, and
``CoordinatorLoader`` which rebuilds the state from a partition's batches).

Not here: FindCoordinator and the asyncio shell that appends to ``__consumer_offsets`` and
parks requests (``driver.py``, the broker's), nor the KIP-848 consumer group protocol or
transactional offset commits.
"""
from broker.group.coordinator import (
    Append, Completion, Effect, GroupConfig, GroupCoordinator, PartitionStatus,
    group_append_error,
)
from broker.group.records import (
    CONSUMER_OFFSETS_TOPIC, CoordinatorImage, CoordinatorLoader, CoordinatorRecord,
    CoordinatorRecordError, GroupMetadataKey, GroupMetadataValue, MemberRecord,
    OffsetCommitKey, OffsetCommitValue, decode_record, encode_batch, java_string_hash,
    partition_for_group,
)
from broker.group.state import ClassicGroup, GroupState, Member, VALID_PREVIOUS_STATES

__all__ = [
    "Append", "CONSUMER_OFFSETS_TOPIC", "ClassicGroup", "Completion", "CoordinatorImage",
    "CoordinatorLoader", "CoordinatorRecord", "CoordinatorRecordError", "Effect",
    "GroupConfig", "GroupCoordinator", "GroupMetadataKey", "GroupMetadataValue",
    "GroupState", "Member", "MemberRecord", "OffsetCommitKey", "OffsetCommitValue",
    "PartitionStatus", "VALID_PREVIOUS_STATES", "decode_record", "encode_batch",
    "group_append_error", "java_string_hash", "partition_for_group",
]
