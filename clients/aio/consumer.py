"""The asyncio consumer: the shell over the group membership machine and the fetch planner.

Three kinds of work run on the event loop:

* the application's calls (``poll``, ``commit``, ``seek``...), which read and move
  positions in ``SubscriptionState`` and hand out buffered records;
* one fetch task per leader at a time (``_fetch``): requests planned by
  ``clients._core.fetcher.plan_fetches`` for partitions with nothing buffered, so the
  next batch is on its way while the application works through the last (prefetch);
* in a group, the coordinator task (``_group_loop``) carrying out what
  ``clients._core.membership.Membership`` asks for: FindCoordinator, JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup. Heartbeats go on while the application is busy, as the Java
  client's heartbeat thread does, until ``max.poll.interval.ms`` passes without a poll.

Rebalance listener calls never run on the coordinator task: they are queued and run
inside the application's next ``poll()`` (as in the Java client, where they run in the
polling thread), so a listener may ``await consumer.commit(...)``. A JoinGroup waits until
every listener call queued before it has run, because a member that revokes must commit
before the partitions go to someone else.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from clients._core.assignors import assignor_for
from clients._core.config import ClientConfig, parse_config
from clients._core.fetcher import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED, FetchAction, ResetStrategy,
    SubscriptionState, handle_partition_response, plan_fetches,
)
from clients._core.membership import (
    Fatal, FindCoordinator, Membership, MembershipConfig, NeedAssignment, PartitionsAssigned,
    PartitionsLost, PartitionsRevoked, SendHeartbeat, SendJoinGroup, SendLeaveGroup, SendSyncGroup,
)
from clients.aio._cluster import Cluster, dedicated_node
from clients.errors import (
    ClientClosedError, CommitFailedError, IllegalStateError, KafkaApiError, KafkaTimeoutError,
    OffsetOutOfRangeError, UnsupportedVersionError, for_code,
)
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients._core.metadata import BrokerMetadata
from clients.protocol.fetch_session import TOPIC_ID_FETCH_VERSION, ZERO_TOPIC_ID, FetchSessionHandler
from clients.types import NO_LEADER_EPOCH, ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

__all__ = ["Consumer", "ConsumerRebalanceListener"]

log = logging.getLogger(__name__)

LIST_OFFSETS_VERSIONS = (1, 10)
OFFSET_FETCH_VERSIONS = (1, 7)       # v8+ batch several groups
OFFSET_COMMIT_VERSIONS = (2, 8)      # v9 is for the new (KIP-848) group protocol
LEADER_WAIT_PER_ATTEMPT_MS = 500    # a few metadata refreshes per offsets lookup attempt
OFFSET_FOR_LEADER_EPOCH_VERSIONS = (3, 4)   # v3+: replica_id, so a consumer can ask
GROUP_RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                   ErrorCode.NOT_COORDINATOR, ErrorCode.UNSTABLE_OFFSET_COMMIT, ErrorCode.REQUEST_TIMED_OUT}
_COMMIT_FENCED = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}


class ConsumerRebalanceListener:
    """Override what you need; each method may be a coroutine function. The consumer is
    passed so the listener can commit (Kafka's ConsumerRebalanceListener)."""

    def on_partitions_revoked(self, consumer: "Consumer", partitions: set[TopicPartition]) -> Any:
        pass

    def on_partitions_assigned(self, consumer: "Consumer", partitions: set[TopicPartition]) -> Any:
        pass

    def on_partitions_lost(self, consumer: "Consumer", partitions: set[TopicPartition]) -> Any:
        # Kafka's default: treat as revoked (the member must stop using them either way).
        return self.on_partitions_revoked(consumer, partitions)


@dataclass(slots=True)
class _Buffered:
    """Records from one fetch of one partition, handed out from ``index`` on."""
    tp: TopicPartition
    records: list
    index: int
    next_offset: int          # the position once all are handed out
    epoch: int


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class Consumer:
    """``Consumer({"bootstrap.servers": ..., "group.id": ...})``; ``await start()`` (or
    ``async with``), then ``subscribe`` or ``assign`` and ``poll``."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None, **props: Any) -> None:
        if isinstance(config, ClientConfig):
            self.config = config
        else:
            merged = dict(config or {})
            merged.update({k.replace("_", "."): v for k, v in props.items()})
            self.config = parse_config("consumer", merged)
        c = self.config
        self._cluster = Cluster(c)
        self._group_id: str | None = c["group.id"]
        self._subs = SubscriptionState(ResetStrategy(c["auto.offset.reset"]))
        self._isolation = READ_COMMITTED if c["isolation.level"] == "read_committed" else READ_UNCOMMITTED
        self._key_deserializer: Callable | None = c["key.deserializer"]
        self._value_deserializer: Callable | None = c["value.deserializer"]
        self._auto_commit = bool(c["enable.auto.commit"]) and self._group_id is not None
        self._auto_commit_interval_ms = c["auto.commit.interval.ms"]
        self._mode: str | None = None           # "subscribe" | "pattern" | "assign"
        self._topics: frozenset[str] = frozenset()
        self._pattern: re.Pattern | None = None
        self._listener: Any = None
        self._membership: Membership | None = None
        self._buffers: dict[TopicPartition, _Buffered] = {}
        self._fetching: dict[int, asyncio.Task] = {}
        self._tag_filters: dict[str, frozenset[bytes]] = {}     # topic -> wanted tags
        # A fetch session per broker (KIP-227): an idle fetch names no partition.
        self._fetch_sessions: dict[int, FetchSessionHandler] = {}
        self._data = asyncio.Event() if _has_loop() else None
        self._group_wakeup: asyncio.Event | None = None
        self._group_task: asyncio.Task | None = None
        # (effect, done, the Membership that handed it out)
        self._listener_calls: list[tuple[Any, asyncio.Future, Membership]] = []
        self._group_tasks: set[asyncio.Task] = set()
        self._fatal: BaseException | None = None
        self._next_auto_commit_ms = 0
        self._commit_tasks: set[asyncio.Task] = set()
        self._metadata_refresh: asyncio.Task | None = None
        self._validating: asyncio.Task | None = None
        self.validations = 0                # positions checked with a new leader (KIP-320)
        self.log_truncations = 0            # ... and moved back because its log ends earlier
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._started:
            return
        self._data = asyncio.Event()
        self._group_wakeup = asyncio.Event()
        await self._cluster.start()
        self._started = True
        self._next_auto_commit_ms = self._now() + self._auto_commit_interval_ms
        if self._mode in ("subscribe", "pattern"):
            self._start_group()

    async def __aenter__(self) -> "Consumer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout_ms: int | None = None) -> None:
        """Commit (with auto-commit on), revoke, leave the group, close connections."""
        if self._closed:
            return
        timeout_s = (timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"]) / 1000
        try:
            if self._started and self._group_id is not None:
                if self._auto_commit and self._subs.partitions:
                    try:
                        await asyncio.wait_for(self.commit(), timeout_s)
                    except (KafkaApiError, KafkaTimeoutError, asyncio.TimeoutError, ConnectionError,
                            CommitFailedError) as e:
                        log.warning("final auto-commit failed: %s", e)
                if self._membership is not None:
                    await self._leave_group(timeout_s)
        finally:
            self._closed = True
            for t in [*self._fetching.values(), *self._group_tasks, *self._commit_tasks,
                      *([self._group_task] if self._group_task else []),
                      *([self._validating] if self._validating else []),
                      *([self._metadata_refresh] if self._metadata_refresh else [])]:
                t.cancel()
            for t in [*self._fetching.values(), *self._group_tasks, *self._commit_tasks,
                      *([self._group_task] if self._group_task else [])]:
                try:
                    await t
                except BaseException:  # noqa: BLE001 -- cancelled on purpose
                    pass
            for _, fut, _m in self._listener_calls:
                if not fut.done():
                    fut.cancel()
            await self._cluster.close()

    async def _leave_group(self, timeout_s: float) -> None:
        m = self._membership
        assert m is not None
        # Listener calls still queued run first (they may commit), then the final revoke.
        await self._run_listener_calls()
        for effect in m.leave(self._now()):
            if isinstance(effect, (PartitionsRevoked, PartitionsLost)):
                try:
                    await self._apply_listener_call(effect)
                finally:
                    m.listener_done(self._now())
            elif isinstance(effect, SendLeaveGroup) and m.coordinator is not None:
                try:
                    _, resp = await asyncio.wait_for(
                        self._cluster.request(dedicated_node(m.coordinator), ApiKey.LEAVE_GROUP, effect.request),
                        timeout_s)
                    m.handle_leave_group_response(resp, self._now())
                except (ConnectionError, asyncio.TimeoutError, KafkaApiError) as e:
                    log.info("LeaveGroup failed (the session timeout will remove us): %s", e)

    # ------------------------------------------------------------------ subscriptions

    def subscribe(self, topics: Iterable[str] | str | re.Pattern, listener: Any = None) -> None:
        """Join the group for these topics, or for every topic matching a pattern (a
        ``re.Pattern``, or a string starting with ``^``, as librdkafka takes it)."""
        self._check_open()
        if self._group_id is None:
            raise IllegalStateError("subscribe() needs a group.id; use assign() without a group")
        if self._mode == "assign":
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        if isinstance(topics, str) and topics.startswith("^"):
            topics = re.compile(topics)
        if isinstance(topics, re.Pattern):
            self._mode, self._pattern, self._topics = "pattern", topics, frozenset()
        else:
            names = frozenset([topics] if isinstance(topics, str) else topics)
            for t in names:
                if not t or not isinstance(t, str):
                    raise ValueError(f"invalid topic name {t!r} in subscribe()")
            self._mode, self._pattern, self._topics = "subscribe", None, names
            self._cluster.add_topics(names)
        self._listener = listener
        if self._membership is not None:
            self._membership.subscribe(self._topics)
            self._wake_group()
        elif self._started:
            self._start_group()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read these partitions, with no group membership (the standalone consumer)."""
        self._check_open()
        if self._mode in ("subscribe", "pattern"):
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        tps = [TopicPartition(*tp) for tp in partitions]
        self._mode = "assign" if tps else None
        self._subs.assign(tps)
        self._cluster.add_topics({tp.topic for tp in tps})
        self._drop_buffers(lambda tp: tp not in self._subs.partitions)

    async def unsubscribe(self) -> None:
        if self._membership is not None:
            await self._leave_group(self.config["default.api.timeout.ms"] / 1000)
            if self._group_task is not None:
                self._group_task.cancel()
            self._membership = None
            self._group_task = None
        self._subs.assign([])
        self._drop_buffers(lambda tp: True)
        self._mode, self._topics, self._pattern = None, frozenset(), None

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.partitions)

    def subscription(self) -> set[str]:
        return set(self._topics)

    @property
    def member_id(self) -> str | None:
        return self._membership.member_id if self._membership is not None else None

    @property
    def generation_id(self) -> int:
        return self._membership.generation_id if self._membership is not None else -1

    # ------------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, got {offset} for {tp}")
        tp = TopicPartition(*tp)
        self._subs.seek(tp, offset)
        self._drop_buffers(lambda x: x == tp)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._targets(partitions):
            self._subs.request_reset(tp, ResetStrategy.EARLIEST)
        self._drop_buffers(lambda x: self._subs.partitions.get(x) is not None
                           and self._subs.partitions[x].position is None)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in self._targets(partitions):
            self._subs.request_reset(tp, ResetStrategy.LATEST)
        self._drop_buffers(lambda x: self._subs.partitions.get(x) is not None
                           and self._subs.partitions[x].position is None)

    def _targets(self, partitions: Iterable[TopicPartition] | None) -> list[TopicPartition]:
        tps = list(self._subs.partitions) if partitions is None else [TopicPartition(*tp) for tp in partitions]
        for tp in tps:
            self._subs.state(tp)          # KeyError naming the partition if not assigned
        return tps

    async def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        tp = TopicPartition(*tp)
        s = self._subs.state(tp)
        if s.position is None:
            note: list = []
            await self._with_timeout(self._retrying(self._update_positions, note), timeout_ms, note)
        if s.error is not None:
            raise s.error
        assert s.position is not None
        return s.position

    def set_tag_filter(self, topic: str, tags: Iterable[str] | None) -> None:
        """Read only the records of ``topic`` tagged (``ketch.tag`` header) with one of
        ``tags``; None reads everything again. A Ketch broker drops the others before
        sending (clients/records/tags.py); with any other broker this consumer drops
        them itself. Positions still move past the records left out. It applies to the
        fetches sent after this call (records already buffered are handed out as fetched)."""
        if tags is None:
            self._tag_filters.pop(topic, None)
        else:
            self._tag_filters[topic] = frozenset(t.encode() if isinstance(t, str) else bytes(t) for t in tags)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._subs.state(TopicPartition(*tp)).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._subs.state(TopicPartition(*tp)).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._subs.partitions.items() if s.paused}

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's place in its group, for a transactional producer's
        ``send_offsets_to_transaction`` (KIP-447): the group coordinator refuses the
        offsets if the member has left this generation (Kafka's groupMetadata())."""
        self._need_group("group_metadata()")
        assert self._group_id is not None
        instance_id = self.config["group.instance.id"]
        if self._membership is None or self._mode == "assign":
            return ConsumerGroupMetadata(self._group_id, group_instance_id=instance_id)
        generation, member_id = self._membership.commit_generation()
        return ConsumerGroupMetadata(self._group_id, generation, member_id or "", instance_id)

    def highwater(self, tp: TopicPartition) -> int | None:
        s = self._subs.partitions.get(TopicPartition(*tp))
        return None if s is None or s.high_watermark < 0 else s.high_watermark

    # ------------------------------------------------------------------ poll

    async def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records of assigned partitions, in offset order per partition, at most
        ``max_records`` (``max.poll.records``). Waits up to ``timeout_ms`` for some.
        Rebalance listener calls run here first."""
        self._check_open()
        if not self._started:
            await self.start()
        if self._mode is None:
            raise IllegalStateError("poll() needs subscribe() or assign() first")
        max_records = max_records or self.config["max.poll.records"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        if self._membership is not None:
            self._membership.note_poll(self._now())
            self._wake_group()
        assert self._data is not None
        while True:
            self._data.clear()          # anything that completes from here on wakes the wait
            if self._fatal is not None:
                raise self._fatal
            await self._run_listener_calls()
            await self._maybe_auto_commit()
            if self._subs.needs_committed() or self._subs.needs_reset():
                try:
                    # bounded by this poll's timeout: an unknown topic must not hold poll()
                    await asyncio.wait_for(self._update_positions(),
                                           max(deadline - loop.time(), self.config["retry.backoff.ms"] / 1000))
                except asyncio.TimeoutError:
                    pass
                except (ConnectionError, KafkaApiError) as e:
                    if isinstance(e, KafkaApiError) and not e.retriable:
                        raise
                    log.debug("position lookup failed, will retry: %s", e)
            self._raise_partition_errors()
            records = self._drain(max_records)
            self._send_fetches()
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            try:
                await asyncio.wait_for(self._data.wait(), min(remaining, 0.1 if self._needs_attention() else remaining))
            except asyncio.TimeoutError:
                pass

    def __aiter__(self) -> "Consumer":
        return self

    async def __anext__(self) -> ConsumerRecord:
        while True:
            if self._closed:
                raise StopAsyncIteration
            records = await self.poll(timeout_ms=1000, max_records=1)
            if records:
                return records[0]

    def _needs_attention(self) -> bool:
        # positions to look up or leaders to find: poll again soon rather than sleep
        return bool(self._subs.needs_committed() or self._subs.needs_reset() or self._listener_calls
                    or any(s.position is not None and not s.fetch_in_flight for s in self._subs.partitions.values()))

    def _raise_partition_errors(self) -> None:
        for tp, s in self._subs.partitions.items():
            if s.error is not None and tp not in self._buffers:
                error, s.error = s.error, None
                raise error

    def _drain(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for tp in list(self._buffers):
            if len(out) >= max_records:
                break
            buf = self._buffers[tp]
            s = self._subs.partitions.get(tp)
            if s is None or s.paused:
                if s is None:
                    del self._buffers[tp]
                continue
            take = buf.records[buf.index: buf.index + max_records - len(out)]
            buf.index += len(take)
            if self._key_deserializer is not None or self._value_deserializer is not None:
                take = [self._deserialize(r) for r in take]
            out.extend(take)
            if buf.index >= len(buf.records):
                del self._buffers[tp]
                s.position, s.position_epoch = buf.next_offset, buf.epoch
            else:
                s.position = take[-1].offset + 1
                s.position_epoch = buf.epoch
        return out

    def _deserialize(self, r: ConsumerRecord) -> ConsumerRecord:
        kd, vd = self._key_deserializer, self._value_deserializer
        try:
            key = kd(r.key) if kd is not None and r.key is not None else r.key
            value = vd(r.value) if vd is not None and r.value is not None else r.value
        except Exception as e:  # noqa: BLE001 -- named and re-raised as Kafka does
            from clients.errors import SerializationError
            raise SerializationError(f"deserializing the record at {r.topic}-{r.partition}@{r.offset}: {e}") from e
        return ConsumerRecord(r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type, key, value,
                              r.headers, r.leader_epoch, r.serialized_key_size, r.serialized_value_size)

    def _drop_buffers(self, which: Callable[[TopicPartition], bool]) -> None:
        for tp in [tp for tp in self._buffers if which(tp)]:
            del self._buffers[tp]

    # ------------------------------------------------------------------ fetching

    def _send_fetches(self) -> None:
        meta = self._cluster.metadata
        leaders: dict[TopicPartition, tuple[int, int]] = {}
        missing: set[str] = set()
        validate: dict[TopicPartition, tuple[int, int]] = {}
        for tp in self._subs.fetchable():
            known = meta.leader_for(tp)
            if known is None:
                missing.add(tp.topic)
            elif self._subs.maybe_validate(tp, known[1]):
                validate[tp] = known
            else:
                leaders[tp] = known
        if missing:
            self._refresh_metadata_soon(missing)
        if validate and (self._validating is None or self._validating.done()):
            self._validating = asyncio.get_running_loop().create_task(self._validate_positions(validate))
        c = self.config
        for node, _ in leaders.values():
            self._fetch_sessions.setdefault(node, FetchSessionHandler())
        for plan in plan_fetches(self._subs, leaders, lambda tp: tp in self._buffers,
                                 max_wait_ms=c["fetch.max.wait.ms"], min_bytes=c["fetch.min.bytes"],
                                 max_bytes=c["fetch.max.bytes"], partition_max_bytes=c["max.partition.fetch.bytes"],
                                 isolation_level=self._isolation, rack_id=c["client.rack"],
                                 busy_nodes=self._fetching, sessions=self._fetch_sessions,
                                 topic_ids=self._topic_ids(meta, {tp.topic for tp in leaders}),
                                 tag_filters=self._tag_filters):
            for tp, _ in plan.partitions:
                self._subs.partitions[tp].fetch_in_flight = True
            task = asyncio.get_running_loop().create_task(self._fetch(plan))
            self._fetching[plan.node_id] = task

    async def _fetch(self, plan) -> None:
        try:
            timeout_ms = self.config["request.timeout.ms"] + plan.fields["max_wait_ms"]
            session = self._fetch_sessions[plan.node_id]
            try:
                version, resp = await self._cluster.request(plan.node_id, ApiKey.FETCH, plan.request,
                                                            versions=plan.versions, timeout_ms=timeout_ms)
            except BaseException:
                session.reset()         # the broker may or may not have moved the epoch on
                raise
            session.handle_response(resp.session_id, resp.error_code)
            if resp.error_code != ErrorCode.NONE:
                raise for_code(resp.error_code)(f"Fetch from node {plan.node_id}")
            offsets = dict(plan.partitions)
            names = plan.topic_names() if version >= TOPIC_ID_FETCH_VERSION else None
            refresh: set[str] = set()
            moved: dict[TopicPartition, tuple[int, int]] = {}      # KIP-951 (v16+)
            for topic in resp.responses:
                name = topic.topic if names is None else names.get(topic.topic_id)
                if name is None:
                    continue                # an id this fetch did not name
                for data in topic.partitions:
                    tp = TopicPartition(name, data.partition_index)
                    fetch_offset = offsets.get(tp)
                    s = self._subs.partitions.get(tp)
                    if s is None or fetch_offset is None or s.position != fetch_offset or tp in self._buffers:
                        continue            # unassigned or sought meanwhile: stale
                    result = handle_partition_response(tp, fetch_offset, data, isolation_level=self._isolation,
                                                       check_crcs=self.config["check.crcs"],
                                                       tags=self._tag_filters.get(tp.topic))
                    if data.error_code == ErrorCode.NONE:
                        s.high_watermark = data.high_watermark
                        s.last_stable_offset = data.last_stable_offset
                        s.log_start_offset = data.log_start_offset
                    if result.action is FetchAction.RECORDS:
                        if result.records:
                            self._buffers[tp] = _Buffered(tp, result.records, 0, result.next_offset,
                                                          result.last_epoch)
                        elif result.next_offset is not None and result.next_offset > fetch_offset:
                            s.position = result.next_offset    # only control / aborted batches
                    elif result.action is FetchAction.RESET:
                        if self._subs.default_reset is ResetStrategy.NONE:
                            s.error = OffsetOutOfRangeError(
                                f"fetch offset {fetch_offset} is out of range for {tp} and "
                                "auto.offset.reset is none", error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
                        else:
                            self._subs.request_reset(tp)
                    elif result.action in (FetchAction.REFRESH_METADATA, FetchAction.VALIDATE):
                        if data.current_leader.leader_id >= 0:
                            moved[tp] = (data.current_leader.leader_id, data.current_leader.leader_epoch)
                        else:
                            refresh.add(tp.topic)
                    else:
                        s.error = for_code(result.error_code)(f"Fetch of {tp}: {ErrorCode(result.error_code).name}")
            if moved:
                # The answer named the new leaders: fetch from them without waiting for a
                # Metadata round trip (a refresh still follows where one was not named).
                refresh |= self._cluster.update_leaders(moved, [
                    BrokerMetadata(n.node_id, n.host, n.port, n.rack) for n in resp.node_endpoints])
            if refresh:
                self._refresh_metadata_soon(refresh)
        except (ConnectionError, KafkaApiError) as e:
            log.debug("fetch from node %s failed: %s", plan.node_id, e)
            self._refresh_metadata_soon({tp.topic for tp, _ in plan.partitions})
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
        finally:
            for tp, _ in plan.partitions:
                s = self._subs.partitions.get(tp)
                if s is not None:
                    s.fetch_in_flight = False
            if self._fetching.get(plan.node_id) is asyncio.current_task():
                del self._fetching[plan.node_id]
            if self._data is not None:
                self._data.set()

    async def _validate_positions(self, partitions: dict[TopicPartition, tuple[int, int]]) -> None:
        """KIP-320: ask each new leader where our position's epoch ends
        (OffsetForLeaderEpoch); a position past that end was read from a log the new leader
        does not have: move back to the end (or raise with auto.offset.reset=none)."""
        O = messages.OffsetForLeaderEpochRequest
        by_node: dict[int, list[TopicPartition]] = {}
        for tp, (node, _) in partitions.items():
            by_node.setdefault(node, []).append(tp)
        for node, tps in by_node.items():
            topics: dict[str, list] = {}
            for tp in tps:
                s = self._subs.partitions.get(tp)
                if s is None:
                    continue
                topics.setdefault(tp.topic, []).append(O.OffsetForLeaderPartition(
                    partition=tp.partition, current_leader_epoch=partitions[tp][1], leader_epoch=s.position_epoch))
            body = O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()])
            try:
                _, resp = await self._cluster.request(node, ApiKey.OFFSET_FOR_LEADER_EPOCH, body,
                                                      versions=OFFSET_FOR_LEADER_EPOCH_VERSIONS)
            except UnsupportedVersionError:
                for tp in tps:        # a broker without KIP-320: nothing to validate against
                    self._subs.complete_validation(tp, partitions[tp][1], -1, NO_LEADER_EPOCH)
                continue
            except (ConnectionError, KafkaApiError) as e:
                log.debug("OffsetForLeaderEpoch to node %s failed: %s", node, e)
                self._refresh_metadata_soon({tp.topic for tp in tps})
                continue
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, p.partition)
                    if p.error_code != ErrorCode.NONE:
                        self._refresh_metadata_soon({tp.topic})
                        continue
                    position = self._subs.partitions[tp].position if tp in self._subs.partitions else None
                    self.validations += 1
                    if self._subs.complete_validation(tp, partitions[tp][1], p.end_offset, p.leader_epoch):
                        self.log_truncations += 1
                        log.warning("%s: the new leader's log ends at %d, before our position %s: truncated",
                                    tp, p.end_offset, position)
                        self._drop_buffers(lambda x: x == tp)
                        if self._subs.default_reset is ResetStrategy.NONE:
                            self._subs.partitions[tp].error = OffsetOutOfRangeError(
                                f"log truncation on {tp}: the leader's log ends at {p.end_offset}, before "
                                f"the position {position} (auto.offset.reset is none)",
                                error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
        if self._data is not None:
            self._data.set()

    @staticmethod
    def _topic_ids(meta: Any, topics: set[str]) -> dict[str, Any]:
        """The ids of ``topics`` the metadata knows (Fetch v13+ needs them)."""
        out = {}
        for name in topics:
            t = meta.topic(name)
            if t is not None and t.topic_id != ZERO_TOPIC_ID:
                out[name] = t.topic_id
        return out

    def _refresh_metadata_soon(self, topics: set[str]) -> None:
        if self._metadata_refresh is not None and not self._metadata_refresh.done():
            return

        async def refresh() -> None:
            try:
                await self._cluster.refresh_metadata(sorted(topics | set(self._topics)))
            except (ConnectionError, KafkaApiError) as e:
                log.debug("metadata refresh failed: %s", e)
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
            finally:
                if self._data is not None:
                    self._data.set()
        self._metadata_refresh = asyncio.get_running_loop().create_task(refresh())

    # ------------------------------------------------------------------ offsets lookups

    async def _update_positions(self) -> None:
        """Committed offsets for partitions without a position, then resets."""
        need = self._subs.needs_committed()
        if need:
            if self._group_id is None:
                for tp in need:
                    self._subs.request_reset(tp)
            else:
                committed = await self._fetch_committed(need)
                for tp in need:
                    s = self._subs.partitions.get(tp)
                    if s is None or s.position is not None or s.reset is not None:
                        continue
                    c = committed.get(tp)
                    if c is not None:
                        self._subs.seek(tp, c.offset, c.leader_epoch)
                    else:
                        self._subs.request_reset(tp)
        for tp, s in self._subs.partitions.items():
            if s.position is None and s.reset is ResetStrategy.NONE and s.error is None:
                s.error = OffsetOutOfRangeError(
                    f"no committed offset for {tp} and auto.offset.reset is none",
                    error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
        resets = self._subs.needs_reset()
        if resets:
            by_strategy: dict[int, list[TopicPartition]] = {}
            for tp in resets:
                by_strategy.setdefault(self._subs.partitions[tp].reset.timestamp, []).append(tp)
            for ts, tps in by_strategy.items():
                found = await self._list_offsets({tp: ts for tp in tps})
                for tp, (offset, _, epoch) in found.items():
                    s = self._subs.partitions.get(tp)
                    if s is not None and s.position is None and s.reset is not None and offset >= 0:
                        self._subs.seek(tp, offset, NO_LEADER_EPOCH)

    async def _list_offsets(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int, int]]:
        """ListOffsets to each leader: {tp: (offset, timestamp, leader epoch)}; -1 offset when none."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in query:
            # a short wait per attempt: callers retry (and say why when their time is up)
            leader, _ = await self._cluster.leader_for(tp, timeout_ms=LEADER_WAIT_PER_ATTEMPT_MS)
            by_leader.setdefault(leader, []).append(tp)
        L = messages.ListOffsetsRequest
        out: dict[TopicPartition, tuple[int, int, int]] = {}

        async def ask(node: int, tps: list[TopicPartition]) -> None:
            topics: dict[str, list] = {}
            for tp in tps:
                epoch = (self._cluster.metadata.leader_for(tp) or (node, -1))[1]
                topics.setdefault(tp.topic, []).append(L.ListOffsetsPartition(
                    partition_index=tp.partition, current_leader_epoch=epoch, timestamp=query[tp], max_num_offsets=1))
            body = L(replica_id=-1, isolation_level=self._isolation,
                     topics=[L.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
            _, resp = await self._cluster.request(node, ApiKey.LIST_OFFSETS, body, versions=LIST_OFFSETS_VERSIONS)
            stale = set()
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == ErrorCode.NONE:
                        out[tp] = (p.offset, p.timestamp, p.leader_epoch)
                    elif for_code(p.error_code).retriable:
                        stale.add(tp.topic)
                    else:
                        raise for_code(p.error_code)(f"ListOffsets for {tp}: {ErrorCode(p.error_code).name}")
            if stale:
                await self._cluster.refresh_metadata(sorted(stale))
                raise for_code(ErrorCode.NOT_LEADER_OR_FOLLOWER)(f"ListOffsets: leaders moved for {sorted(stale)}")

        await asyncio.gather(*(ask(n, tps) for n, tps in by_leader.items()))
        return out

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                                timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one, per partition (None
        when no such record exists)."""
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"offsets_for_times: negative timestamp {ts} for {tp}")
        note: list = []
        found = await self._with_timeout(self._retrying(lambda: self._list_offsets(
            {TopicPartition(*tp): ts for tp, ts in timestamps.items()}), note), timeout_ms, note)
        return {TopicPartition(*tp): (OffsetAndTimestamp(found[tp][0], found[tp][1], found[tp][2])
                                      if tp in found and found[tp][0] >= 0 else None)
                for tp in map(lambda x: TopicPartition(*x), timestamps)}

    async def beginning_offsets(self, partitions: Iterable[TopicPartition],
                                timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        tps = [TopicPartition(*tp) for tp in partitions]
        note: list = []
        found = await self._with_timeout(self._retrying(
            lambda: self._list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps}), note), timeout_ms, note)
        return {tp: found[tp][0] for tp in tps}

    async def end_offsets(self, partitions: Iterable[TopicPartition],
                          timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        tps = [TopicPartition(*tp) for tp in partitions]
        note: list = []
        found = await self._with_timeout(self._retrying(
            lambda: self._list_offsets({tp: LATEST_TIMESTAMP for tp in tps}), note), timeout_ms, note)
        return {tp: found[tp][0] for tp in tps}

    async def _retrying(self, attempt: Callable[[], Any], note: list | None = None) -> Any:
        """Retry retriable failures until cancelled; each is noted, so a caller whose time
        runs out can say why (an unknown topic, a leader that never showed)."""
        backoff = self.config["retry.backoff.ms"] / 1000
        while True:
            try:
                return await attempt()
            except (ConnectionError, KafkaApiError) as e:
                if isinstance(e, KafkaApiError) and not e.retriable:
                    raise
                if note is not None:
                    note.append(e)
                await asyncio.sleep(backoff)

    async def _with_timeout(self, coro: Any, timeout_ms: int | None, note: list | None = None) -> Any:
        ms = timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"]
        try:
            return await asyncio.wait_for(coro, ms / 1000)
        except asyncio.TimeoutError:
            if note and isinstance(note[-1], KafkaApiError):
                last = note[-1]
                raise type(last)(f"{last.message} (still failing after {ms} ms of retries)",
                                 error_code=last.error_code) from None
            raise KafkaTimeoutError(f"no answer within {ms} ms"
                                    + (f"; last error: {note[-1]}" if note else "")) from None

    # ------------------------------------------------------------------ commits

    async def committed(self, partitions: Iterable[TopicPartition],
                        timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        tps = [TopicPartition(*tp) for tp in partitions]
        self._need_group("committed()")
        return await self._with_timeout(self._fetch_committed(tps), timeout_ms)

    async def _fetch_committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        assert self._group_id is not None
        O = messages.OffsetFetchRequest
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = O(group_id=self._group_id, require_stable=True,
                 topics=[O.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
        backoff = self.config["retry.backoff.ms"] / 1000
        while True:
            try:
                node = await self._cluster.coordinator(self._group_id)
                _, resp = await self._cluster.request(dedicated_node(node), ApiKey.OFFSET_FETCH, body,
                                                      versions=OFFSET_FETCH_VERSIONS)
            except ConnectionError:
                self._cluster.invalidate_coordinator(self._group_id)
                await asyncio.sleep(backoff)
                continue
            codes = [resp.error_code] + [p.error_code for t in resp.topics for p in t.partitions]
            bad = next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)
            if bad in GROUP_RETRIABLE:
                if bad in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    self._cluster.invalidate_coordinator(self._group_id)
                await asyncio.sleep(backoff)
                continue
            if bad != ErrorCode.NONE:
                raise for_code(bad)(f"OffsetFetch for group {self._group_id!r}: {ErrorCode(bad).name}")
            out: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in tps}
            for t in resp.topics:
                for p in t.partitions:
                    if p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata or "", p.committed_leader_epoch)
            return out

    def _positions_to_commit(self, partitions: Iterable[TopicPartition] | None = None) -> dict:
        out = {}
        for tp, s in self._subs.partitions.items():
            if partitions is not None and tp not in partitions:
                continue
            if s.position is not None:
                out[tp] = OffsetAndMetadata(s.position, "", s.position_epoch)
        return out

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     timeout_ms: int | None = None) -> None:
        """commitSync: the given offsets (the *next* offset to read, Kafka's rule), or
        every position. Retries retriable errors within the timeout."""
        self._need_group("commit()")
        todo = self._normalize(offsets)
        if not todo:
            return
        await self._with_timeout(self._commit(todo, retry=True), timeout_ms)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[dict, BaseException | None], Any] | None = None) -> asyncio.Task:
        """commitAsync: returns at once; ``callback(offsets, error)`` runs when done."""
        self._need_group("commit_async()")
        todo = self._normalize(offsets)

        async def run() -> None:
            error: BaseException | None = None
            try:
                if todo:
                    await self._commit(todo, retry=False)
            except (KafkaApiError, ConnectionError, CommitFailedError, KafkaTimeoutError) as e:
                error = e
            if callback is not None:
                await _maybe_await(callback(todo, error))
            elif error is not None:
                log.warning("async commit failed: %s", error)

        task = asyncio.get_running_loop().create_task(run())
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)
        return task

    def _normalize(self, offsets: Mapping | None) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return self._positions_to_commit()
        out = {}
        for tp, v in offsets.items():
            om = v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            if om.offset < 0:
                raise ValueError(f"commit: negative offset {om.offset} for {tp}")
            out[TopicPartition(*tp)] = om
        return out

    def _need_group(self, what: str) -> None:
        self._check_open()
        if self._group_id is None:
            raise IllegalStateError(f"{what} needs a group.id")

    async def _commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], retry: bool) -> None:
        assert self._group_id is not None
        C = messages.OffsetCommitRequest
        backoff = self.config["retry.backoff.ms"] / 1000
        while True:
            generation, member_id = (self._membership.commit_generation() if self._membership is not None
                                     and self._mode != "assign" else (-1, ""))
            by_topic: dict[str, list] = {}
            for tp, om in offsets.items():
                by_topic.setdefault(tp.topic, []).append(C.OffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch, commit_timestamp=-1, committed_metadata=om.metadata))
            body = C(group_id=self._group_id, generation_id_or_member_epoch=generation, member_id=member_id,
                     group_instance_id=self.config["group.instance.id"] if generation >= 0 else None,
                     retention_time_ms=-1,
                     topics=[C.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
            try:
                node = await self._cluster.coordinator(self._group_id)
                _, resp = await self._cluster.request(dedicated_node(node), ApiKey.OFFSET_COMMIT, body,
                                                      versions=OFFSET_COMMIT_VERSIONS)
            except ConnectionError:
                self._cluster.invalidate_coordinator(self._group_id)
                if not retry:
                    raise
                await asyncio.sleep(backoff)
                continue
            codes = [p.error_code for t in resp.topics for p in t.partitions]
            bad = next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)
            if bad == ErrorCode.NONE:
                return
            if bad in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._cluster.invalidate_coordinator(self._group_id)
            if bad in _COMMIT_FENCED:
                if self._membership is not None and bad != ErrorCode.FENCED_INSTANCE_ID:
                    self._membership.request_rejoin("a commit was refused")
                    self._wake_group()
                raise CommitFailedError(
                    f"commit for group {self._group_id!r} refused ({ErrorCode(bad).name}): this member is not "
                    "in the current generation; its partitions may belong to another member now")
            if bad in GROUP_RETRIABLE and retry:
                await asyncio.sleep(backoff)
                continue
            raise for_code(bad)(f"OffsetCommit for group {self._group_id!r}: {ErrorCode(bad).name}")

    async def _maybe_auto_commit(self) -> None:
        if not self._auto_commit or self._mode is None:
            return
        now = self._now()
        if now < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now + self._auto_commit_interval_ms
        if self._membership is not None and not self._membership.stable:
            return
        todo = self._positions_to_commit()
        if todo:
            self.commit_async(todo)

    # ------------------------------------------------------------------ the group

    def _start_group(self) -> None:
        c = self.config
        assert self._group_id is not None
        if self._membership is None:
            self._membership = Membership(MembershipConfig(
                group_id=self._group_id, session_timeout_ms=c["session.timeout.ms"],
                rebalance_timeout_ms=c["max.poll.interval.ms"], heartbeat_interval_ms=c["heartbeat.interval.ms"],
                retry_backoff_ms=c["retry.backoff.ms"], group_instance_id=c["group.instance.id"],
                rack_id=c["client.rack"] or None),
                [assignor_for(n) for n in c["partition.assignment.strategy"]], self._now())
            self._membership.subscribe(self._topics)
        if self._group_task is None:
            self._group_task = asyncio.get_running_loop().create_task(self._group_loop())

    def _wake_group(self) -> None:
        if self._group_wakeup is not None:
            self._group_wakeup.set()

    async def _group_loop(self) -> None:
        m = self._membership
        assert m is not None and self._group_wakeup is not None
        next_metadata_ms = 0
        max_age_ms = self.config["metadata.max.age.ms"]
        while not self._closed:
            now = self._now()
            if now >= next_metadata_ms:
                next_metadata_ms = now + max_age_ms
                self._spawn(self._watch_metadata())
            self._carry_out(m.poll(now))
            wait_ms = min(m.poll_timeout_ms(self._now()), max(0, next_metadata_ms - self._now()))
            self._group_wakeup.clear()
            try:
                await asyncio.wait_for(self._group_wakeup.wait(), max(wait_ms, 1) / 1000)
            except asyncio.TimeoutError:
                pass

    async def _watch_metadata(self) -> None:
        """Pattern subscriptions follow the topics that exist; the leader rebalances when a
        subscribed topic's partition count changes."""
        m = self._membership
        if m is None:
            return
        try:
            if self._mode == "pattern":
                meta = await self._cluster.refresh_metadata(None)
                assert self._pattern is not None
                matched = frozenset(t for t in meta.topics if self._pattern.match(t)
                                    and not (self.config["exclude.internal.topics"] and t.startswith("__")))
                if matched != self._topics:
                    self._topics = matched
                    self._cluster.add_topics(matched)
                    m.subscribe(matched)
            elif self._topics:
                meta = await self._cluster.refresh_metadata(sorted(self._topics | m.subscription))
            else:
                return
            m.handle_metadata({t: meta.partition_count(t) or 0 for t in meta.topics})
        except (ConnectionError, KafkaApiError) as e:
            log.debug("metadata refresh for the group failed: %s", e)
        self._wake_group()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._group_tasks.add(task)
        task.add_done_callback(self._group_tasks.discard)

    def _carry_out(self, effects: list) -> None:
        m = self._membership
        assert m is not None
        for effect in effects:
            if isinstance(effect, FindCoordinator):
                self._spawn(self._find_coordinator())
            elif isinstance(effect, SendJoinGroup):
                # (the machine emits it only once every listener call it handed out has run)
                self._spawn(self._send_group_request(
                    ApiKey.JOIN_GROUP, effect.request, m.handle_join_group_response,
                    timeout_ms=max(self.config["request.timeout.ms"], m.config.rebalance_timeout_ms + 5000)))
            elif isinstance(effect, SendSyncGroup):
                self._spawn(self._send_group_request(ApiKey.SYNC_GROUP, effect.request, m.handle_sync_group_response))
            elif isinstance(effect, SendHeartbeat):
                self._spawn(self._send_group_request(ApiKey.HEARTBEAT, effect.request, m.handle_heartbeat_response))
            elif isinstance(effect, SendLeaveGroup):
                self._spawn(self._send_group_request(ApiKey.LEAVE_GROUP, effect.request, m.handle_leave_group_response))
            elif isinstance(effect, NeedAssignment):
                self._spawn(self._assign(effect.topics))
            elif isinstance(effect, (PartitionsRevoked, PartitionsAssigned, PartitionsLost)):
                fut = asyncio.get_running_loop().create_future()
                self._listener_calls.append((effect, fut, m))
                if self._data is not None:
                    self._data.set()
            elif isinstance(effect, Fatal):
                self._fatal = for_code(effect.error_code)(effect.message)
                if self._data is not None:
                    self._data.set()
            else:
                raise AssertionError(f"unknown effect {effect!r}")

    async def _find_coordinator(self) -> None:
        m = self._membership
        assert m is not None and self._group_id is not None
        try:
            self._cluster.invalidate_coordinator(self._group_id)
            node = await self._cluster.coordinator(self._group_id)
            self._carry_out(m.handle_coordinator_found(node, self._now()))
        except (ConnectionError, KafkaApiError, KafkaTimeoutError) as e:
            log.debug("FindCoordinator failed: %s", e)
            self._carry_out(m.handle_request_failed(self._now()))
        self._wake_group()

    async def _send_group_request(self, api: ApiKey, body: Any, handle: Callable,
                                  timeout_ms: int | None = None) -> None:
        m = self._membership
        assert m is not None
        node = m.coordinator
        try:
            if node is None:
                raise ConnectionError("coordinator unknown")
            # the coordinator's own connection: a held JoinGroup must not queue fetches
            _, resp = await self._cluster.request(dedicated_node(node), api, body, timeout_ms=timeout_ms)
        except (ConnectionError, KafkaApiError) as e:
            log.debug("%s failed: %s", api.name, e)
            if api != ApiKey.LEAVE_GROUP:
                self._cluster.invalidate_coordinator(m.config.group_id)
            self._carry_out(m.handle_request_failed(self._now()))
            self._wake_group()
            return
        self._carry_out(handle(resp, self._now()))
        self._wake_group()

    async def _assign(self, topics: frozenset[str]) -> None:
        m = self._membership
        assert m is not None
        try:
            meta = await self._cluster.refresh_metadata(sorted(topics))
            counts = {t: meta.partition_count(t) or 0 for t in topics}
        except (ConnectionError, KafkaApiError) as e:
            log.debug("metadata for the assignment failed: %s", e)
            counts = {t: self._cluster.metadata.partition_count(t) or 0 for t in topics}
        self._carry_out(m.perform_assignment(counts, self._now()))
        self._wake_group()

    async def _run_listener_calls(self) -> None:
        while self._listener_calls:
            effect, fut, origin = self._listener_calls.pop(0)
            try:
                await self._apply_listener_call(effect)
            finally:
                if not fut.done():
                    fut.set_result(None)
                # the machine holds a JoinGroup back until every listener call has run
                origin.listener_done(self._now())
                self._wake_group()

    async def _call_listener(self, listener: Any, name: str, parts: set[TopicPartition]) -> None:
        """A listener may implement only the methods it needs (a plain object is enough)."""
        fn = getattr(listener, name, None) if listener is not None else None
        if fn is not None:
            await _maybe_await(fn(self, parts))

    async def _apply_listener_call(self, effect: Any) -> None:
        listener = self._listener
        if isinstance(effect, PartitionsAssigned):
            self._subs.assign(effect.assignment)
            self._drop_buffers(lambda tp: tp not in self._subs.partitions)
            await self._call_listener(listener, "on_partitions_assigned", set(effect.partitions))
            return
        parts = set(effect.partitions)
        if isinstance(effect, PartitionsRevoked):
            if self._auto_commit:
                todo = self._positions_to_commit(parts)
                if todo:
                    try:
                        await self._with_timeout(self._commit(todo, retry=True), None)
                    except (KafkaApiError, ConnectionError, CommitFailedError, KafkaTimeoutError) as e:
                        log.warning("auto-commit before revoking %s failed: %s", sorted(parts), e)
            await self._call_listener(listener, "on_partitions_revoked", parts)
        elif listener is not None and not hasattr(listener, "on_partitions_lost"):
            # Kafka's default on_partitions_lost: treat them as revoked
            await self._call_listener(listener, "on_partitions_revoked", parts)
        else:
            await self._call_listener(listener, "on_partitions_lost", parts)
        self._subs.remove(parts)
        self._drop_buffers(lambda tp: tp in parts)

    # ------------------------------------------------------------------ helpers

    def _now(self) -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False

