"""A test context for the group coordinator, after Kafka's RaftClientTestContext.

It plays the broker shell: hands out tokens, keeps every Completion (encoding each response
at its request's version, so a badly shaped response fails the test), queues Appends, acks
or fails them in order, records the acknowledged batches per partition as the log would
hold them, and moves a simulated clock.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from broker.group import (
    Append, Completion, CoordinatorLoader, GroupConfig, GroupCoordinator, partition_for_group,
)
from broker.group.state import GroupState
from clients.protocol import encode_message, messages
from clients.protocol.errors import ErrorCode
from clients.records import (
    ControlRecordType, assign_offsets, build_control_batch, end_transaction_marker_value,
)

E = ErrorCode
RANGE = "range"
ROUNDROBIN = "roundrobin"


def subscription(topics: list[str], version: int = 0) -> bytes:
    sub = messages.ConsumerProtocolSubscription(topics=list(topics))
    return version.to_bytes(2, "big") + encode_message(sub, version)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    A = messages.ConsumerProtocolAssignment
    a = A(assigned_partitions=[A.TopicPartition(topic=t, partitions=list(ps))
                               for t, ps in partitions.items()])
    return (0).to_bytes(2, "big") + encode_message(a, 0)


@dataclass
class AckedLog:
    """What each __consumer_offsets partition holds: acknowledged batches, with offsets."""
    batches: dict[int, list[bytes]] = field(default_factory=dict)
    next_offset: dict[int, int] = field(default_factory=dict)

    def append(self, append: Append) -> None:
        base = self.next_offset.get(append.partition, 0)
        batch = bytearray(append.batch())
        self.next_offset[append.partition] = assign_offsets(batch, base)
        self.batches.setdefault(append.partition, []).append(bytes(batch))

    def marker(self, partition: int, producer_id: int, producer_epoch: int, committed: bool,
               timestamp_ms: int = 0) -> None:
        """A transaction marker, as the partition leader appends it (WriteTxnMarkers)."""
        batch = bytearray(build_control_batch(
            ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
            end_transaction_marker_value(0), timestamp_ms=timestamp_ms,
            producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True))
        base = self.next_offset.get(partition, 0)
        self.next_offset[partition] = assign_offsets(batch, base)
        self.batches.setdefault(partition, []).append(bytes(batch))

    def load(self, partition: int) -> CoordinatorLoader:
        loader = CoordinatorLoader()
        loader.replay_batches(b"".join(self.batches.get(partition, [])))
        return loader


class Harness:
    def __init__(self, config: GroupConfig | None = None, partitions: tuple[int, ...] | None = None,
                 seed: int = 7, auto_ack: bool = True, now_ms: int = 1_000_000) -> None:
        self.config = config or GroupConfig(group_initial_rebalance_delay_ms=0)
        self.coordinator = GroupCoordinator(self.config, random.Random(seed))
        self.now_ms = now_ms
        self.auto_ack = auto_ack
        self.responses: dict[int, Any] = {}
        self.versions: dict[int, tuple[str, int]] = {}
        self.pending_appends: list[Append] = []
        self.log = AckedLog()
        self._next_token = 0
        if partitions is None:
            partitions = tuple(range(self.config.offsets_topic_num_partitions))
        for p in partitions:
            self.coordinator.begin_load(p)
            self.run(self.coordinator.complete_load(p, CoordinatorLoader().image, self.now_ms))

    # ------------------------------------------------------------------ plumbing

    def token(self, api: str, version: int) -> int:
        self._next_token += 1
        self.versions[self._next_token] = (api, version)
        return self._next_token

    def run(self, effects: list) -> None:
        for effect in effects:
            if isinstance(effect, Completion):
                assert effect.token not in self.responses, f"token {effect.token} answered twice"
                api, version = self.versions[effect.token]
                encode_message(effect.response, version)   # must be valid for its version
                self.responses[effect.token] = effect.response
            else:
                assert isinstance(effect, Append)
                self.pending_appends.append(effect)
        if self.auto_ack:
            self.ack_all()
        for g in self.coordinator.groups():
            if g.state is not GroupState.DEAD:
                g.check_invariants()

    def ack_all(self, error: ErrorCode = E.NONE) -> int:
        n = 0
        while self.pending_appends:
            append = self.pending_appends.pop(0)
            if error == E.NONE:
                self.log.append(append)
            n += 1
            self.run(self.coordinator.on_append_result(append.append_id, int(error), self.now_ms))
        return n

    def ack_next(self, error: ErrorCode = E.NONE) -> Append:
        append = self.pending_appends.pop(0)
        if error == E.NONE:
            self.log.append(append)
        self.run(self.coordinator.on_append_result(append.append_id, int(error), self.now_ms))
        return append

    def advance(self, ms: int) -> int:
        """Move the clock by ``ms`` and poll; returns the coordinator's next-deadline answer."""
        self.now_ms += ms
        return self.poll()

    def poll(self) -> int:
        effects, delay = self.coordinator.poll(self.now_ms)
        self.run(effects)
        return delay

    def settle(self, limit_ms: int = 0) -> None:
        """Poll at each deadline the coordinator names, up to ``limit_ms`` from now."""
        end = self.now_ms + limit_ms
        for _ in range(1000):
            delay = self.poll()
            if self.now_ms + delay > end:
                return
            self.now_ms += delay
        raise AssertionError("the coordinator keeps asking to be polled")

    def response(self, token: int) -> Any:
        return self.responses.get(token)

    def group(self, group_id: str):
        return self.coordinator.group(group_id)

    # ------------------------------------------------------------------ requests

    def join(self, group_id: str = "g", member_id: str = "", *, version: int = 5,
             instance_id: str | None = None, protocols: list[tuple[str, bytes]] | None = None,
             session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 30_000,
             protocol_type: str = "consumer", client_id: str = "client",
             topics: list[str] | None = None) -> int:
        if protocols is None:
            protocols = [(RANGE, subscription(topics or ["t"]))]
        R = messages.JoinGroupRequest
        req = R(group_id=group_id, session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
                group_instance_id=instance_id, protocol_type=protocol_type,
                protocols=[R.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols])
        t = self.token("join", version)
        self.run(self.coordinator.handle_join_group(t, req, version, client_id, "/127.0.0.1",
                                                    self.now_ms))
        return t

    def join_new(self, group_id: str = "g", **kw: Any) -> int:
        """KIP-394's two steps for a dynamic member (v4+): returns the second join's token."""
        t = self.join(group_id, **kw)
        r = self.response(t)
        assert r.error_code == E.MEMBER_ID_REQUIRED, r
        assert r.member_id
        return self.join(group_id, member_id=r.member_id, **kw)

    def sync(self, group_id: str, member_id: str, generation_id: int,
             assignments: dict[str, bytes] | None = None, *, version: int = 3,
             instance_id: str | None = None, protocol_type: str | None = None,
             protocol_name: str | None = None) -> int:
        R = messages.SyncGroupRequest
        req = R(group_id=group_id, generation_id=generation_id, member_id=member_id,
                group_instance_id=instance_id, protocol_type=protocol_type,
                protocol_name=protocol_name,
                assignments=[R.SyncGroupRequestAssignment(member_id=m, assignment=a)
                             for m, a in (assignments or {}).items()])
        t = self.token("sync", version)
        self.run(self.coordinator.handle_sync_group(t, req, version, self.now_ms))
        return t

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, *, version: int = 3,
                  instance_id: str | None = None) -> int:
        req = messages.HeartbeatRequest(group_id=group_id, generation_id=generation_id,
                                        member_id=member_id, group_instance_id=instance_id)
        t = self.token("heartbeat", version)
        self.run(self.coordinator.handle_heartbeat(t, req, version, self.now_ms))
        return self.response(t).error_code

    def leave(self, group_id: str, members: list[tuple[str, str | None]], *, version: int = 3
              ) -> Any:
        R = messages.LeaveGroupRequest
        if version >= 3:
            req = R(group_id=group_id, members=[R.MemberIdentity(member_id=m, group_instance_id=i)
                                                for m, i in members])
        else:
            assert len(members) == 1
            req = R(group_id=group_id, member_id=members[0][0])
        t = self.token("leave", version)
        self.run(self.coordinator.handle_leave_group(t, req, version, self.now_ms))
        return self.response(t)

    def commit(self, group_id: str, offsets: dict[tuple[str, int], int], *, member_id: str = "",
               generation_id: int = -1, version: int = 7, instance_id: str | None = None,
               metadata: str | None = "", retention_time_ms: int = -1,
               leader_epoch: int = -1) -> int:
        R = messages.OffsetCommitRequest
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(R.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset,
                committed_leader_epoch=leader_epoch, committed_metadata=metadata))
        req = R(group_id=group_id, generation_id_or_member_epoch=generation_id,
                member_id=member_id, group_instance_id=instance_id,
                retention_time_ms=retention_time_ms,
                topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])
        t = self.token("commit", version)
        self.run(self.coordinator.handle_offset_commit(t, req, version, self.now_ms))
        return t

    def txn_commit(self, group_id: str, offsets: dict[tuple[str, int], int], *,
                   producer_id: int = 1000, producer_epoch: int = 0, member_id: str = "",
                   generation_id: int = -1, version: int = 3, instance_id: str | None = None,
                   metadata: str | None = "") -> int:
        R = messages.TxnOffsetCommitRequest
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(R.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset,
                committed_leader_epoch=-1, committed_metadata=metadata))
        req = R(transactional_id="txn", group_id=group_id, producer_id=producer_id,
                producer_epoch=producer_epoch, generation_id=generation_id,
                member_id=member_id, group_instance_id=instance_id,
                topics=[R.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])
        t = self.token("txn_commit", version)
        self.run(self.coordinator.handle_txn_offset_commit(t, req, version, self.now_ms))
        return t

    def marker(self, group_id: str, producer_id: int, committed: bool, *,
               producer_epoch: int = 0, in_log: bool = True) -> None:
        """The transaction coordinator's marker lands on the group's partition."""
        p = partition_for_group(group_id, self.config.offsets_topic_num_partitions)
        if in_log:
            self.log.marker(p, producer_id, producer_epoch, committed, self.now_ms)
        self.run(self.coordinator.on_txn_marker(p, producer_id, committed, self.now_ms))

    def fetch_stable(self, group_id: str, partitions: dict[str, list[int]] | None, *,
                     version: int = 7) -> dict[tuple[str, int], tuple[int, int]]:
        """OffsetFetch with require_stable: (offset, error code) per partition."""
        R = messages.OffsetFetchRequest
        if version >= 8:
            topics8 = None if partitions is None else [
                R.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in partitions.items()]
            req = R(require_stable=True,
                    groups=[R.OffsetFetchRequestGroup(group_id=group_id, topics=topics8)])
        else:
            topics = None if partitions is None else [
                R.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                for t, ps in partitions.items()]
            req = R(group_id=group_id, topics=topics, require_stable=True)
        t = self.token("fetch", version)
        self.run(self.coordinator.handle_offset_fetch(t, req, version, self.now_ms))
        r = self.response(t)
        topics_out = r.groups[0].topics if version >= 8 else r.topics
        return {(x.name, p.partition_index): (p.committed_offset, p.error_code)
                for x in topics_out for p in x.partitions}

    def commit_errors(self, token: int) -> dict[tuple[str, int], int]:
        r = self.response(token)
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    def fetch(self, group_id: str, partitions: dict[str, list[int]] | None, *, version: int = 5
              ) -> Any:
        R = messages.OffsetFetchRequest
        if version >= 8:
            topics = None if partitions is None else [
                R.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in partitions.items()]
            req = R(groups=[R.OffsetFetchRequestGroup(group_id=group_id, topics=topics)])
        else:
            topics = None if partitions is None else [
                R.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                for t, ps in partitions.items()]
            req = R(group_id=group_id, topics=topics)
        t = self.token("fetch", version)
        self.run(self.coordinator.handle_offset_fetch(t, req, version, self.now_ms))
        return self.response(t)

    def fetched(self, group_id: str, partitions: dict[str, list[int]] | None = None,
                version: int = 5) -> dict[tuple[str, int], int]:
        r = self.fetch(group_id, partitions, version=version)
        assert r.error_code == 0, r
        return {(t.name, p.partition_index): p.committed_offset
                for t in r.topics for p in t.partitions}

    def offset_delete(self, group_id: str, partitions: dict[str, list[int]]) -> Any:
        R = messages.OffsetDeleteRequest
        req = R(group_id=group_id, topics=[R.OffsetDeleteRequestTopic(
            name=t, partitions=[R.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in partitions.items()])
        t = self.token("offset_delete", 0)
        self.run(self.coordinator.handle_offset_delete(t, req, 0, self.now_ms))
        return t

    def list_groups(self, version: int = 4, states: list[str] | None = None) -> Any:
        req = messages.ListGroupsRequest(states_filter=states or [])
        t = self.token("list", version)
        self.run(self.coordinator.handle_list_groups(t, req, version, self.now_ms))
        return self.response(t)

    def describe(self, group_ids: list[str], version: int = 4) -> Any:
        req = messages.DescribeGroupsRequest(groups=group_ids)
        t = self.token("describe", version)
        self.run(self.coordinator.handle_describe_groups(t, req, version, self.now_ms))
        return self.response(t)

    def delete_groups(self, group_ids: list[str], version: int = 1) -> int:
        req = messages.DeleteGroupsRequest(groups_names=group_ids)
        t = self.token("delete", version)
        self.run(self.coordinator.handle_delete_groups(t, req, version, self.now_ms))
        return t

    # ------------------------------------------------------------------ stories

    def form_group(self, group_id: str, n: int, *, version: int = 5, **kw: Any
                   ) -> list[str]:
        """n dynamic members join (two-step), the leader syncs, the group is Stable.
        Returns member ids, leader first."""
        tokens = [self.join_new(group_id, version=version, client_id=f"c{i}", **kw)
                  if version >= 4 else self.join(group_id, version=version, client_id=f"c{i}", **kw)
                  for i in range(n)]
        self.settle()
        responses = [self.response(t) for t in tokens]
        assert all(r is not None and r.error_code == 0 for r in responses), responses
        assert len({r.generation_id for r in responses}) == 1, responses
        g = self.group(group_id)
        assert g.state is GroupState.COMPLETING_REBALANCE, g
        assert len(g.members) == n
        leader = g.leader_id
        gen = g.generation_id
        ids = [leader] + [m for m in g.members if m != leader]
        assign = {m: assignment({"t": [i]}) for i, m in enumerate(ids)}
        syncs = [self.sync(group_id, m, gen, assign if m == leader else None) for m in ids]
        self.ack_all()
        assert g.state is GroupState.STABLE, g
        for m, t in zip(ids, syncs):
            assert self.response(t).error_code == 0
            assert self.response(t).assignment == assign[m]
        return ids

    # ------------------------------------------------------------------ KIP-848

    def cg_heartbeat(self, group_id: str = "g", member_id: str = "", epoch: int = 0, *,
                     topics: list[str] | None = None, owned: dict | None = None,
                     rebalance_timeout_ms: int = -1, instance_id: str | None = None,
                     assignor: str | None = None, regex: str | None = None,
                     version: int = 1) -> Any:
        """One ConsumerGroupHeartbeat; ``owned``: topic id -> partitions (None: not sent).
        A join (epoch 0) sends what a first request must."""
        R = messages.ConsumerGroupHeartbeatRequest
        if epoch == 0:
            owned = owned or {}
            if rebalance_timeout_ms == -1:
                rebalance_timeout_ms = 30_000
            if topics is None and regex is None:
                topics = ["t"]
        req = R(group_id=group_id, member_id=member_id, member_epoch=epoch,
                instance_id=instance_id, rebalance_timeout_ms=rebalance_timeout_ms,
                subscribed_topic_names=topics, subscribed_topic_regex=regex,
                server_assignor=assignor,
                topic_partitions=None if owned is None else [
                    R.TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in owned.items()])
        t = self.token("consumer_group_heartbeat", version)
        self.run(self.coordinator.handle_consumer_group_heartbeat(t, req, version, "client",
                                                                  "/127.0.0.1", self.now_ms))
        return self.response(t)


def coordinator_partition(group_id: str) -> int:
    return partition_for_group(group_id, 50)
