"""Replica fetchers: followers pull from their leaders (the network half only).

One task per leader broker, as Kafka's ReplicaFetcherThread: it asks the data-plane core
what to send (``follower_work``: OffsetForLeaderEpoch questions for partitions still
truncating, fetch positions for the rest), sends one request of each kind with this
broker's replica id, and hands the answers back (``handle_epoch_answers``,
``handle_fetched``). Every decision — truncation, pause, retry, append, the follower's HW
— is the core's (``broker.replica_manager``). A connection failure is reported
(``handle_leader_unreachable``: the core backs off) and the task reconnects. The task
ends when the core says nothing follows that leader any more.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Callable, Sequence

from broker.latency_trace import LatencyTracer
from broker.replica_driver import ReplicaDriver
from broker.replica_manager import EpochAnswer, FetchedPartition, FetchPosition, FollowerWork
from clients.connection import KafkaConnection, connect
from clients.security.client_auth import PLAINTEXT_SECURITY, ClientSecurity
from clients.protocol import ApiKey, messages
from clients.protocol.fetch_session import (
    TOPIC_ID_FETCH_VERSION, ZERO_TOPIC_ID, FetchSessionHandler, SessionRequest, WantedPartition,
    request_topics,
)
from clients.types import TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION_MAX = 17          # what a follower speaks; the leader's maximum may be lower

__all__ = ["ReplicaFetcherManager"]


class ReplicaFetcherManager:
    def __init__(self, driver: ReplicaDriver, broker_id: int,
                 endpoint_of: Callable[[int], tuple[str, int] | None],
                 broker_epoch: Callable[[], int] = lambda: -1,
                 fetch_max_wait_ms: int = 500, fetch_max_bytes: int = 10 * 1024 * 1024,
                 partition_fetch_max_bytes: int = 1024 * 1024,
                 security: ClientSecurity = PLAINTEXT_SECURITY,
                 tracer: LatencyTracer | None = None) -> None:
        """``security``: how to log in to the leaders' inter-broker listener; ``tracer``:
        told when fetched records are appended and the next fetch leaves (issue 22)."""
        self.driver = driver
        self.tracer = tracer if tracer is not None else LatencyTracer(lambda stage, ms: None, enabled=False)
        self.security = security
        self.broker_id = broker_id
        self.endpoint_of = endpoint_of
        self.broker_epoch = broker_epoch        # this broker's registration, for ReplicaState
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.partition_fetch_max_bytes = partition_fetch_max_bytes
        self._tasks: dict[int, asyncio.Task] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._closed = False

    def fetch_from(self, leader_id: int) -> None:
        """There is work for ``leader_id``: start its task, or wake it."""
        if self._closed:
            return
        task = self._tasks.get(leader_id)
        if task is None or task.done():
            self._wakeups[leader_id] = asyncio.Event()
            self._tasks[leader_id] = asyncio.get_running_loop().create_task(
                self._run(leader_id), name=f"replica-fetcher-{leader_id}")
        else:
            self._wakeups[leader_id].set()

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def _work(self, leader_id: int) -> FollowerWork | None:
        return self.driver.run(lambda core: core.follower_work(leader_id, self.driver.now_ms()))

    async def _run(self, leader_id: int) -> None:
        conn: KafkaConnection | None = None
        # KIP-227, as Kafka's followers do: once the session holds this leader's
        # partitions, a fetch names only those whose position moved.
        session = _LeaderSession(self.partition_fetch_max_bytes)
        try:
            while not self._closed:
                work = self._work(leader_id)
                if work is None:
                    return
                session.absorb(work)
                if not work.epoch_queries and not work.fetches:
                    event = self._wakeups[leader_id]
                    event.clear()
                    try:
                        await asyncio.wait_for(event.wait(), work.wait_ms / 1000)
                    except asyncio.TimeoutError:
                        pass
                    continue
                try:
                    if conn is None or conn.closed:
                        conn = await self._connect(leader_id)
                    if work.epoch_queries:
                        answers = await self._offsets_for_leader_epoch(conn, work)
                        self.driver.run(lambda core: core.handle_epoch_answers(
                            work, answers, self.driver.now_ms()))
                    elif work.fetches:
                        fetched = await self._fetch(leader_id, conn, work, session)
                        received_ns = conn.received_ns
                        self.driver.run(lambda core: core.handle_fetched(work, fetched, self.driver.now_ms()))
                        if any(p.records for p in fetched):
                            self.tracer.follower_fetched(leader_id, received_ns, time.monotonic_ns())
                except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                    log.info("fetcher for leader %d: %s; reconnecting", leader_id, e)
                    if conn is not None:
                        conn.close()
                    conn = None
                    session.reset()
                    self.driver.run(lambda core: core.handle_leader_unreachable(leader_id, self.driver.now_ms()))
        except asyncio.CancelledError:
            pass
        finally:
            if conn is not None:
                conn.close()

    async def _connect(self, leader_id: int) -> KafkaConnection:
        endpoint = self.endpoint_of(leader_id)
        if endpoint is None:
            raise ConnectionError(f"leader {leader_id} has no endpoint in the metadata")
        return await connect(*endpoint, client_id=f"replica-fetcher-{self.broker_id}",
                             security=self.security, negotiate=True)

    async def _offsets_for_leader_epoch(self, conn: KafkaConnection, work: FollowerWork) -> list[EpochAnswer]:
        version = conn.pick_version(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, 4)
        cls = messages.OffsetForLeaderEpochRequest
        topics: dict[str, list] = {}
        for q in work.epoch_queries:
            topics.setdefault(q.partition.topic, []).append(cls.OffsetForLeaderPartition(
                partition=q.partition.partition, current_leader_epoch=q.current_leader_epoch,
                leader_epoch=q.leader_epoch))
        req = cls(replica_id=self.broker_id, topics=[
            cls.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        resp = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, req)
        return [EpochAnswer(TopicPartition(t.topic, p.partition), p.error_code, p.leader_epoch, p.end_offset)
                for t in resp.topics for p in t.partitions]

    async def _fetch(self, leader_id: int, conn: KafkaConnection, work: FollowerWork,
                     leader_session: _LeaderSession) -> list[FetchedPartition]:
        """One Fetch at the highest version both brokers speak: v13+ name topics by id
        (a recreated topic's new log is never fed the old one's records), v15+ carry
        this broker's id and epoch in ReplicaState (KIP-903)."""
        wanted = leader_session.wanted
        by_id = leader_session.by_id
        version = conn.pick_version(ApiKey.FETCH, 4, FETCH_VERSION_MAX if by_id else TOPIC_ID_FETCH_VERSION - 1)
        uses_topic_ids = version >= TOPIC_ID_FETCH_VERSION
        cls = messages.FetchRequest
        session = leader_session.handler
        # Only the positions that changed since the last answered fetch are compared,
        # when the core said which.
        changed = leader_session.changed
        plan = ((session.build(wanted, uses_topic_ids) if changed is None
                 else session.build_changed(wanted, changed, uses_topic_ids))
                if version >= 7 else SessionRequest(0, -1, tuple(wanted), ()))
        topics, forgotten = request_topics(plan, wanted)
        if version >= 15:
            replica = dict(replica_state=cls.ReplicaState(replica_id=self.broker_id,
                                                          replica_epoch=self.broker_epoch()))
        else:
            replica = dict(replica_id=self.broker_id)
        req = cls(max_wait_ms=self.fetch_max_wait_ms, min_bytes=1,
                  max_bytes=self.fetch_max_bytes, isolation_level=0, session_id=plan.session_id,
                  session_epoch=plan.session_epoch, topics=topics, forgotten_topics_data=forgotten,
                  **replica)
        self.tracer.follower_fetch_sent(leader_id, time.monotonic_ns())
        try:
            resp = await conn.request(ApiKey.FETCH, version, req,
                                      timeout_s=self.fetch_max_wait_ms / 1000 + 30)
        except BaseException:
            leader_session.reset()
            raise
        if version >= 7 and not session.handle_response(resp.session_id, resp.error_code):
            leader_session.changed = None   # the handler starts a new session
            return []           # the session is gone: the next fetch is a full one
        leader_session.changed = set()
        names = leader_session.topic_names
        return [FetchedPartition(TopicPartition(name, p.partition_index), p.error_code,
                                 p.high_watermark, p.log_start_offset, p.records)
                for t in resp.responses
                if (name := names.get(t.topic_id) if uses_topic_ids else t.topic) is not None
                for p in t.partitions]


class _LeaderSession:
    """A fetcher's fetch session with one leader, and what it asks for: the core's
    positions as WantedPartitions, kept up to date from each round's ``changed`` (all
    compared again when a round does not say), and which partitions changed since the
    last answered fetch (``changed``; None: compare them all). A position the core hands
    out again unchanged (the same object) keeps its WantedPartition."""

    def __init__(self, partition_fetch_max_bytes: int) -> None:
        self.handler = FetchSessionHandler()
        self.partition_fetch_max_bytes = partition_fetch_max_bytes
        self._asked: dict[TopicPartition, tuple[FetchPosition, WantedPartition]] = {}
        self.topic_names: dict[uuid.UUID, str] = {}      # of every position asked
        self.wanted: dict[TopicPartition, WantedPartition] = {}
        self.changed: set[TopicPartition] | None = None
        self.by_id = True                               # every position has a topic id
        self._fetches: Sequence[FetchPosition] | None = None

    def reset(self) -> None:
        """The next fetch is a full one, in a new session."""
        self.handler.reset()
        self.changed = None

    def absorb(self, work: FollowerWork) -> None:
        """Take the round's positions."""
        if work.fetches is self._fetches or (work.changed is not None and not work.changed):
            return
        if work.changed is None or self._fetches is None:
            self.wanted = self._make_wanted(work.fetches)
            self.by_id = all(f.topic_id != ZERO_TOPIC_ID for f in work.fetches)
            self.changed = None
        else:
            for tp, position in work.changed.items():
                if position is None:
                    self.wanted.pop(tp, None)
                    self._asked.pop(tp, None)
                else:
                    self.wanted[tp] = self._wanted_of(position)
                    self.by_id = self.by_id and position.topic_id != ZERO_TOPIC_ID
            if self.changed is not None:
                self.changed.update(work.changed)
        self._fetches = work.fetches

    def _wanted_of(self, f: FetchPosition) -> WantedPartition:
        tp = f.partition
        last = self._asked.get(tp)
        if last is not None and last[0] is f:
            return last[1]
        w = WantedPartition(f.fetch_offset, f.current_leader_epoch, self.partition_fetch_max_bytes,
                            f.log_start_offset, f.topic_id)
        self._asked[tp] = (f, w)
        self.topic_names[f.topic_id] = tp.topic
        return w

    def _make_wanted(self, fetches: Sequence[FetchPosition]) -> dict[TopicPartition, WantedPartition]:
        out = {f.partition: self._wanted_of(f) for f in fetches}
        if len(self._asked) > len(out):
            for tp in [tp for tp in self._asked if tp not in out]:
                del self._asked[tp]
        return out
