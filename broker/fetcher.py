"""Replica fetchers: followers pull from their leaders.

One fetcher task per source (leader) broker, batching every partition this broker follows
from it into one Fetch request with this broker's replica id, as Kafka's
ReplicaFetcherThread does. A partition enters in the TRUNCATING state: the fetcher asks the
leader OffsetForLeaderEpoch about its latest local epoch and truncates where the logs
diverge (``broker.replica.follower.truncation_decision``, KIP-101/KIP-279), never to its
own possibly stale high watermark. Then it fetches from its LEO, appends the leader's
batches as they are (offsets and epochs kept), updates producer state and its high
watermark from the leader's.

A FENCED_LEADER_EPOCH answer (our leader epoch is older than the leader's) pauses the
partition until the metadata log says who leads now; the replica manager then re-adds it.
A leader that is *behind* us (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH,
UNKNOWN_TOPIC_OR_PARTITION: it has not applied the metadata that made it leader yet) is
retried after a backoff, as Kafka's fetcher delays such partitions: no metadata change
will come to re-add them, so pausing them would stop replication for good (found by the
chaos suite: a follower that learned of a new topic before its leader never fetched it).
Connection failures back off and reconnect.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from broker.replica.follower import FetchState, FollowerPartition, truncation_decision
from broker.replica.partition import Role, TopicPartition
from broker.replica_manager import HostedPartition, ReplicaManager, now_ms
from clients.connection import KafkaConnection, connect
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.records import RecordError, iter_batches

log = logging.getLogger(__name__)

__all__ = ["ReplicaFetcherManager"]

# Our metadata is stale: wait to be re-added with the new leader epoch.
_PAUSE_ERRORS = {ErrorCode.FENCED_LEADER_EPOCH}
# The leader's metadata is behind ours: try again after the backoff.
_RETRY_ERRORS = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                 ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID}


class _Fetched:
    __slots__ = ("state", "paused", "retry_at")

    def __init__(self, state: FollowerPartition) -> None:
        self.state = state
        self.paused = False
        self.retry_at = 0.0     # loop time before which the partition is not fetched


class ReplicaFetcherManager:
    def __init__(self, replicas: ReplicaManager, broker_id: int,
                 endpoint_of: Callable[[int], tuple[str, int] | None],
                 fetch_max_wait_ms: int = 500, fetch_max_bytes: int = 10 * 1024 * 1024,
                 partition_fetch_max_bytes: int = 1024 * 1024, backoff_ms: int = 200) -> None:
        self.replicas = replicas
        self.broker_id = broker_id
        self.endpoint_of = endpoint_of
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.partition_fetch_max_bytes = partition_fetch_max_bytes
        self.backoff_ms = backoff_ms
        self._by_leader: dict[int, dict[TopicPartition, _Fetched]] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._closed = False

    def add(self, hosted: HostedPartition) -> None:
        """Follow ``hosted`` from its current leader (replaces any earlier state)."""
        self.remove(hosted.tp)
        replica = hosted.replica
        assert replica.role is Role.FOLLOWER and replica.leader_id >= 0
        state = FollowerPartition(leader_id=replica.leader_id, leader_epoch=replica.leader_epoch,
                                  fetch_offset=hosted.log.log_end_offset,
                                  epoch_to_ask=hosted.log.latest_epoch)
        if hosted.log.latest_epoch < 0:
            state.state = FetchState.FETCHING   # nothing local that could diverge
        self._by_leader.setdefault(replica.leader_id, {})[hosted.tp] = _Fetched(state)
        self._ensure_task(replica.leader_id)

    def remove(self, tp: TopicPartition) -> None:
        for leader_id, parts in self._by_leader.items():
            if parts.pop(tp, None) is not None:
                self._wake(leader_id)

    def _wake(self, leader_id: int) -> None:
        event = self._wakeups.get(leader_id)
        if event is not None:
            event.set()

    def _ensure_task(self, leader_id: int) -> None:
        task = self._tasks.get(leader_id)
        if task is None or task.done():
            self._wakeups[leader_id] = asyncio.Event()
            self._tasks[leader_id] = asyncio.get_running_loop().create_task(self._run(leader_id))
        else:
            self._wake(leader_id)

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    # ------------------------------------------------------------ the per-leader loop

    async def _run(self, leader_id: int) -> None:
        conn: KafkaConnection | None = None
        try:
            while not self._closed:
                parts = self._by_leader.get(leader_id, {})
                if not parts:
                    return
                if conn is None or conn.closed:
                    conn = await self._connect(leader_id)
                    if conn is None:
                        await asyncio.sleep(self.backoff_ms / 1000)
                        continue
                try:
                    now = asyncio.get_running_loop().time()
                    active = {tp: f for tp, f in parts.items() if not f.paused and f.retry_at <= now}
                    truncating = {tp: f for tp, f in active.items()
                                  if f.state.state is FetchState.TRUNCATING}
                    if truncating:
                        await self._truncate(conn, truncating)
                    fetching = {tp: f for tp, f in active.items()
                                if f.state.state is FetchState.FETCHING}
                    if fetching:
                        await self._fetch(conn, leader_id, fetching)
                    else:
                        event = self._wakeups[leader_id]
                        event.clear()
                        try:
                            await asyncio.wait_for(event.wait(), self.backoff_ms / 1000)
                        except asyncio.TimeoutError:
                            pass
                except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                    log.info("fetcher for leader %d: %s; reconnecting", leader_id, e)
                    if conn is not None:
                        conn.close()
                    conn = None
                    await asyncio.sleep(self.backoff_ms / 1000)
        except asyncio.CancelledError:
            pass
        finally:
            if conn is not None:
                conn.close()

    async def _connect(self, leader_id: int) -> KafkaConnection | None:
        endpoint = self.endpoint_of(leader_id)
        if endpoint is None:
            return None
        try:
            conn = await connect(*endpoint, client_id=f"replica-fetcher-{self.broker_id}")
            await conn.negotiate_versions()
            return conn
        except (ConnectionError, OSError, asyncio.TimeoutError) as e:
            log.info("fetcher: cannot reach leader %d at %s: %s", leader_id, endpoint, e)
            return None

    def _hosted(self, tp: TopicPartition, fetched: _Fetched) -> HostedPartition | None:
        hosted = self.replicas.partitions.get(tp)
        if (hosted is None or hosted.replica.role is not Role.FOLLOWER
                or hosted.replica.leader_epoch != fetched.state.leader_epoch):
            return None
        return hosted

    async def _truncate(self, conn: KafkaConnection, parts: dict[TopicPartition, _Fetched]) -> None:
        version = conn.pick_version(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, 4)
        req_cls = messages.OffsetForLeaderEpochRequest
        topics: dict[str, list] = {}
        for tp, f in parts.items():
            topics.setdefault(tp.topic, []).append(req_cls.OffsetForLeaderPartition(
                partition=tp.partition, current_leader_epoch=f.state.leader_epoch,
                leader_epoch=f.state.epoch_to_ask))
        req = req_cls(replica_id=self.broker_id, topics=[
            req_cls.OffsetForLeaderTopic(topic=t, partitions=p) for t, p in topics.items()])
        resp = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, req)
        for topic in resp.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                fetched = parts.get(tp)
                if fetched is None:
                    continue
                hosted = self._hosted(tp, fetched)
                if hosted is None:
                    continue
                if p.error_code != ErrorCode.NONE:
                    self._on_error(fetched, p.error_code)
                    continue
                plog = hosted.log

                def local(epoch: int) -> tuple[int, int]:
                    answer = plog.end_offset_for_epoch(epoch)
                    return answer.leader_epoch, answer.end_offset
                decision = truncation_decision(p.leader_epoch, p.end_offset, plog.log_end_offset,
                                               hosted.replica.high_watermark, local)
                if decision.truncate_to < plog.log_end_offset:
                    log.info("%s: truncating from %d to %d (leader epoch %d ends at %d)", tp,
                             plog.log_end_offset, decision.truncate_to, p.leader_epoch, p.end_offset)
                    plog.truncate_to(decision.truncate_to, now_ms())
                    hosted.producers.truncate_to(decision.truncate_to)
                if decision.done:
                    fetched.state.state = FetchState.FETCHING
                    fetched.state.fetch_offset = plog.log_end_offset
                else:
                    fetched.state.epoch_to_ask = decision.next_epoch

    async def _fetch(self, conn: KafkaConnection, leader_id: int,
                     parts: dict[TopicPartition, _Fetched]) -> None:
        version = conn.pick_version(ApiKey.FETCH, 4, 12)
        req_cls = messages.FetchRequest
        topics: dict[str, list] = {}
        for tp, f in parts.items():
            hosted = self.replicas.partitions.get(tp)
            start = hosted.log.log_start_offset if hosted is not None else -1
            topics.setdefault(tp.topic, []).append(req_cls.FetchPartition(
                partition=tp.partition, current_leader_epoch=f.state.leader_epoch,
                fetch_offset=f.state.fetch_offset, log_start_offset=start,
                partition_max_bytes=self.partition_fetch_max_bytes))
        req = req_cls(replica_id=self.broker_id, max_wait_ms=self.fetch_max_wait_ms, min_bytes=1,
                      max_bytes=self.fetch_max_bytes, isolation_level=0, session_id=0,
                      session_epoch=-1, topics=[req_cls.FetchTopic(topic=t, partitions=p)
                                                for t, p in topics.items()])
        resp = await conn.request(ApiKey.FETCH, version, req,
                                  timeout_s=self.fetch_max_wait_ms / 1000 + 30)
        now = now_ms()
        for topic in resp.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                fetched = parts.get(tp)
                if fetched is None:
                    continue
                hosted = self._hosted(tp, fetched)
                if hosted is None:
                    continue
                if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._handle_out_of_range(hosted, fetched, p.log_start_offset)
                    continue
                if p.error_code != ErrorCode.NONE:
                    if p.error_code not in _PAUSE_ERRORS and p.error_code not in _RETRY_ERRORS:
                        log.info("%s: fetch from %d failed: %s", tp, leader_id, p.error_code)
                    self._on_error(fetched, p.error_code)
                    continue
                self._append(hosted, fetched, p, now)

    def _on_error(self, fetched: _Fetched, error_code: int) -> None:
        if error_code in _PAUSE_ERRORS:
            fetched.paused = True
        elif error_code in _RETRY_ERRORS:
            fetched.retry_at = asyncio.get_running_loop().time() + self.backoff_ms / 1000

    def _append(self, hosted: HostedPartition, fetched: _Fetched, p, now: int) -> None:
        plog = hosted.log
        records = p.records
        if records is not None and len(records) > 0:
            try:
                headers = [h for _, h in iter_batches(records, partial_tail_ok=True)]
            except RecordError as e:
                log.warning("%s: corrupt batch from the leader: %s", hosted.tp, e)
                return
            if headers:
                end = sum(h.size_in_bytes for h in headers)
                result = plog.append_as_follower(bytes(records[:end]), now)
                if result.error_code != ErrorCode.NONE:
                    log.warning("%s: follower append failed: %s %s", hosted.tp,
                                result.error_code, result.error_message)
                    fetched.state.state = FetchState.TRUNCATING
                    fetched.state.epoch_to_ask = plog.latest_epoch
                    return
                for h in headers:
                    hosted.producers.update(h.producer_id, h.producer_epoch, h.base_sequence,
                                            h.last_offset_delta, h.base_offset, h.max_timestamp)
        if p.log_start_offset > plog.log_start_offset:
            plog.maybe_increment_log_start_offset(min(p.log_start_offset, plog.log_end_offset),
                                                  plog.log_end_offset)
        fetched.state.fetch_offset = plog.log_end_offset
        hosted.replica.on_follower_fetched(plog.log_start_offset, plog.log_end_offset,
                                           p.high_watermark)
        hosted.wake()

    def _handle_out_of_range(self, hosted: HostedPartition, fetched: _Fetched,
                             leader_log_start: int) -> None:
        plog = hosted.log
        if leader_log_start >= 0 and plog.log_end_offset < leader_log_start:
            # Everything we have is older than the leader keeps: start over at its start.
            log.info("%s: behind the leader's log start %d; restarting there", hosted.tp,
                     leader_log_start)
            plog.truncate_fully_and_start_at(leader_log_start, now_ms())
            hosted.producers.clear()
            fetched.state.fetch_offset = leader_log_start
            return
        # Ahead of the leader: find the divergence point by leader epoch again.
        fetched.state.state = FetchState.TRUNCATING
        fetched.state.epoch_to_ask = plog.latest_epoch
