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
import itertools
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from broker.group.coordinator import Append, Completion, GroupConfig, GroupCoordinator
from broker.group.records import CONSUMER_OFFSETS_TOPIC, CoordinatorLoader, partition_for_group
from broker.replica.partition import Role, TopicPartition
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import RecordError

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.replica_manager import HostedPartition

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
}
KEY_TYPE_GROUP = 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupCoordinatorDriver:
    def __init__(self, broker: "Broker", config: GroupConfig) -> None:
        self.broker = broker
        self.config = config
        self.core = GroupCoordinator(config, random.Random())
        self._tokens = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self._append_chains: dict[int, asyncio.Future | None] = {}
        self._loaded: set[int] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._creating = False
        self._stopped = False

    def install(self) -> None:
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
        }
        self.broker.extra_handlers.update(handlers)
        self.broker.extra_versions.update(GROUP_VERSIONS)
        self.broker.replicas.leadership_listeners.append(self.on_leadership)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll_loop(), name="group-poll")

    async def stop(self) -> None:
        # A flag, not only cancel(): Python 3.11's wait_for swallows a cancellation that
        # races with the awaited event (bpo-42130), and _run sets that event right here.
        self._stopped = True
        self._run(self.core.shutdown(_now_ms()))
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # ------------------------------------------------------------ effects

    def _run(self, effects: list) -> None:
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
        replicas = self.broker.replicas
        result, required = replicas.append(tp, bytearray(append.batch()), -1, _now_ms())
        previous = self._append_chains.get(append.partition)
        done = asyncio.get_running_loop().create_future()
        self._append_chains[append.partition] = done

        async def report() -> None:
            code = result.error_code
            if code == ErrorCode.NONE and required is not None:
                code = await replicas.wait_for_replication(tp, required, self.broker.config.request_timeout_ms)
            if previous is not None and code == ErrorCode.NONE:
                await previous          # successes are reported in append order
            self._run(self.core.on_append_result(append.append_id, code, _now_ms()))
            done.set_result(None)
        asyncio.get_running_loop().create_task(report())

    async def _call(self, method: str, *args: Any) -> Any:
        token = next(self._tokens)
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[token] = waiter
        self._run(getattr(self.core, method)(token, *args))
        return await waiter

    def _simple(self, method: str):
        async def handler(req: Any, version: int, client: Any) -> Any:
            return await self._call(method, req, version, _now_ms())
        return handler

    async def _join_group(self, req: Any, version: int, client: Any) -> Any:
        return await self._call("handle_join_group", req, version, client.client_id or "",
                                client.host, _now_ms())

    async def _offset_commit(self, req: Any, version: int, client: Any) -> Any:
        # Kafka's KafkaApis refuses commits for topics that do not exist before the
        # coordinator sees them; the core does not know the topics.
        image = self.broker.replicas.image
        unknown = [(t, p) for t in req.topics for p in t.partitions
                   if image.topics.get(t.name) is None
                   or p.partition_index not in image.topics.get(t.name).partitions]
        if not unknown:
            return await self._call("handle_offset_commit", req, version, _now_ms())
        known_topics = []
        for t in req.topics:
            parts = [p for p in t.partitions if (t, p) not in unknown]
            if parts:
                known_topics.append(type(t)(name=t.name, partitions=parts))
        cls = messages.OffsetCommitResponse
        resp = cls()
        if known_topics:
            req.topics = known_topics
            resp = await self._call("handle_offset_commit", req, version, _now_ms())
        by_name = {t.name: t for t in resp.topics}
        for t, p in unknown:
            entry = by_name.get(t.name)
            if entry is None:
                entry = by_name[t.name] = cls.OffsetCommitResponseTopic(name=t.name)
                resp.topics.append(entry)
            entry.partitions.append(cls.OffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return resp

    async def _poll_loop(self) -> None:
        while not self._stopped:
            effects, wait_ms = self.core.poll(_now_ms())
            self._wakeup.clear()
            self._run(effects)
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), max(0.01, min(wait_ms, 1000) / 1000))
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------ leadership

    def on_leadership(self, hosted: "HostedPartition") -> None:
        if hosted.tp.topic != CONSUMER_OFFSETS_TOPIC:
            return
        p = hosted.tp.partition
        if p >= self.config.offsets_topic_num_partitions:
            return
        leader = hosted.replica.role is Role.LEADER
        if leader and p not in self._loaded:
            self._loaded.add(p)
            self.core.begin_load(p)
            asyncio.get_running_loop().call_soon(self._load, hosted)
        elif not leader and p in self._loaded:
            self._loaded.discard(p)
            self._run(self.core.unload_partition(p, _now_ms()))

    def _load(self, hosted: "HostedPartition") -> None:
        p = hosted.tp.partition
        if p not in self._loaded:
            return
        loader = CoordinatorLoader()
        plog = hosted.log
        offset = plog.log_start_offset
        try:
            while offset < plog.log_end_offset:
                result = plog.read(offset, 8 * 1024 * 1024, plog.log_end_offset)
                if result.error_code != ErrorCode.NONE or result.records.is_empty:
                    break
                loader.replay_batches(plog.read_records_bytes(result.records))
                offset = result.records.last_offset + 1
        except (RecordError, ValueError) as e:
            log.error("%s: loading groups failed at offset %d: %s", hosted.tp, offset, e)
        log.info("%s: loaded %d group records", hosted.tp, loader.records_replayed)
        self._run(self.core.complete_load(p, loader.image, _now_ms()))

    # ------------------------------------------------------------ FindCoordinator

    async def handle_find_coordinator(self, req: Any, version: int, client: Any) -> Any:
        cls = messages.FindCoordinatorResponse
        keys = req.coordinator_keys if version >= 4 else [req.key]
        answers = []
        for key in keys:
            if req.key_type != KEY_TYPE_GROUP:
                answers.append((key, ErrorCode.INVALID_REQUEST, "only group coordinators exist", -1, "", -1))
                continue
            answers.append((key, *await self._coordinator_for(key)))
        if version >= 4:
            return cls(coordinators=[cls.Coordinator(key=k, node_id=n, host=h, port=pt, error_code=c,
                                                     error_message=m)
                                     for k, c, m, n, h, pt in answers])
        _, code, message, node, host, port = answers[0]
        return cls(error_code=code, error_message=message, node_id=node, host=host, port=port)

    async def _coordinator_for(self, group_id: str) -> tuple[int, str | None, int, str, int]:
        image = self.broker.replicas.image
        topic = image.topics.get(CONSUMER_OFFSETS_TOPIC)
        if topic is None:
            await self._create_offsets_topic()
            image = self.broker.replicas.image
            topic = image.topics.get(CONSUMER_OFFSETS_TOPIC)
            if topic is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, "creating __consumer_offsets", -1, "", -1
        partition = partition_for_group(group_id, len(topic.partitions))
        reg = topic.partitions.get(partition)
        if reg is None or reg.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "no leader yet", -1, "", -1
        broker = image.cluster.get(reg.leader)
        endpoint = None if broker is None else (broker.endpoint(self.broker.config.listener_name)
                                                or (broker.endpoints[0] if broker.endpoints else None))
        if endpoint is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "coordinator has no endpoint", -1, "", -1
        return ErrorCode.NONE, None, reg.leader, endpoint.host, endpoint.port

    async def _create_offsets_topic(self) -> None:
        if self._creating:
            await self.broker.wait_for_topics([CONSUMER_OFFSETS_TOPIC], 5.0)
            return
        self._creating = True
        try:
            live = sum(1 for b in self.broker.replicas.image.cluster.brokers.values() if not b.fenced)
            rf = max(1, min(self.broker.config.offsets_topic_replication_factor, live))
            cls = messages.CreateTopicsRequest
            req = cls(topics=[cls.CreatableTopic(
                name=CONSUMER_OFFSETS_TOPIC, num_partitions=self.config.offsets_topic_num_partitions,
                replication_factor=rf, configs=[
                    cls.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                    cls.CreatableTopicConfig(name="segment.bytes", value=str(100 * 1024 * 1024))])],
                timeout_ms=10_000)
            try:
                await self.broker.controller.request(ApiKey.CREATE_TOPICS, (2, 7), req, timeout_s=10)
            except ConnectionError as e:
                log.warning("creating %s failed: %s", CONSUMER_OFFSETS_TOPIC, e)
                return
            await self.broker.wait_for_topics([CONSUMER_OFFSETS_TOPIC], 10.0)
        finally:
            self._creating = False
