"""Admin-driven replica changes: ElectLeaders, partition reassignment (KIP-455), and the
preferred-leader election that follows a broker's return.

Theory of operation
-------------------
All decisions here read one committed ``MetadataImage`` and return records (Kafka's
``ReplicationControlManager.electLeaders`` / ``alterPartitionReassignments``, minus its
mutable state); nothing changes until the records are committed and replayed.

**ElectLeaders** (API 43), per partition, with Kafka's outcomes:

- PREFERRED: ELECTION_NOT_NEEDED when replicas[0] leads already; a change making it the
  leader when it is in the ISR and active; PREFERRED_LEADER_NOT_AVAILABLE otherwise.
- UNCLEAN: ELECTION_NOT_NEEDED when the partition has a leader; otherwise an election
  that may pick a replica outside the ISR (election.py records it as RECOVERING,
  KIP-704); ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is active.
- With no partitions named (``topic_partitions`` null), every partition is tried and
  those that need no election are left out of the answer, as Kafka does.

**Reassignment**, a partition's life (``PartitionRecord`` adding/removing replicas)::

    replicas=[1,2]  --AlterPartitionReassignments([2,3])-->
    replicas=[2,3,1] adding=[3] removing=[1]      (3 starts following; 1 still serves)
        --the leader adds 3 to the ISR (AlterPartition)-->
    replicas=[2,3] adding=[] removing=[]          (completion; 1 stops and deletes its log)

A record that removes replicas also bumps the leader epoch (``_change``), as Kafka's does;
one that only adds replicas keeps it (the leader tracks the new followers from the committed
replica set).

The moving state lists the target replicas first, then the ones being removed (Kafka's
``PartitionReassignmentReplicas``), so the target's first replica is already the
preferred leader. The switch happens only once every target replica is in the ISR:
``completion_change`` is written by the controller's poll right after the ISR change
that makes it possible is replayed (Kafka does it inside AlterPartition; a separate
record keeps the leader's AlterPartition answer about the ISR it asked for). If the
leader is among the removed replicas, the completion elects a new one from the target
replicas in the ISR. A target that is in the ISR already completes at once.

Cancelling (replicas null) reverts a moving partition to its original replicas (the
current ones minus the adding ones), drops the adding replicas from the ISR (never
emptying it) and moves leadership off them; NO_REASSIGNMENT_IN_PROGRESS if nothing
moves. A new target for a moving partition starts from that reverted state.

**Preferred leader after a restart.** Kafka moves leadership back to preferred replicas
only in its periodic scan (``leader.imbalance.check.interval.seconds``, 5 minutes), so
after a restart every partition stays led by the brokers that stayed up for minutes.
``preferred_candidates`` names the partitions whose replicas or ISR changed so that
their preferred replica is in the ISR without leading: the controller elects it at its
next poll (``auto.leader.rebalance.enable`` gates both).
"""
from __future__ import annotations

import uuid
from typing import Any, Iterable, Sequence

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from metadata_log.delta import IsrChange, MetadataChange, ReplicasChange
from metadata_log.image import LEADER_UNCHANGED, NO_LEADER, MetadataImage, PartitionRegistration
from quorum.controller.election import Election, build_partition_change
from quorum.controller.replication_control import (
    IsActive, _check_manual_replicas, active_predicate, elr_for_topic,
)
from quorum.controller.result import ControllerResult

__all__ = [
    "ELECTION_TYPE_PREFERRED", "ELECTION_TYPE_UNCLEAN", "alter_partition_reassignments",
    "completion_change", "elect_leaders", "is_reassigning", "list_partition_reassignments",
    "preferred_candidates", "reassignment_replicas", "revert_reassignment",
]

ELECTION_TYPE_PREFERRED = 0     # Kafka's ElectionType.PREFERRED
ELECTION_TYPE_UNCLEAN = 1       # Kafka's ElectionType.UNCLEAN

PartitionKey = tuple[uuid.UUID, int]


# ---------------------------------------------------------------- ElectLeaders

def _elect_one(image: MetadataImage, topic_id: uuid.UUID, index: int,
               p: PartitionRegistration, election_type: int,
               is_active: IsActive) -> tuple[ErrorCode, str | None, Any]:
    elr = elr_for_topic(image, image.topics.by_id[topic_id].name)
    if election_type == ELECTION_TYPE_PREFERRED:
        if p.leader == p.replicas[0]:
            return ErrorCode.ELECTION_NOT_NEEDED, None, None
        record = build_partition_change(topic_id, index, p, is_active=is_active,
                                        election=Election.PREFERRED, elr=elr)
        if record is None or record.leader != p.replicas[0]:
            # Only a move to the preferred replica answers a preferred election; a
            # leaderless partition is the leaderless scan's (or an unclean election's).
            return (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect leader for partition: preferred replica "
                    f"{p.replicas[0]} is not in the ISR {list(p.isr)} or not active.", None)
        return ErrorCode.NONE, None, record
    if p.leader != NO_LEADER:
        return ErrorCode.ELECTION_NOT_NEEDED, None, None
    record = build_partition_change(topic_id, index, p, is_active=is_active,
                                    election=Election.UNCLEAN, elr=elr)
    if record is None or record.leader in (NO_LEADER, LEADER_UNCHANGED):
        return (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect leader for partition: none of the replicas "
                f"{list(p.replicas)} is active.", None)
    return ErrorCode.NONE, None, record


def elect_leaders(image: MetadataImage,
                  request: Any) -> ControllerResult[messages.ElectLeadersResponse]:
    R = messages.ElectLeadersResponse
    election_type = request.election_type
    if election_type not in (ELECTION_TYPE_PREFERRED, ELECTION_TYPE_UNCLEAN):
        return ControllerResult((), R(error_code=int(ErrorCode.INVALID_REQUEST),
                                      replica_election_results=[]))
    is_active = active_predicate(image)
    records: list[Any] = []
    results: dict[str, list[Any]] = {}
    elect_all = request.topic_partitions is None
    if elect_all:
        wanted: Iterable[tuple[str, int]] = (
            (t.name, i) for t in sorted(image.topics.by_id.values(), key=lambda t: t.name)
            for i in sorted(t.partitions))
    else:
        wanted = dict.fromkeys((tp.topic, i) for tp in request.topic_partitions
                               for i in tp.partitions)
    message: str | None
    for name, index in wanted:
        topic = image.topics.get(name)
        p = topic.partitions.get(index) if topic is not None else None
        if topic is None or p is None:
            code, message, record = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     "This server does not host this topic-partition.", None)
        else:
            code, message, record = _elect_one(image, topic.topic_id, index, p,
                                               election_type, is_active)
        if elect_all and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        if record is not None:
            records.append(record)
        results.setdefault(name, []).append(R.ReplicaElectionResult.PartitionResult(
            partition_id=index, error_code=int(code), error_message=message))
    return ControllerResult(tuple(records), R(error_code=0, replica_election_results=[
        R.ReplicaElectionResult(topic=name, partition_result=parts)
        for name, parts in results.items()]))


# ---------------------------------------------------------------- reassignment

def is_reassigning(p: PartitionRegistration) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def reassignment_replicas(current: Sequence[int], target: Sequence[int]
                          ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(replicas while moving, adding, removing): the target first, then the replicas
    being removed, in their current order (Kafka's PartitionReassignmentReplicas)."""
    removing = tuple(r for r in current if r not in target)
    adding = tuple(r for r in target if r not in current)
    return tuple(target) + removing, adding, removing


def _original_replicas(p: PartitionRegistration) -> tuple[int, ...]:
    return tuple(r for r in p.replicas if r not in p.adding_replicas)


def _leader_among(replicas: Sequence[int], isr: Sequence[int], current: int,
                  is_active: IsActive) -> int:
    """The current leader if it may stay, else the first replica in the ISR and active."""
    if current in replicas and current in isr and is_active(current):
        return current
    return next((r for r in replicas if r in isr and is_active(r)), NO_LEADER)


def _change(topic_id: uuid.UUID, index: int, p: PartitionRegistration, *,
            replicas: tuple[int, ...], isr: tuple[int, ...], adding: tuple[int, ...],
            removing: tuple[int, ...], leader: int) -> messages.PartitionChangeRecord | None:
    assert isr and set(isr) <= set(replicas), (isr, replicas)
    assert leader == NO_LEADER or leader in isr, (leader, isr)
    if (replicas, isr, adding, removing, leader) == (
            p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader):
        return None
    # Replicas going away bump the leader epoch (naming the current leader does that on
    # replay), as Kafka does: the removed replica's fetches are then fenced. Added replicas do
    # not: the leader tracks them from the committed replica set.
    replicas_removed = bool(set(p.replicas) - set(replicas))
    # Built once; a field left at the schema's default (None, LEADER_UNCHANGED) means
    # "unchanged" on replay.
    return messages.PartitionChangeRecord(
        partition_id=index, topic_id=topic_id,
        isr=list(isr) if isr != p.isr else None,
        leader=leader if leader != p.leader or replicas_removed else LEADER_UNCHANGED,
        replicas=list(replicas) if replicas != p.replicas else None,
        adding_replicas=list(adding) if adding != p.adding_replicas else None,
        removing_replicas=list(removing) if removing != p.removing_replicas else None)


def revert_reassignment(topic_id: uuid.UUID, index: int, p: PartitionRegistration,
                        is_active: IsActive) -> messages.PartitionChangeRecord | None:
    """The change that cancels a moving partition (module docstring)."""
    if not p.isr:
        # KIP-966: no ISR, the eligible leader replicas hold the data; the cancellation
        # waits until one of them leads again (ELR members must stay replicas until then).
        return None
    original = _original_replicas(p)
    isr = tuple(r for r in p.isr if r in original) or p.isr
    if not set(isr) <= set(original):
        # Only adding replicas are in the ISR: keep the first of them, which has the data.
        original = original + tuple(r for r in p.adding_replicas if r in isr)
        isr = tuple(r for r in p.isr if r in original)
    leader = _leader_among(original, isr, p.leader, is_active)
    return _change(topic_id, index, p, replicas=original, isr=isr, adding=(), removing=(),
                   leader=leader)


def completion_change(topic_id: uuid.UUID, index: int, p: PartitionRegistration,
                      is_active: IsActive) -> messages.PartitionChangeRecord | None:
    """The switch to the target replicas, once they are all in the ISR; None before."""
    if not is_reassigning(p):
        return None
    target = tuple(r for r in p.replicas if r not in p.removing_replicas)
    if not set(target) <= set(p.isr):
        return None
    isr = tuple(r for r in p.isr if r in target)
    leader = _leader_among(target, isr, p.leader, is_active)
    return _change(topic_id, index, p, replicas=target, isr=isr, adding=(), removing=(),
                   leader=leader)


def _check_target(image: MetadataImage, index: int, target: Sequence[int],
                  is_active: IsActive) -> str | None:
    if not target:
        return f"The manual partition assignment for partition {index} is empty."
    return _check_manual_replicas(image, index, target, is_active)


def alter_partition_reassignments(
        image: MetadataImage, request: Any
) -> ControllerResult[messages.AlterPartitionReassignmentsResponse]:
    R = messages.AlterPartitionReassignmentsResponse
    is_active = active_predicate(image)
    records: list[Any] = []
    responses = []
    seen: set[tuple[str, int]] = set()
    for t in request.topics:
        topic = image.topics.get(t.name)
        parts = []
        for rp in t.partitions:
            index = rp.partition_index

            def answer(code: ErrorCode, message: str | None = None) -> None:
                parts.append(R.ReassignableTopicResponse.ReassignablePartitionResponse(
                    partition_index=index, error_code=int(code), error_message=message))

            p = topic.partitions.get(index) if topic is not None else None
            if topic is None or p is None:
                answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       "This server does not host this topic-partition.")
                continue
            if (t.name, index) in seen:
                answer(ErrorCode.INVALID_REQUEST, "Duplicate partition in the request.")
                continue
            seen.add((t.name, index))
            if rp.replicas is None:
                if not is_reassigning(p):
                    answer(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                           f"No reassignment is in progress for {t.name}-{index}.")
                    continue
                record = revert_reassignment(topic.topic_id, index, p, is_active)
                if record is not None:
                    records.append(record)
                answer(ErrorCode.NONE)
                continue
            target = tuple(rp.replicas)
            error = _check_target(image, index, target, is_active)
            if error is not None:
                answer(ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
                continue
            record, error = _start(topic.topic_id, index, p, target, is_active)
            if error is not None:
                answer(ErrorCode.INVALID_REPLICA_ASSIGNMENT, error)
                continue
            if record is not None:
                records.append(record)
            answer(ErrorCode.NONE)
        responses.append(R.ReassignableTopicResponse(name=t.name, partitions=parts))
    return ControllerResult(tuple(records), R(error_code=0, error_message=None,
                                              responses=responses))


def _start(topic_id: uuid.UUID, index: int, p: PartitionRegistration,
           target: tuple[int, ...], is_active: IsActive
           ) -> tuple[messages.PartitionChangeRecord | None, str | None]:
    """(record, error): one record from the partition as it is to the moving (or, when
    the target is in the ISR already, the completed) state for ``target``."""
    original = _original_replicas(p) if is_reassigning(p) else p.replicas
    replicas, adding, removing = reassignment_replicas(original, target)
    isr = tuple(r for r in p.isr if r in replicas)
    if not isr:
        # Only replicas an earlier reassignment was adding are in sync, and the new target
        # drops them: the data would have nowhere to come from.
        return None, (f"Partition {index}: its in-sync replicas {list(p.isr)} are all being "
                      f"added by the reassignment in progress and are not in the new target; "
                      f"cancel that reassignment first.")
    if set(target) <= set(isr):
        final_isr = tuple(r for r in isr if r in target)
        return _change(topic_id, index, p, replicas=target, isr=final_isr, adding=(),
                       removing=(), leader=_leader_among(target, final_isr, p.leader,
                                                         is_active)), None
    leader = _leader_among(replicas, isr, p.leader, is_active)
    return _change(topic_id, index, p, replicas=replicas, isr=isr, adding=adding,
                   removing=removing, leader=leader), None


def list_partition_reassignments(
        image: MetadataImage, request: Any
) -> ControllerResult[messages.ListPartitionReassignmentsResponse]:
    """The moving partitions; named topics that do not exist are left out (Kafka)."""
    R = messages.ListPartitionReassignmentsResponse
    wanted: dict[str, list[int] | None] = {}
    if request.topics is None:
        for t in image.topics.by_id.values():
            wanted[t.name] = None
    else:
        for lt in request.topics:
            wanted.setdefault(lt.name, [])
            cur = wanted[lt.name]
            assert cur is not None
            cur.extend(lt.partition_indexes)
    topics = []
    for name in sorted(wanted):
        topic = image.topics.get(name)
        if topic is None:
            continue
        indexes = sorted(topic.partitions) if wanted[name] is None else \
            sorted(set(wanted[name] or ()))
        parts = []
        for i in indexes:
            p = topic.partitions.get(i)
            if p is None or not is_reassigning(p):
                continue
            parts.append(R.OngoingTopicReassignment.OngoingPartitionReassignment(
                partition_index=i, replicas=list(p.replicas),
                adding_replicas=list(p.adding_replicas),
                removing_replicas=list(p.removing_replicas)))
        if parts:
            topics.append(R.OngoingTopicReassignment(name=name, partitions=parts))
    return ControllerResult((), R(error_code=0, error_message=None, topics=topics))


# ---------------------------------------------------------------- follow-ups of replay

def changed_partitions(changes: Iterable[MetadataChange]) -> set[PartitionKey]:
    """Partitions whose ISR or replicas changed in a replayed batch."""
    return {(c.topic_id, c.partition) for c in changes if isinstance(c, (IsrChange, ReplicasChange))}


def preferred_candidates(image: MetadataImage, keys: Iterable[PartitionKey]) -> set[PartitionKey]:
    """Of ``keys``, the partitions whose preferred replica is in the ISR without leading."""
    out = set()
    for topic_id, index in keys:
        t = image.topics.get_by_id(topic_id)
        p = t.partitions.get(index) if t is not None else None
        if p is not None and p.leader != NO_LEADER and p.leader != p.replicas[0] \
                and p.replicas[0] in p.isr:
            out.add((topic_id, index))
    return out


def follow_up_changes(image: MetadataImage, keys: Iterable[PartitionKey], *,
                      preferred: bool, limit: int) -> tuple[list[Any], set[PartitionKey]]:
    """(records, keys left for later): reassignments that can complete, then preferred
    elections (when ``preferred``), for the partitions in ``keys``; each partition at
    most once, so the records never conflict."""
    is_active = active_predicate(image)
    records: list[Any] = []
    left: set[PartitionKey] = set()
    for key in sorted(keys, key=lambda k: (str(k[0]), k[1])):
        if len(records) >= limit:
            left.add(key)
            continue
        topic_id, index = key
        t = image.topics.get_by_id(topic_id)
        p = t.partitions.get(index) if t is not None else None
        if p is None:
            continue
        record = completion_change(topic_id, index, p, is_active)
        if record is None and preferred and not is_reassigning(p) \
                and p.leader != NO_LEADER and p.leader != p.replicas[0] \
                and p.replicas[0] in p.isr and is_active(p.replicas[0]):
            record = build_partition_change(
                topic_id, index, p, is_active=is_active, election=Election.PREFERRED,
                elr=elr_for_topic(image, image.topics.by_id[topic_id].name))
        if record is not None:
            records.append(record)
    return records, left
