"""The group coordinator's KIP-848 half: ConsumerGroupHeartbeat, ConsumerGroupDescribe, and
classic-protocol members of consumer groups (online migration), sans I/O.

``GroupCoordinator`` (coordinator.py) inherits these handlers; they share its partitions,
images and ordered appends, and follow the same contract (a ``Completion`` per request,
``Append`` effects, ``poll`` for timers). The rules are Kafka's GroupMetadataManager
(consumerGroupHeartbeat, classicGroupJoinToConsumerGroup, ...SyncToConsumerGroup,
...HeartbeatToConsumerGroup, ...LeaveToConsumerGroup, convertToConsumerGroup); the group
itself and the reconciliation are in consumer_group.py.

A command computes its records without changing the group, then the group replays them at
once (so the next request sees them, as Kafka's timeline does) and they are appended; the
answer waits for the append. If an append fails, the group is rebuilt from the acknowledged
records plus the appends still in flight, which is what the log will hold.

Online migration (``group.consumer.migration.policy``, bidirectional by default as in
Kafka 4): a ConsumerGroupHeartbeat joining a classic group whose members all use the
``consumer`` protocol type converts it (upgrade); its classic members then keep using
JoinGroup/SyncGroup/Heartbeat against the consumer group. When the last member speaking
the consumer protocol leaves (or is fenced) and classic members remain, the group turns
back into a classic group that rebalances at once (downgrade). Not implemented: KIP-848's
client-side assignors (ConsumerGroupHeartbeat v0-1 carry none) and a static member's
replacement triggering the downgrade.
"""
from __future__ import annotations

import base64
import dataclasses
import random
import re
import uuid
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterable

from clients._core.assignors import (
    Assignment, decode_assignment, decode_subscription, encode_assignment,
)
from clients.protocol import messages
from clients.protocol.acls import AclResourceType, authorized_operations
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

from clients._core.assignors import Subscription, encode_subscription
from broker.group.consumer_group import (
    ASSIGNORS, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ClassicProtocolMember,
    ConsumerGroup, ConsumerGroupMember, MemberState, Partitions, TopicsView,
    current_assignment_record, group_epoch_record, group_tombstones, member_metadata_record,
    member_tombstones,
    next_assignment, partition_metadata_record, target_assignment, target_epoch_record,
    target_member_record,
)
from broker.group.effects import (
    Append, Completion, OnDone, group_append_error, join_response,
)
from broker.group.records import (
    ConsumerGroupKey, CoordinatorRecord, GroupMetadataKey, OffsetCommitKey,
)

if TYPE_CHECKING:
    from broker.group.coordinator import GroupConfig
    from broker.group.records import CoordinatorImage
    from broker.group.state import ClassicGroup

E = ErrorCode
CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE_CONSUMER = "consumer"


class CommandError(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


def _partitions(topic_partitions: Iterable[Any] | None) -> dict[uuid.UUID, frozenset[int]] | None:
    if topic_partitions is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in topic_partitions:
        out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return {t: ps for t, ps in out.items() if ps}


def _subset(owned: Partitions | None, assigned: Partitions) -> bool:
    return owned is not None and all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _same_metadata(a: ConsumerGroupMember | None, b: ConsumerGroupMember) -> bool:
    if a is None:
        return False
    return member_metadata_record("", a).value == member_metadata_record("", b).value


def _same_assignment(a: ConsumerGroupMember | None, b: ConsumerGroupMember) -> bool:
    return a is not None and (a.member_epoch, a.previous_member_epoch, a.state, a.assigned,
                              a.pending_revocation) == (
        b.member_epoch, b.previous_member_epoch, b.state, b.assigned, b.pending_revocation)


class ConsumerGroupProtocol:
    """Mixin of ``GroupCoordinator``: the KIP-848 handlers (see the module docstring)."""

    # Provided by GroupCoordinator.
    config: "GroupConfig"
    _rng: random.Random
    _groups: dict[str, "ClassicGroup"]
    _images: dict[int, "CoordinatorImage"]
    _consumer_groups: dict[str, ConsumerGroup]
    _topics: TopicsView
    _abandoned_effects: list
    _status_error: Callable[..., ErrorCode | None]
    _append: Callable[..., "Append"]
    _pending_records: Callable[[str], list[CoordinatorRecord]]
    partition_for: Callable[[str], int]

    # ================================================================ group lifecycle

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self._consumer_groups.get(group_id)

    def _consumer_group_from_records(self, group_id: str, records: Iterable[CoordinatorRecord],
                                     now_ms: int) -> ConsumerGroup:
        group = ConsumerGroup(group_id)
        for record in records:
            group.replay(record)
        for member in group.members.values():
            group.session_deadline[member.member_id] = now_ms + self._session_timeout(member)
        return group

    def _session_timeout(self, member: ConsumerGroupMember) -> int:
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self.config.consumer_group_session_timeout_ms

    def _write(self, group: ConsumerGroup, records: list[CoordinatorRecord], replayed: int,
               now_ms: int, on_done: "OnDone") -> list["Append"]:
        """Replay ``records`` (but the first ``replayed``, already in the group) into the
        live group and append them all; ``on_done`` runs when the append ends, after the
        group is rebuilt from what the log holds if it failed. No records: nothing."""
        if not records:
            return []
        for record in records[replayed:]:
            self._replay_consumer_record(group, record)

        def done(error: ErrorCode, now: int, out: list) -> None:
            if error != E.NONE and self._consumer_groups.get(group.group_id) is group:
                self._rebuild_consumer_group(group.group_id, now)
            on_done(error, now, out)
        return [self._append(group.group_id, records, now_ms, done)]

    def _replay_consumer_record(self, group: ConsumerGroup, record: CoordinatorRecord) -> None:
        # Offsets and a converted classic group's tombstone live in the image only.
        if isinstance(record.key, ConsumerGroupKey):
            group.replay(record)

    def _rebuild_consumer_group(self, group_id: str, now_ms: int) -> None:
        image = self._images[self.partition_for(group_id)]
        records = image.consumer_group_records(group_id) + [
            r for r in self._pending_records(group_id) if isinstance(r.key, ConsumerGroupKey)]
        old = self._consumer_groups.pop(group_id)
        if not records:
            return
        group = self._consumer_group_from_records(group_id, records, now_ms)
        group.session_deadline.update({m: d for m, d in old.session_deadline.items()
                                       if m in group.members})
        self._consumer_groups[group_id] = group

    def _new_member_id(self) -> str:
        # Kafka's Uuid.randomUuid().toString(): url-safe base64 of 16 bytes, unpadded.
        raw = self._rng.getrandbits(128).to_bytes(16, "big")
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    # ================================================================ the core step

    def _update_member(self, group: ConsumerGroup, old: ConsumerGroupMember | None,
                       updated: ConsumerGroupMember, owned: Partitions | None,
                       records: list[CoordinatorRecord]) -> ConsumerGroupMember:
        """Kafka's three steps: update the member (bumping the group epoch if its
        subscription or the subscribed topics changed), compute a new target assignment if
        the group epoch is ahead of it, reconcile the member. Returns the reconciled
        member; ``records`` gains what changed."""
        gid = group.group_id
        if not _same_metadata(old, updated):
            records.append(member_metadata_record(gid, updated))
        bump = old is None or not old.same_subscription(updated)
        members = dict(group.members)
        members[updated.member_id] = updated
        topics = self._topics
        subscribed: set[str] = set()
        for m in members.values():
            subscribed |= m.subscribed_topics(topics)
        metadata = {t: topics[t] for t in sorted(subscribed) if t in topics}
        if metadata != group.subscription_metadata:
            records.append(partition_metadata_record(gid, metadata))
            bump = True
        epoch = group.group_epoch + (1 if bump else 0)
        if bump:
            records.append(group_epoch_record(gid, epoch))
        if epoch > group.assignment_epoch:
            assignor = _preferred_assignor(members.values(), self.config.consumer_group_assignors[0])
            new_target = target_assignment(members, group.target, metadata, assignor, epoch)
            for member_id, parts in sorted(new_target.items()):
                if group.target.get(member_id) != parts:
                    records.append(target_member_record(gid, member_id, parts))
            records.append(target_epoch_record(gid, epoch))
            target_epoch, target = epoch, new_target.get(updated.member_id, {})
        else:
            target_epoch, target = group.assignment_epoch, group.target.get(updated.member_id, {})
        epochs = group.partition_epochs(excluding=updated.member_id)
        reconciled = next_assignment(updated, target_epoch, target, owned,
                                     lambda t, p: epochs.get((t, p), -1))
        if not _same_assignment(old, reconciled):
            records.append(current_assignment_record(gid, reconciled))
        return reconciled

    def _track_member(self, group: ConsumerGroup, before: ConsumerGroupMember | None,
                      member: ConsumerGroupMember, now_ms: int) -> None:
        group.session_deadline[member.member_id] = now_ms + self._session_timeout(member)
        revoking = member.state is MemberState.UNREVOKED_PARTITIONS
        was_revoking = before is not None and before.state is MemberState.UNREVOKED_PARTITIONS
        if revoking and not was_revoking:
            # The member must give the partitions up within its rebalance timeout.
            group.rebalance_deadline[member.member_id] = now_ms + max(member.rebalance_timeout_ms, 0)
        elif not revoking and member.classic is None:
            group.rebalance_deadline.pop(member.member_id, None)

    def _fence_records(self, group: ConsumerGroup, member_id: str) -> list[CoordinatorRecord]:
        return member_tombstones(group.group_id, member_id) + [
            group_epoch_record(group.group_id, group.group_epoch + 1)]

    # ================================================================ ConsumerGroupHeartbeat

    def handle_consumer_group_heartbeat(self, token: Hashable,
                                        request: "messages.ConsumerGroupHeartbeatRequest",
                                        version: int, client_id: str, client_host: str,
                                        now_ms: int) -> list:
        R = messages.ConsumerGroupHeartbeatResponse
        try:
            self._check_heartbeat(request, version)
            error = self._status_error(request.group_id)
            if error is not None:
                raise CommandError(error)
            effects = self._consumer_group_heartbeat(token, request, client_id, client_host, now_ms)
        except CommandError as e:
            effects = [Completion(token, R(error_code=int(e.error), error_message=e.message))]
        abandoned, self._abandoned_effects = self._abandoned_effects, []
        return abandoned + effects

    def _check_heartbeat(self, request: Any, version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        def invalid(message: str) -> CommandError:
            return CommandError(E.INVALID_REQUEST, message)
        for value, what in ((request.group_id, "GroupId"), (request.instance_id, "InstanceId"),
                            (request.rack_id, "RackId")):
            if value is not None and not value.strip():
                raise invalid(f"{what} can't be empty.")
        epoch = request.member_epoch
        regex = request.subscribed_topic_regex if version >= 1 else None
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id.strip():
                raise invalid("MemberId can't be empty.")
        elif epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if not request.subscribed_topic_names and not regex:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id.strip():
                raise invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in ASSIGNORS:
            raise CommandError(E.UNSUPPORTED_ASSIGNOR,
                               f"ServerAssignor {request.server_assignor} is not supported. "
                               f"Supported assignors: {', '.join(sorted(ASSIGNORS))}.")
        if regex:
            try:
                re.compile(regex)
            except re.error as e:
                raise CommandError(E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex: {e}")

    def _get_or_create_consumer_group(self, group_id: str, create: bool,
                                      records: list[CoordinatorRecord], now_ms: int) -> ConsumerGroup:
        group = self._consumer_groups.get(group_id)
        if group is not None:
            return group
        classic = self._groups.get(group_id)
        if not create:
            raise CommandError(E.UNKNOWN_MEMBER_ID, f"Group {group_id} has no such member.")
        if classic is not None and classic.members:
            if not self._can_upgrade(classic):
                raise CommandError(E.GROUP_ID_NOT_FOUND,
                                   f"Group {group_id} is a classic group that cannot be upgraded.")
            return self._convert_to_consumer_group(classic, records, now_ms)
        if classic is not None:
            # An empty classic group (offsets only, or an Empty snapshot) simply changes type.
            if group_id in self._images[self.partition_for(group_id)].groups:
                records.append(CoordinatorRecord(GroupMetadataKey(group_id), None))
            del self._groups[group_id]
        group = ConsumerGroup(group_id)
        self._consumer_groups[group_id] = group
        return group

    def _can_upgrade(self, classic: "ClassicGroup") -> bool:
        return (self.config.consumer_group_migration_policy in ("upgrade", "bidirectional")
                and classic.protocol_type == CONSUMER_PROTOCOL_TYPE
                and len(classic.members) <= self.config.consumer_group_max_size)

    def _convert_to_consumer_group(self, classic: "ClassicGroup", records: list[CoordinatorRecord],
                                   now_ms: int) -> ConsumerGroup:
        """Kafka's ConsumerGroup.fromClassicGroup: the classic generation becomes the group
        epoch, every member's assignment its current and target assignment."""
        gid = classic.group_id
        epoch = classic.generation_id
        converted: list[ConsumerGroupMember] = []
        for m in classic.members.values():   # classic Members, becoming ConsumerGroupMembers
            protocol = classic.protocol_name or m.protocols[0][0]
            try:
                subscription = decode_subscription(m.metadata(protocol))
                assignment = decode_assignment(m.assignment) if m.assignment else Assignment(())
            except Exception:
                raise CommandError(E.GROUP_ID_NOT_FOUND,
                                   f"Cannot upgrade classic group {gid}: malformed consumer protocol.")
            assigned: dict[uuid.UUID, set[int]] = {}
            for tp in assignment.partitions:
                if tp.topic in self._topics:
                    assigned.setdefault(self._topics[tp.topic][0], set()).add(tp.partition)
            converted.append(ConsumerGroupMember(
                m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=tuple(subscription.topics),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic=ClassicProtocolMember(m.session_timeout_ms, m.protocols),
                member_epoch=epoch, previous_member_epoch=epoch, state=MemberState.STABLE,
                assigned={t: frozenset(ps) for t, ps in assigned.items()}))
        # Members waiting in JoinGroup/SyncGroup are told to rejoin, now as consumer
        # group members (Kafka completes their futures with REBALANCE_IN_PROGRESS).
        self._abandon_classic_group(classic, now_ms)
        records.append(CoordinatorRecord(GroupMetadataKey(gid), None))
        records.append(group_epoch_record(gid, epoch))
        subscribed = {t for c in converted for t in c.subscribed_topic_names if t in self._topics}
        records.append(partition_metadata_record(gid, {t: self._topics[t] for t in sorted(subscribed)}))
        for c in converted:
            records.append(member_metadata_record(gid, c))
            records.append(target_member_record(gid, c.member_id, c.assigned))
            records.append(current_assignment_record(gid, c))
        records.append(target_epoch_record(gid, epoch))
        group = ConsumerGroup(gid)
        for record in records:       # the caller appends them; they are in the group now
            self._replay_consumer_record(group, record)
        for c in converted:
            group.session_deadline[c.member_id] = now_ms + self._session_timeout(c)
        self._consumer_groups[gid] = group
        return group

    def _consumer_group_heartbeat(self, token: Hashable, request: Any, client_id: str,
                                  client_host: str, now_ms: int) -> list:
        R = messages.ConsumerGroupHeartbeatResponse
        gid = request.group_id
        epoch = request.member_epoch
        records: list[CoordinatorRecord] = []
        # Records of a conversion or of a static member's replacement are in the group at
        # once (the steps after them read it); the rest are replayed when written.
        group = self._get_or_create_consumer_group(gid, epoch == 0, records, now_ms)
        member_id = request.member_id or self._new_member_id()
        owned = _partitions(request.topic_partitions)

        if epoch == LEAVE_GROUP_MEMBER_EPOCH or epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            member = self._member_for(group, member_id, request.instance_id)
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # KIP-345 for KIP-848: the static member keeps its assignment while it
                # restarts; its session timeout still removes it if it does not return.
                left = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                           previous_member_epoch=member.member_epoch)
                records.append(current_assignment_record(gid, left))
            else:
                if self._downgrades(group, member_id):
                    return self._convert_to_classic_group(group, member_id, now_ms) + [
                        Completion(token, R(member_id=member_id, member_epoch=epoch))]
                records += self._fence_records(group, member_id)
            response = R(member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=0)
            return self._answer_after(group, records, 0, token, response, now_ms)

        try:
            old = self._existing_member(group, member_id, epoch, request.instance_id, owned,
                                        records)
            if old is None and len(group.members) >= self.config.consumer_group_max_size:
                raise CommandError(E.GROUP_MAX_SIZE_REACHED,
                                   f"The consumer group has reached its maximum capacity of "
                                   f"{self.config.consumer_group_max_size} members.")
        except CommandError as e:
            if not records:
                raise
            # A conversion already in the group is written even though this member fails.
            return self._answer_after(group, records, len(records), token, R(
                error_code=int(e.error), error_message=e.message), now_ms)
        replayed = len(records)
        base = old or ConsumerGroupMember(member_id)
        updated = dataclasses.replace(
            base, member_id=member_id,
            instance_id=request.instance_id if request.instance_id is not None else base.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else base.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else base.rebalance_timeout_ms),
            server_assignor=(request.server_assignor if request.server_assignor is not None
                             else base.server_assignor),
            subscribed_topic_names=(tuple(request.subscribed_topic_names)
                                    if request.subscribed_topic_names is not None
                                    else base.subscribed_topic_names),
            subscribed_topic_regex=(request.subscribed_topic_regex
                                    if getattr(request, "subscribed_topic_regex", None) is not None
                                    else base.subscribed_topic_regex),
            client_id=client_id, client_host=client_host, classic=None)
        previous = group.members.get(member_id)
        reconciled = self._update_member(group, previous, updated, owned, records)
        self._track_member(group, previous, reconciled, now_ms)
        full = epoch == 0 or (request.rebalance_timeout_ms != -1
                              and request.subscribed_topic_names is not None and owned is not None)
        assignment = None
        if full or previous is None or previous.assigned != reconciled.assigned:
            assignment = R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(reconciled.assigned.items())])
        response = R(member_id=member_id, member_epoch=reconciled.member_epoch,
                     heartbeat_interval_ms=self.config.consumer_group_heartbeat_interval_ms,
                     assignment=assignment)
        return self._answer_after(group, records, replayed, token, response, now_ms)

    def _answer_after(self, group: ConsumerGroup, records: list[CoordinatorRecord], replayed: int,
                      token: Hashable, response: Any, now_ms: int) -> list:
        """Write ``records`` (the first ``replayed`` already in the group), then answer."""
        effects: list = []

        def done(error: ErrorCode, now: int, out: list) -> None:
            if error == E.NONE:
                out.append(Completion(token, response))
            else:
                out.append(Completion(token, type(response)(
                    error_code=int(group_append_error(error)))))
        appends = self._write(group, records, replayed, now_ms, done)
        if not appends:
            done(E.NONE, now_ms, effects)
        effects.extend(appends)
        return effects

    def _member_for(self, group: ConsumerGroup, member_id: str,
                    instance_id: str | None) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            raise CommandError(E.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} is not a member of group {group.group_id}.")
        if instance_id is not None and member.instance_id not in (None, instance_id):
            raise CommandError(E.FENCED_INSTANCE_ID)
        return member

    def _existing_member(self, group: ConsumerGroup, member_id: str, epoch: int,
                         instance_id: str | None, owned: Partitions | None,
                         records: list[CoordinatorRecord]) -> ConsumerGroupMember | None:
        """The member the request speaks for (None: a new one), epochs checked
        (Kafka's throwIfMemberEpochIsInvalid and the static member rules)."""
        if epoch == 0:
            static_id = group.static_member_id(instance_id)
            if static_id is not None and static_id != member_id:
                previous = group.members[static_id]
                if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise CommandError(E.UNRELEASED_INSTANCE_ID,
                                       f"Static member {static_id} with instance id "
                                       f"{instance_id} is not released yet.")
                # The restarted static member takes over its predecessor's place and
                # assignment under its new member id.
                successor = dataclasses.replace(previous, member_id=member_id,
                                                member_epoch=previous.previous_member_epoch)
                replacement = member_tombstones(group.group_id, static_id) + [
                    target_member_record(group.group_id, member_id, group.target.get(static_id, {})),
                    member_metadata_record(group.group_id, successor),
                    current_assignment_record(group.group_id, successor)]
                for record in replacement:    # the caller appends them (see the caller)
                    self._replay_consumer_record(group, record)
                records += replacement
                return group.members[member_id]
            return group.members.get(member_id)
        member = self._member_for(group, member_id, instance_id)
        if member.classic is not None:
            raise CommandError(E.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} uses the classic protocol.")
        if epoch > member.member_epoch:
            raise CommandError(E.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a greater member epoch ({epoch}) "
                               f"than the one known by the group coordinator ({member.member_epoch}).")
        if epoch < member.member_epoch and not (
                epoch == member.previous_member_epoch and _subset(owned, member.assigned)):
            # A lost response is forgiven: the previous epoch with no partition beyond the
            # current assignment.
            raise CommandError(E.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a smaller member epoch ({epoch}) "
                               f"than the one known by the group coordinator ({member.member_epoch}).")
        return member

    # ================================================================ classic members

    def _classic_join_to_consumer_group(self, group: ConsumerGroup, join: Any,
                                        now_ms: int) -> list:
        """JoinGroup of a classic member of a consumer group (Kafka's
        classicGroupJoinToConsumerGroup): answered as soon as its records are written,
        with its member epoch as the generation; its assignment comes in SyncGroup."""
        token, version = join.parked.token, join.parked.version

        def fail(error: ErrorCode, member_id: str = join.member_id) -> list:
            return [Completion(token, join_response(version, error, member_id))]

        if join.protocol_type != CONSUMER_PROTOCOL_TYPE or not join.protocols:
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        member_id = join.member_id or self._new_member_id()
        if not join.member_id and join.require_known_member_id:
            return fail(E.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(join.protocols[0][1])
        except Exception:
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        records: list[CoordinatorRecord] = []
        static_id = group.static_member_id(join.group_instance_id)
        if static_id is not None and static_id != member_id:
            # A static member restarting under a new id replaces its predecessor.
            records += self._fence_records(group, static_id)
            for record in records:
                self._replay_consumer_record(group, record)
        old = group.members.get(member_id)
        if old is None and len(group.members) >= self.config.consumer_group_max_size:
            return fail(E.GROUP_MAX_SIZE_REACHED, "")
        if old is not None and old.classic is None:
            return fail(E.UNKNOWN_MEMBER_ID)
        replayed = len(records)
        base = old or ConsumerGroupMember(member_id)
        updated = dataclasses.replace(
            base, instance_id=join.group_instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else base.rack_id,
            rebalance_timeout_ms=join.rebalance_timeout_ms,
            subscribed_topic_names=tuple(subscription.topics), client_id=join.client_id,
            client_host=join.client_host,
            classic=ClassicProtocolMember(join.session_timeout_ms, join.protocols))
        owned = self._ids_of(subscription.owned_partitions)
        reconciled = self._update_member(group, old, updated, owned, records)
        group.session_deadline[member_id] = now_ms + join.session_timeout_ms
        # SyncGroup must follow within the rebalance timeout (Kafka's sync timeout).
        group.rebalance_deadline[member_id] = now_ms + join.rebalance_timeout_ms
        response = join_response(version, E.NONE, member_id, reconciled.member_epoch,
                                  CONSUMER_PROTOCOL_TYPE, reconciled.classic.protocol_name
                                  if reconciled.classic else None)
        return self._answer_after(group, records, replayed, token, response, now_ms)

    def _ids_of(self, partitions: Iterable[TopicPartition]) -> dict[uuid.UUID, frozenset[int]]:
        out: dict[uuid.UUID, set[int]] = {}
        for tp in partitions:
            if tp.topic in self._topics:
                out.setdefault(self._topics[tp.topic][0], set()).add(tp.partition)
        return {t: frozenset(ps) for t, ps in out.items()}

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                        generation_id: int) -> ConsumerGroupMember:
        if instance_id is not None:
            static_id = group.static_member_id(instance_id)
            if static_id is None:
                raise CommandError(E.UNKNOWN_MEMBER_ID)
            if static_id != member_id:
                raise CommandError(E.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            raise CommandError(E.UNKNOWN_MEMBER_ID)
        if member.member_epoch != generation_id:
            raise CommandError(E.ILLEGAL_GENERATION)
        return member

    def _classic_sync_to_consumer_group(self, group: ConsumerGroup, request: Any, version: int,
                                        now_ms: int) -> tuple[ErrorCode, bytes, str | None]:
        """(error, assignment, protocol name) for a SyncGroup of a classic member."""
        try:
            member = self._classic_member(group, request.member_id,
                                          request.group_instance_id if version >= 3 else None,
                                          request.generation_id)
        except CommandError as e:
            return e.error, b"", None
        assert member.classic is not None
        name = member.classic.protocol_name
        if version >= 5 and ((request.protocol_type is not None
                              and request.protocol_type != CONSUMER_PROTOCOL_TYPE)
                             or (request.protocol_name is not None and request.protocol_name != name)):
            return E.INCONSISTENT_GROUP_PROTOCOL, b"", None
        if group.group_epoch > member.member_epoch \
                and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return E.REBALANCE_IN_PROGRESS, b"", None
        group.rebalance_deadline.pop(member.member_id, None)
        group.session_deadline[member.member_id] = now_ms + member.classic.session_timeout_ms
        names = {tid: n for n, (tid, _) in self._topics.items()}
        partitions = tuple(TopicPartition(names[t], p) for t, ps in sorted(member.assigned.items())
                           if t in names for p in sorted(ps))
        return E.NONE, encode_assignment(Assignment(partitions)), name

    def _classic_heartbeat_to_consumer_group(self, group: ConsumerGroup, request: Any,
                                             version: int, now_ms: int) -> ErrorCode:
        try:
            member = self._classic_member(group, request.member_id,
                                          request.group_instance_id if version >= 3 else None,
                                          request.generation_id)
        except CommandError as e:
            return e.error
        assert member.classic is not None
        group.session_deadline[member.member_id] = now_ms + member.classic.session_timeout_ms
        # Rejoin when the group moved on, when partitions must be given up, or when the
        # partitions it waits for are free (Kafka's classicGroupHeartbeatToConsumerGroup).
        if (member.member_epoch < group.group_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased(member))):
            group.rebalance_deadline.setdefault(member.member_id,
                                                now_ms + member.rebalance_timeout_ms)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def _classic_leave_to_consumer_group(self, group: ConsumerGroup,
                                         leaving: list[tuple[str, str | None]], now_ms: int
                                         ) -> tuple[list[tuple[str, str | None, ErrorCode]], list]:
        results: list[tuple[str, str | None, ErrorCode]] = []
        records: list[CoordinatorRecord] = []
        for member_id, instance_id in leaving:
            target = member_id
            if instance_id is not None:
                static_id = group.static_member_id(instance_id)
                if static_id is None:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                    continue
                if member_id and static_id != member_id:
                    results.append((member_id, instance_id, E.FENCED_INSTANCE_ID))
                    continue
                target = static_id
            if target not in group.members:
                results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                continue
            fence = self._fence_records(group, target)
            for record in fence:
                self._replay_consumer_record(group, record)
            records += fence
            results.append((member_id, instance_id, E.NONE))
        return results, self._write(group, records, len(records), now_ms, _ignore)

    # ================================================================ offsets

    def _validate_consumer_group_commit(self, group: ConsumerGroup, member_id: str,
                                        instance_id: str | None, member_epoch: int,
                                        version: int, now_ms: int,
                                        transactional: bool = False) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit (TxnOffsetCommit: ``transactional``)."""
        if member_epoch < 0 and not group.members:
            return E.NONE      # an admin or a consumer without group management
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if instance_id is not None and member.instance_id != instance_id:
            return E.FENCED_INSTANCE_ID
        if member.classic is None and version < 9 and not transactional:
            return E.UNSUPPORTED_VERSION   # the consumer protocol commits with member epochs
        return _member_epoch_error(member, member_epoch)

    def _validate_consumer_group_fetch(self, group_id: str, member_id: str,
                                       member_epoch: int) -> ErrorCode | None:
        """OffsetFetch v9+ from a member (Kafka's validateOffsetFetch); -1: an admin."""
        group = self._consumer_groups.get(group_id)
        if group is None or member_epoch == -1:
            return None
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        error = _member_epoch_error(member, member_epoch)
        return None if error == E.NONE else error

    def _delete_consumer_group_records(self, group: ConsumerGroup) -> list[CoordinatorRecord]:
        gid = group.group_id
        offsets = self._images[self.partition_for(gid)].offsets.get(gid, {})
        records = [CoordinatorRecord(OffsetCommitKey(gid, t, p), None) for t, p in sorted(offsets)]
        for member_id in sorted(group.target):
            records += member_tombstones(gid, member_id)
        return records + group_tombstones(gid)

    # ================================================================ describe

    def handle_consumer_group_describe(self, token: Hashable,
                                       request: "messages.ConsumerGroupDescribeRequest",
                                       version: int, now_ms: int) -> list:
        R = messages.ConsumerGroupDescribeResponse
        names = {tid: n for n, (tid, _) in self._topics.items()}

        def assignment(parts: Partitions) -> Any:
            return R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
                for t, ps in sorted(parts.items())])

        described = []
        for group_id in request.group_ids:
            error = self._status_error(group_id)
            group = self._consumer_groups.get(group_id)
            if error is None and group is None:
                error = E.GROUP_ID_NOT_FOUND
            if error is not None:
                message = (f"Group {group_id} is not a consumer group."
                           if error is E.GROUP_ID_NOT_FOUND and group_id in self._groups else None)
                described.append(R.DescribedGroup(error_code=int(error), error_message=message,
                                                  group_id=group_id))
                continue
            assert group is not None
            described.append(R.DescribedGroup(
                group_id=group_id, group_state=group.state, group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.preferred_assignor(self.config.consumer_group_assignors[0]),
                members=[R.Member(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                    member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=assignment(m.assigned),
                    target_assignment=assignment(group.target.get(m.member_id, {})))
                    for m in group.members.values()],
                authorized_operations=authorized_operations(
                    AclResourceType.GROUP, request.include_authorized_operations)))
        return [Completion(token, R(groups=described))]

    def _describe_as_classic(self, group: ConsumerGroup, version: int,
                             include_authorized_operations: bool) -> Any:
        """DescribeGroups of a consumer group, as Kafka's ConsumerGroup.asDescribedGroup:
        subscriptions and assignments in the classic embedded protocol's layouts."""
        R = messages.DescribeGroupsResponse
        names = {tid: n for n, (tid, _) in self._topics.items()}
        return R.DescribedGroup(
            group_id=group.group_id, group_state=group.state,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_data=group.preferred_assignor(self.config.consumer_group_assignors[0]),
            members=[R.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=encode_subscription(Subscription(
                    tuple(m.subscribed_topic_names), rack_id=m.rack_id)),
                member_assignment=encode_assignment(Assignment(tuple(
                    TopicPartition(names[t], p) for t, ps in sorted(m.assigned.items())
                    if t in names for p in sorted(ps)))))
                for m in group.members.values()],
            authorized_operations=authorized_operations(
                AclResourceType.GROUP, version >= 3 and include_authorized_operations))

    # ================================================================ timers

    def _poll_consumer_groups(self, now_ms: int, effects: list) -> None:
        for group in list(self._consumer_groups.values()):
            expired = sorted({m for m, d in group.session_deadline.items() if d <= now_ms}
                             | {m for m, d in group.rebalance_deadline.items() if d <= now_ms})
            for member_id in expired:
                if member_id not in group.members:
                    group.session_deadline.pop(member_id, None)
                    group.rebalance_deadline.pop(member_id, None)
                    continue
                if self._downgrades(group, member_id):
                    effects += self._convert_to_classic_group(group, member_id, now_ms)
                    break
                effects += self._write(group, self._fence_records(group, member_id), 0, now_ms,
                                       _ignore)

    def _downgrades(self, group: ConsumerGroup, leaving: str) -> bool:
        """Whether ``leaving`` is the last consumer-protocol member of a group whose other
        members all speak the classic protocol (Kafka's validateOnlineDowngrade)."""
        rest = [m for m in group.members.values() if m.member_id != leaving]
        return (self.config.consumer_group_migration_policy in ("downgrade", "bidirectional")
                and bool(rest) and group.members.get(leaving) is not None
                and group.members[leaving].classic is None
                and all(m.classic is not None for m in rest)
                and len(rest) <= self.config.group_max_size
                and _common_protocol(rest))

    def _consumer_deadlines(self) -> Iterable[int]:
        for group in self._consumer_groups.values():
            yield from group.session_deadline.values()
            yield from group.rebalance_deadline.values()

    def _abandon_classic_group(self, classic: "ClassicGroup", now_ms: int) -> None:
        raise NotImplementedError   # GroupCoordinator provides it

    def _convert_to_classic_group(self, group: ConsumerGroup, leaving: str,
                                  now_ms: int) -> list:
        raise NotImplementedError   # GroupCoordinator provides it



def _preferred_assignor(members: Iterable[ConsumerGroupMember], default: str) -> str:
    votes: dict[str, int] = {}
    for m in members:
        if m.server_assignor:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    return max(sorted(votes), key=lambda a: votes[a]) if votes else default


def _common_protocol(members: Iterable[ConsumerGroupMember]) -> bool:
    """Whether the classic members share an assignor (a classic group needs one)."""
    common: set[str] | None = None
    for m in members:
        assert m.classic is not None
        names = {name for name, _ in m.classic.protocols}
        common = names if common is None else common & names
    return bool(common)


def _member_epoch_error(member: ConsumerGroupMember, epoch: int) -> ErrorCode:
    """Kafka's validateMemberEpoch: classic members speak in generations."""
    if member.classic is not None:
        return E.NONE if epoch == member.member_epoch else E.ILLEGAL_GENERATION
    if epoch > member.member_epoch:
        return E.FENCED_MEMBER_EPOCH
    if epoch < member.member_epoch:
        return E.STALE_MEMBER_EPOCH
    return E.NONE


def _ignore(error: ErrorCode, now_ms: int, effects: list) -> None:
    return
