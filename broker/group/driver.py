"""The group coordinator's asyncio shell: the only place the pure core meets the broker.

- requests (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
  OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups) become core inputs
  under a token; the core's ``Completion`` resolves the request's future, now or later;
- ``Append`` effects are written to ``__consumer_offsets-<p>`` through the replica manager
  with acks=all (the same durability as user data), and their outcome is reported back
  in append order per partition, as the core requires;
- leadership of ``__consumer_offsets`` partitions (from the metadata image) loads a
  partition's groups by replaying its log from the start to the log end offset (what a
  new leader holds becomes committed as its followers catch up), or unloads them;
- a timer calls ``poll`` when the core's next deadline is due;
- FindCoordinator creates ``__consumer_offsets`` on first use (``offsets.topic.num.partitions``
  partitions, ``offsets.topic.replication.factor`` capped by the live brokers), answering
  COORDINATOR_NOT_AVAILABLE until its leaders are known.
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import random
from typing import Any, Callable, Hashable

from broker.auto_topic_creation import AutoTopicCreationManager
from broker.group.coordinator import Append, Completion, GroupConfig, GroupCoordinator
from broker.group.records import CONSUMER_OFFSETS_TOPIC, CoordinatorLoader, partition_for_group
from broker.replica_driver import ReplicaDriver
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import RecordError
from clients.types import TopicPartition
from metadata_log.image import MetadataImage

log = logging.getLogger(__name__)

__all__ = ["GROUP_VERSIONS", "GroupCoordinatorDriver"]

GROUP_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.FIND_COORDINATOR: (0, 6),
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
}
KEY_TYPE_GROUP = 0


class GroupCoordinatorDriver:
    def __init__(self, config: GroupConfig, replicas: ReplicaDriver,
                 topic_creation: AutoTopicCreationManager, listener_name: str,
                 offsets_topic_replication_factor: int, request_timeout_ms: int,
                 now_ms: Callable[[], int], rng: random.Random) -> None:
        self.config = config
        self.replicas = replicas
        self.topic_creation = topic_creation
        self.listener_name = listener_name
        self.offsets_topic_replication_factor = offsets_topic_replication_factor
        self.request_timeout_ms = request_timeout_ms
        self.now_ms = now_ms
        self.core = GroupCoordinator(config, rng)
        self._partition_counts: dict[str, int] = {}
        replicas.subscribe_leadership(self.on_leadership)
        self._tokens = itertools.count(1)
        self._waiting: dict[Hashable, asyncio.Future] = {}
        self._append_chains: dict[int, asyncio.Future | None] = {}
        self._loaded: set[int] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._creating = False
        self._stopped = False

    def apis(self) -> dict[int, tuple[Any, tuple[int, int]]]:
        """The APIs this coordinator serves: handler and (min, max) version per key."""
        handlers = {
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
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
        }
        return {key: (handler, GROUP_VERSIONS[key]) for key, handler in handlers.items()}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll_loop(), name="group-poll")

    async def stop(self) -> None:
        # A flag, not only cancel(): Python 3.11's wait_for swallows a cancellation that
        # races with the awaited event (bpo-42130), and _carry_out sets that event right here.
        self._stopped = True
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
                waiter = self._waiting.pop(effect.token, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(effect.response)
            else:
                assert isinstance(effect, Append)
                self._start_append(effect)
        self._wakeup.set()

    def _start_append(self, append: Append) -> None:
        tp = TopicPartition(CONSUMER_OFFSETS_TOPIC, append.partition)
        replicas = self.replicas
        result = replicas.append(tp, bytearray(append.batch()), -1)
        required = result.required_offset
        previous = self._append_chains.get(append.partition)
        done = asyncio.get_running_loop().create_future()
        self._append_chains[append.partition] = done

        async def report() -> None:
            code = result.error_code
            if code == ErrorCode.NONE and required is not None:
                code = await replicas.await_replication(tp, required, self.request_timeout_ms)
            if previous is not None and code == ErrorCode.NONE:
                await previous          # successes are reported in append order
            self._carry_out(self.core.on_append_result(append.append_id, code, self.now_ms()))
            done.set_result(None)
        asyncio.get_running_loop().create_task(report())

    async def _call(self, method: str, *args: Any) -> Any:
        token = next(self._tokens)
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[token] = waiter
        self._carry_out(getattr(self.core, method)(token, *args))
        return await waiter

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

    async def _poll_loop(self) -> None:
        while not self._stopped:
            effects, wait_ms = self.core.poll(self.now_ms())
            self._wakeup.clear()
            self._carry_out(effects)
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), max(0.01, min(wait_ms, 1000) / 1000))
            except asyncio.TimeoutError:
                pass

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
        plog = self.replicas.local_log(tp)
        if p not in self._loaded or plog is None:
            return
        loader = CoordinatorLoader()
        offset = plog.log_start_offset
        try:
            while offset < plog.log_end_offset:
                result = plog.read(offset, 8 * 1024 * 1024, plog.log_end_offset)
                if result.error_code != ErrorCode.NONE or result.records.is_empty:
                    break
                loader.replay_batches(plog.read_records_bytes(result.records))
                offset = result.records.last_offset + 1
        except (RecordError, ValueError) as e:
            log.error("%s: loading groups failed at offset %d: %s", tp, offset, e)
        log.info("%s: loaded %d group records", tp, loader.records_replayed)
        self._carry_out(self.core.complete_load(p, loader.image, self.now_ms()))

    # ------------------------------------------------------------ FindCoordinator

    async def handle_find_coordinator(self, req: Any, version: int, client: Any) -> Any:
        cls = messages.FindCoordinatorResponse
        keys = req.coordinator_keys if version >= 4 else [req.key]
        answers: list[tuple[Any, int, str | None, int, str, int]] = []
        for key in keys:
            if req.key_type != KEY_TYPE_GROUP:
                answers.append((key, ErrorCode.INVALID_REQUEST, "only group coordinators exist", -1, "", -1))
                continue
            answers.append((key, *await self._coordinator_for(
                key, getattr(client, "listener_name", self.listener_name))))
        if version >= 4:
            return cls(coordinators=[cls.Coordinator(key=k, node_id=n, host=h, port=pt, error_code=c,
                                                     error_message=m)
                                     for k, c, m, n, h, pt in answers])
        _, code, message, node, host, port = answers[0]
        return cls(error_code=code, error_message=message, node_id=node, host=host, port=port)

    async def _coordinator_for(self, group_id: str, listener_name: str
                               ) -> tuple[int, str | None, int, str, int]:
        """The coordinator's endpoint on ``listener_name`` (the one the request came in on)."""
        image = self.replicas.image
        topic = image.topics.get(CONSUMER_OFFSETS_TOPIC)
        if topic is None:
            await self._create_offsets_topic()
            image = self.replicas.image
            topic = image.topics.get(CONSUMER_OFFSETS_TOPIC)
            if topic is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, "creating __consumer_offsets", -1, "", -1
        partition = partition_for_group(group_id, len(topic.partitions))
        reg = topic.partitions.get(partition)
        if reg is None or reg.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "no leader yet", -1, "", -1
        broker = image.cluster.get(reg.leader)
        endpoint = None if broker is None else (broker.endpoint(listener_name)
                                                or (broker.endpoints[0] if broker.endpoints else None))
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "coordinator has no endpoint", -1, "", -1
        return ErrorCode.NONE, None, reg.leader, endpoint.host, endpoint.port

    async def _create_offsets_topic(self) -> None:
        if self._creating:
            await self.topic_creation.wait_for_topics([CONSUMER_OFFSETS_TOPIC], 5.0)
            return
        self._creating = True
        try:
            rf = max(1, min(self.offsets_topic_replication_factor, self.topic_creation.live_brokers()))
            cls = messages.CreateTopicsRequest
            await self.topic_creation.create([cls.CreatableTopic(
                name=CONSUMER_OFFSETS_TOPIC, num_partitions=self.config.offsets_topic_num_partitions,
                replication_factor=rf, configs=[
                    cls.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                    cls.CreatableTopicConfig(name="segment.bytes", value=str(100 * 1024 * 1024))])],
                timeout_s=20.0)
        finally:
            self._creating = False
