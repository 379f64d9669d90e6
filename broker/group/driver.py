"""The group coordinator's asyncio shell: the only place the pure core meets the broker.

- requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
  OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups, TxnOffsetCommit)
  become core inputs under a token; the core's ``Completion`` resolves the request's
  future, now or later (``broker/coordinator_shell.py``, shared with the transaction
  coordinator, as are the appends, the poll timer and the loading below);
- ``Append`` effects are written to ``__consumer_offsets-<p>`` through the replica manager
  with acks=all (the same durability as user data) as the coordinator's own appends
  (no client sequence checks), and their outcome is reported back in append order per
  partition, as the core requires;
- TxnOffsetCommit is verified with the transaction coordinator first (KIP-890, through
  the ``verify_txn_offset_commit`` it is given);
- transaction markers appended to a ``__consumer_offsets`` partition this broker leads
  (``ReplicaDriver.subscribe_txn_markers``) complete or drop that producer's pending
  transactional offsets at once (``GroupCoordinator.on_txn_marker``);
- leadership of ``__consumer_offsets`` partitions (from the metadata image) loads a
  partition's groups by replaying its log from the start to the log end offset (what a
  new leader holds becomes committed as its followers catch up), or unloads them;
- a timer calls ``poll`` when the core's next deadline is due.

FindCoordinator (which creates ``__consumer_offsets`` on first use) is
``broker/find_coordinator.py``'s, shared with the transaction coordinator.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from typing import Any, Awaitable, Callable

from broker.coordinator_shell import CoordinatorShell
from broker.group.coordinator import Append, Completion, GroupConfig, GroupCoordinator
from broker.group.records import CONSUMER_OFFSETS_TOPIC, CoordinatorLoader
from broker.replica_driver import ReplicaDriver
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from metadata_log.image import MetadataImage

log = logging.getLogger(__name__)

__all__ = ["GROUP_VERSIONS", "GroupCoordinatorDriver"]

GROUP_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    # Kafka 4.1 serves v0-5; v5 (KIP-890 part 2) is not in the reference schemas.
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
}


# (transactional id, producer id, producer epoch, offsets partition, TxnOffsetCommit
# version) -> NONE, or the error for every partition of the request.
VerifyTxnOffsetCommit = Callable[[str, int, int, TopicPartition, int], Awaitable[int]]


class GroupCoordinatorDriver:
    def __init__(self, config: GroupConfig, replicas: ReplicaDriver, request_timeout_ms: int,
                 now_ms: Callable[[], int], rng: random.Random,
                 verify_txn_offset_commit: VerifyTxnOffsetCommit | None = None) -> None:
        self.config = config
        # KIP-890: the transaction coordinator's word that the offsets partition is in
        # the transaction (the transaction coordinator driver's verify_txn_offset_commit).
        self.verify_txn_offset_commit = verify_txn_offset_commit
        self.replicas = replicas
        self.request_timeout_ms = request_timeout_ms
        self.now_ms = now_ms
        self.core = GroupCoordinator(config, rng)
        self._partition_counts: dict[str, int] = {}
        replicas.subscribe_leadership(self.on_leadership)
        replicas.subscribe_txn_markers(self.on_txn_marker)
        self.shell = CoordinatorShell(CONSUMER_OFFSETS_TOPIC, replicas, request_timeout_ms,
                                      coordinator_appends=True)
        self._loaded: set[int] = set()
        self._task: asyncio.Task | None = None

    def apis(self) -> dict[int, tuple[Any, tuple[int, int]]]:
        """The APIs this coordinator serves: handler and (min, max) version per key."""
        handlers = {
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.SYNC_GROUP: self._simple("handle_sync_group"),
            ApiKey.HEARTBEAT: self._simple("handle_heartbeat"),
            ApiKey.LEAVE_GROUP: self._simple("handle_leave_group"),
            ApiKey.OFFSET_COMMIT: self._offset_commit,
            ApiKey.OFFSET_FETCH: self._simple("handle_offset_fetch"),
            ApiKey.OFFSET_DELETE: self._simple("handle_offset_delete"),
            ApiKey.LIST_GROUPS: self._simple("handle_list_groups"),
            ApiKey.DESCRIBE_GROUPS: self._simple("handle_describe_groups"),
            ApiKey.DELETE_GROUPS: self._simple("handle_delete_groups"),
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self._consumer_group_heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self._simple("handle_consumer_group_describe"),
            ApiKey.TXN_OFFSET_COMMIT: self._txn_offset_commit,
        }
        return {key: (handler, GROUP_VERSIONS[key]) for key, handler in handlers.items()}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll_loop(), name="group-poll")

    async def stop(self) -> None:
        # A flag, not only cancel(): Python 3.11's wait_for swallows a cancellation that
        # races with the awaited event (bpo-42130), and _carry_out sets that event right here.
        self.shell.stopped = True
        self._carry_out(self.core.shutdown(self.now_ms()))
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # ------------------------------------------------------------ effects

    def on_metadata(self, image: MetadataImage) -> None:
        """A new metadata image: groups subscribed to a topic that grew rebalance."""
        counts = {t.name: len(t.partitions) for t in image.topics.by_id.values()}
        self.core.set_topics({t.name: (t.topic_id, len(t.partitions))
                              for t in image.topics.by_id.values()})
        grown = [n for n, c in counts.items() if self._partition_counts.get(n, c) < c]
        self._partition_counts = counts
        if grown:
            self._carry_out(self.core.on_partition_count_change(grown, self.now_ms()))

    def _carry_out(self, effects: list) -> None:
        for effect in effects:
            if isinstance(effect, Completion):
                self.shell.complete(effect.token, effect.response)
            else:
                assert isinstance(effect, Append)
                self.shell.append(effect.partition, effect.batch(), self._append_reporter(effect.append_id))
        self.shell.wake()

    def _append_reporter(self, append_id: int) -> Callable[[int], None]:
        return lambda code: self._carry_out(self.core.on_append_result(append_id, code, self.now_ms()))

    async def _call(self, method: str, *args: Any) -> Any:
        handle = getattr(self.core, method)
        return await self.shell.call(lambda token: self._carry_out(handle(token, *args)))

    def _simple(self, method: str):
        async def handler(req: Any, version: int, client: Any) -> Any:
            return await self._call(method, req, version, self.now_ms())
        return handler

    async def _join_group(self, req: Any, version: int, client: Any) -> Any:
        return await self._call("handle_join_group", req, version, client.client_id or "",
                                client.host, self.now_ms())

    async def _consumer_group_heartbeat(self, req: Any, version: int, client: Any) -> Any:
        return await self._call("handle_consumer_group_heartbeat", req, version,
                                client.client_id or "", client.host, self.now_ms())

    async def _offset_commit(self, req: Any, version: int, client: Any) -> Any:
        # Kafka's KafkaApis refuses commits for topics that do not exist before the
        # coordinator sees them; the core does not know the topics.
        image = self.replicas.image

        def known(name: str, index: int) -> bool:
            topic = image.topics.get(name)
            return topic is not None and index in topic.partitions
        unknown = [(t.name, p.partition_index) for t in req.topics for p in t.partitions
                   if not known(t.name, p.partition_index)]
        if not unknown:
            return await self._call("handle_offset_commit", req, version, self.now_ms())
        cls = messages.OffsetCommitResponse
        req_cls = messages.OffsetCommitRequest
        known_topics = [req_cls.OffsetCommitRequestTopic(name=t.name, partitions=parts)
                        for t in req.topics
                        for parts in [[p for p in t.partitions if known(t.name, p.partition_index)]]
                        if parts]
        answered: dict[str, list] = {}
        if known_topics:
            resp = await self._call("handle_offset_commit",
                                    dataclasses.replace(req, topics=known_topics),
                                    version, self.now_ms())
            for t in resp.topics:
                answered.setdefault(t.name, []).extend(t.partitions)
            throttle_time_ms = resp.throttle_time_ms
        else:
            throttle_time_ms = 0
        for name, index in unknown:
            answered.setdefault(name, []).append(cls.OffsetCommitResponsePartition(
                partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return cls(throttle_time_ms=throttle_time_ms, topics=[
            cls.OffsetCommitResponseTopic(name=n, partitions=ps) for n, ps in answered.items()])

    async def _txn_offset_commit(self, req: Any, version: int, client: Any) -> Any:
        # As OffsetCommit: partitions of unknown topics are refused before the core
        # (Kafka's KafkaApis.handleTxnOffsetCommitRequest).
        image = self.replicas.image

        def known(name: str, index: int) -> bool:
            topic = image.topics.get(name)
            return topic is not None and index in topic.partitions
        cls = messages.TxnOffsetCommitResponse
        req_cls = messages.TxnOffsetCommitRequest
        unknown = [(t.name, p.partition_index) for t in req.topics for p in t.partitions
                   if not known(t.name, p.partition_index)]
        known_topics = [req_cls.TxnOffsetCommitRequestTopic(name=t.name, partitions=parts)
                        for t in req.topics
                        for parts in [[p for p in t.partitions if known(t.name, p.partition_index)]]
                        if parts]
        answered: dict[str, list] = {}
        if known_topics:
            error = await self._verify_txn_offset_commit(req, version)
            if error != ErrorCode.NONE:
                for t in known_topics:
                    answered.setdefault(t.name, []).extend(
                        cls.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                             error_code=error)
                        for p in t.partitions)
            else:
                # No await between a positive verification and the core's append.
                resp = await self._call("handle_txn_offset_commit",
                                        dataclasses.replace(req, topics=known_topics) if unknown
                                        else req, version, self.now_ms())
                if not unknown:
                    return resp
                for t in resp.topics:
                    answered.setdefault(t.name, []).extend(t.partitions)
        for name, index in unknown:
            answered.setdefault(name, []).append(cls.TxnOffsetCommitResponsePartition(
                partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return cls(topics=[cls.TxnOffsetCommitResponseTopic(name=n, partitions=ps)
                           for n, ps in answered.items()])

    async def _verify_txn_offset_commit(self, req: Any, version: int) -> int:
        """Kafka 3.8+ (KIP-890): the transaction coordinator must have the group's offsets
        partition in the transaction before pending offsets are written there."""
        if self.verify_txn_offset_commit is None or not req.group_id \
                or not req.transactional_id:
            return ErrorCode.NONE       # the core answers an invalid group id
        offsets_tp = TopicPartition(CONSUMER_OFFSETS_TOPIC, self.core.partition_for(req.group_id))
        return await self.verify_txn_offset_commit(
            req.transactional_id, req.producer_id, req.producer_epoch, offsets_tp, version)

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        """Contract with the partition log (ReplicaDriver.subscribe_txn_markers): called
        synchronously right after a COMMIT/ABORT marker is appended on this leader."""
        if tp.topic != CONSUMER_OFFSETS_TOPIC:
            return
        self._carry_out(self.core.on_txn_marker(tp.partition, producer_id, committed,
                                                self.now_ms()))

    async def _poll_loop(self) -> None:
        await self.shell.poll_forever(lambda: self.core.poll(self.now_ms()), self._carry_out)

    # ------------------------------------------------------------ leadership

    def on_leadership(self, tp: TopicPartition, leader: bool) -> None:
        if tp.topic != CONSUMER_OFFSETS_TOPIC or tp.partition >= self.config.offsets_topic_num_partitions:
            return
        p = tp.partition
        if leader and p not in self._loaded:
            self._loaded.add(p)
            self.core.begin_load(p)
            asyncio.get_running_loop().call_soon(self._load, tp)
        elif not leader and p in self._loaded:
            self._loaded.discard(p)
            self._carry_out(self.core.unload_partition(p, self.now_ms()))

    def _load(self, tp: TopicPartition) -> None:
        p = tp.partition
        loader = CoordinatorLoader()
        if p not in self._loaded or not self.shell.replay_log(p, loader.replay_batches):
            return
        log.info("%s: loaded %d group records", tp, loader.records_replayed)
        self._carry_out(self.core.complete_load(p, loader.image, self.now_ms()))
