"""The asyncio shell of the data-plane core: the only place ``ReplicaManager`` meets I/O.

Every input goes to the core and is followed by ``carry_out()`` (``core.take_effects()``),
the single place effects are carried out (a Produce's appends: once after all of them):

- ``ProduceCompletion``: resolve the acks=all produce parked under that token;
- ``PartitionsChanged``: wake long-polling fetches on those partitions (a follower's
  not for an HW-only change: it reads up to the log end);
- ``SendAlterPartition``: queued; one AlterPartition request at a time carries every
  queued proposal to the active controller, each answer (or ``None`` when the request
  was lost) handed back to the core;
- ``FetchFromLeader``: start or wake the replica fetcher for that leader;
- ``LeadershipChanged``: tell the subscribers (the group coordinator);
- ``TxnMarkerAppended``: tell the marker subscribers at once, before replication (the
  group coordinator's pending transactional offsets, KIP-890 verification);
- ``LogDirFailed``: wake waiters on the lost partitions and tell the broker
  (``on_log_dir_failure``), which decides what the process does about it.

A timer task calls ``core.poll`` when the core says something is due, and checkpoints
high watermarks every few seconds (the files are written on a thread, off the event
loop). Record bytes leave as zero-copy file regions (``sendfile``, from
``SENDFILE_MIN_BYTES``) or as copies.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any, Callable, Container, Iterable

from broker import alter_partition_batch
from broker.controller_channel import ControllerChannel, ControllerUnavailableError
from broker.latency_trace import LatencyTracer
from broker.log import PartitionLog, StaleFileSliceError
from broker.replica_manager import (
    AlterPartitionAnswer, CheckpointWrite, Effect, FetchFromLeader, LeadershipChanged, LogDirFailed,
    PartitionsChanged, READ_UNCOMMITTED, ProduceCompletion, ProduceResult, ReadResult, ReplicaManager,
    SendAlterPartition, TxnMarkerAppended,
)
from clients.protocol import ApiKey
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition
from metadata_log.delta import MetadataChange
from metadata_log.image import MetadataImage
from quorum.network import SENDFILE_MIN_BYTES, FileRegion

log = logging.getLogger(__name__)

__all__ = ["ReplicaDriver"]

HW_CHECKPOINT_INTERVAL_MS = 5_000
ALTER_PARTITION_TIMEOUT_S = 5.0


# How many partitions (counted once per change) the change journal keeps: seconds of
# changes, more than a follower's fetch interval (a session further behind looks at all
# its partitions once). It holds each change's set alive: 200,000 kept tens of MB under
# a steady produce load.
CHANGE_JOURNAL_PARTITIONS_MAX = 20_000
_TIMED_OUT = object()
_SESSION_LACKS = object()       # a follower's fetch lacks a partition it is to follow here
# How long after this broker became leader of a partition a follower's fetch that does not
# name it yet is answered at once instead of parked (its broker may apply the same
# metadata a little after this one): the follower's next fetch then names it, where a
# parked one would hold the partition's first acks=all write for replica.fetch.wait.max.ms.
NEW_LEADERSHIP_WINDOW_S = 0.2


def _time_up(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(_TIMED_OUT)


# A parked fetch of more partitions than this is not registered under each of them (a
# follower's session at 100k partitions holds ~33,000: registering and unregistering them
# was ~15 % of an idle broker's time): it is asked about every change instead, and the
# parked fetches are few (one per fetcher connection).
_WIDE_WAITER_PARTITIONS = 64


class _FetchWaiter:
    """A parked (long-polling) fetch: resolved by the first change to one of its
    partitions (a follower's: not by an HW-only change); ``woken`` collects every
    partition that changes until it resumes, so that it reads them again."""
    __slots__ = ("future", "woken", "follower", "partitions", "replica_id")

    def __init__(self, future: asyncio.Future, follower: bool,
                 partitions: Container[TopicPartition], replica_id: int = -1) -> None:
        self.future = future
        self.woken: set[TopicPartition] = set()
        self.follower = follower
        self.partitions = partitions        # what it waits on
        self.replica_id = replica_id        # a follower's broker id; -1: a consumer's

    def changed(self, tp: TopicPartition, hw_only: bool) -> None:
        self.woken.add(tp)
        if not self.future.done() and not (hw_only and self.follower):
            self.future.set_result(None)


class ReplicaDriver:
    def __init__(self, core: ReplicaManager, controller: ControllerChannel, now_ms: Callable[[], int],
                 broker_epoch: Callable[[], int],
                 on_log_dir_failure: Callable[[str], None] = lambda log_dir: None,
                 tracer: LatencyTracer | None = None) -> None:
        """``tracer``: where appends, follower reads and acks=all completions are told
        (issue 22's per-stage latency); None: nothing is traced."""
        self.core = core
        self.tracer = tracer if tracer is not None else LatencyTracer(lambda stage, ms: None, enabled=False)
        self.controller = controller
        self.now_ms = now_ms
        self.broker_epoch = broker_epoch
        self.on_log_dir_failure = on_log_dir_failure
        # Set once by the broker before start(): where FetchFromLeader goes.
        self._fetch_from: Callable[[int], None] | None = None
        self._leadership_subscribers: list[Callable[[TopicPartition, bool], None]] = []
        self._txn_marker_subscribers: list[Callable[[TopicPartition, int, bool], None]] = []
        self._produce_waiters: dict[int, asyncio.Future] = {}
        self._data_waiters: dict[TopicPartition, list[_FetchWaiter]] = {}
        self._wide_waiters: list[_FetchWaiter] = []
        self._follower_waiters: list[_FetchWaiter] = []
        # Per follower: partitions this broker began to lead with it as a replica, until
        # when a fetch of it that lacks them is answered at once (NEW_LEADERSHIP_WINDOW_S).
        self._new_leaderships: dict[int, dict[TopicPartition, float]] = {}
        # The partitions of each PartitionsChanged carried out, numbered from 1 (the
        # first kept is number _journal_first), for follower sessions to learn which of
        # their idle partitions changed since their last fetch (changes_since).
        self._journal: list[frozenset[TopicPartition]] = []
        self._journal_first = 1
        self._journal_partitions = 0
        self._tokens = itertools.count(1)
        self._image_changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._checkpointing: asyncio.Task | None = None     # the HW checkpoint being written
        self._alter_unsent: list[SendAlterPartition] = []   # ISR proposals for the next request
        self._alter_sender: asyncio.Task | None = None
        self._stopping = False

    # ------------------------------------------------------------ wiring

    def start(self, fetch_from: Callable[[int], None]) -> None:
        self._fetch_from = fetch_from
        self._task = asyncio.get_running_loop().create_task(self._poll_loop(), name="replica-poll")

    @property
    def produce_purgatory_size(self) -> int:
        """acks=all produce requests waiting for the high watermark (Kafka's Produce purgatory)."""
        return len(self._produce_waiters)

    @property
    def fetch_purgatory_size(self) -> int:
        """Long-polling fetches waiting for data (Kafka's Fetch purgatory)."""
        return (len({id(w) for waiters in self._data_waiters.values() for w in waiters})
                + len(self._wide_waiters))

    def subscribe_leadership(self, callback: Callable[[TopicPartition, bool], None]) -> None:
        """``callback(partition, leader)`` after this broker starts or stops leading it."""
        self._leadership_subscribers.append(callback)

    def subscribe_txn_markers(self, callback: Callable[[TopicPartition, int, bool], None]) -> None:
        """``callback(partition, producer_id, committed)`` synchronously on the leader right
        after a COMMIT/ABORT marker of that producer is appended to the partition's log
        (before it is replicated; WriteTxnMarkers answers after acks=all)."""
        self._txn_marker_subscribers.append(callback)

    @property
    def image(self) -> MetadataImage:
        return self.core.image

    @property
    def topic_ids_version(self) -> int:
        """Moves on when a topic is created or deleted (``ReplicaManager.topic_ids_version``)."""
        return self.core.topic_ids_version

    @property
    def topic_deletions_version(self) -> int:
        """Moves on when a topic is deleted (``ReplicaManager.topic_deletions_version``)."""
        return self.core.topic_deletions_version

    def local_log(self, tp: TopicPartition) -> PartitionLog | None:
        """The local log of a hosted partition (the group coordinator replays its own)."""
        hosted = self.core.partitions.get(tp)
        return None if hosted is None else hosted.log

    # ------------------------------------------------------------ effects

    def carry_out(self) -> None:
        """Carry out what the core asked for since the last call (``append`` with
        ``carry_out=False`` leaves its effects for this)."""
        for effect in self.core.take_effects():
            self._carry_out_one(effect)

    def _carry_out_one(self, effect: Effect) -> None:
        if isinstance(effect, ProduceCompletion):
            waiter = self._produce_waiters.pop(effect.token, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(effect.error_code)
        elif isinstance(effect, PartitionsChanged):
            self._journal_add(effect.partitions)
            # A parked follower fetch stays parked on an HW-only change (one wake-up per
            # append on an acks=all partition, not two), but reads the new HW when it resumes.
            wide = self._wide_waiters
            for tp in effect.partitions:
                hw_only = tp in effect.high_watermark_only
                for waiter in wide:
                    if tp in waiter.partitions:
                        waiter.changed(tp, hw_only)
                waiters = self._data_waiters.pop(tp, None)
                if waiters is None:
                    continue
                if hw_only:
                    staying = [w for w in waiters if w.follower]
                    if staying:
                        self._data_waiters[tp] = staying
                for waiter in waiters:
                    waiter.changed(tp, hw_only)
        elif isinstance(effect, SendAlterPartition):
            self._queue_alter_partition(effect)
        elif isinstance(effect, FetchFromLeader):
            assert self._fetch_from is not None, "start() first"
            self._fetch_from(effect.leader_id)
        elif isinstance(effect, LeadershipChanged):
            if effect.leader:
                self._expect_followers(effect.partition)
            for callback in self._leadership_subscribers:
                callback(effect.partition, effect.leader)
        elif isinstance(effect, LogDirFailed):
            self.on_log_dir_failure(effect.log_dir)
        elif isinstance(effect, TxnMarkerAppended):
            for marker_callback in self._txn_marker_subscribers:
                marker_callback(effect.partition, effect.producer_id, effect.committed)
        else:
            raise AssertionError(f"unknown effect {effect!r}")

    def run(self, step: Callable[[ReplicaManager], Any]) -> Any:
        """Hand the core one input (``step(core)``) and carry out what it asks for."""
        try:
            return step(self.core)
        finally:
            self.carry_out()

    # ------------------------------------------------------------ metadata

    def apply_metadata(self, image: MetadataImage, changes: list[MetadataChange] | None) -> None:
        self.run(lambda core: core.apply_metadata(image, changes, self.now_ms()))
        self._image_changed.set()

    async def wait_for_image(self, ready: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until ``ready(image)`` holds for an applied image; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not ready(self.core.image):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._image_changed.clear()
            try:
                await asyncio.wait_for(self._image_changed.wait(), remaining)
            except asyncio.TimeoutError:
                return ready(self.core.image)
        return True

    # ------------------------------------------------------------ produce

    def check_produce(self, tp: TopicPartition, records: Any, acks: int) -> ProduceResult | None:
        """ReplicaManager.check_produce: the answer without appending, or None."""
        return self.run(lambda core: core.check_produce(tp, records, acks))

    def append(self, tp: TopicPartition, records: Any, acks: int,
               from_coordinator: bool = False, reserved_gaps: bool = False,
               received_ns: int = 0, carry_out: bool = True) -> ProduceResult:
        """Append to a led partition; for acks=all, ``result.required_offset`` is what
        ``await_replication`` waits for. ``from_coordinator``, ``reserved_gaps``:
        ReplicaManager.append. ``received_ns``: when the request's bytes were read (0: not
        traced). ``carry_out=False``: a successful append's effects (woken fetches,
        completed acks=all waits) wait for the caller's ``carry_out()``, so that a
        Produce's partitions give one PartitionsChanged, not one each; the caller must
        call it before it next awaits. A failed append's are carried out at once (a log
        directory gone offline stops its replicas before the next append)."""
        started_ns = time.monotonic_ns() if received_ns else 0
        try:
            result = self.core.append(tp, records, acks, self.now_ms(), from_coordinator,
                                      reserved_gaps)
        except BaseException:
            self.carry_out()
            raise
        if carry_out or result.error_code:
            self.carry_out()
        if received_ns and result.records_appended and self.tracer.enabled:
            now_ns = time.monotonic_ns()
            if not self.tracer.tracing(tp, now_ns):
                self.tracer.appended(tp, result.base_offset + result.records_appended - 1,
                                     received_ns, started_ns, now_ns,
                                     self.core.high_watermark_of(tp.topic, tp.partition))
        return result

    def append_txn_marker(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                          committed: bool, coordinator_epoch: int) -> ProduceResult:
        """WriteTxnMarkers for one partition: the marker appended (subscribers told at
        once); ``result.required_offset`` is what ``await_replication`` waits for."""
        now = self.now_ms()
        return self.run(lambda core: core.append_txn_marker(tp, producer_id, producer_epoch,
                                                            committed, coordinator_epoch, now))

    async def await_replication(self, tp: TopicPartition, required_offset: int, timeout_ms: int) -> int:
        """acks=all: wait until the HW passes ``required_offset``; the error code."""
        return (await self.await_replications([(tp, required_offset)], timeout_ms))[0]

    async def await_replications(self, waits: list[tuple[TopicPartition, int]], timeout_ms: int) -> list[int]:
        """acks=all for one request's partitions: all parked at once (one deadline), then
        awaited in this coroutine (no task per partition); the error codes, in order."""
        loop = asyncio.get_running_loop()
        deadline = self.now_ms() + timeout_ms
        parked: list[tuple[int, asyncio.Future | None]] = []
        for tp, required_offset in waits:
            token = next(self._tokens)
            waiter = loop.create_future()
            self._produce_waiters[token] = waiter
            if self.run(lambda core: core.await_replication(tp, token, required_offset, deadline)):
                parked.append((token, waiter))
            else:
                self._produce_waiters.pop(token, None)
                parked.append((token, None))
        # The core times the waits out (REQUEST_TIMED_OUT); this bound only guards a bug.
        guard = loop.call_later(timeout_ms / 1000 + 5.0, self._time_out_waiters, [t for t, _ in parked])
        codes = []
        try:
            for (tp, required_offset), (_, waiter) in zip(waits, parked):
                if waiter is None:
                    codes.append(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    continue
                codes.append(await waiter)
                self.tracer.produce_acked(tp, required_offset, time.monotonic_ns())
        finally:
            guard.cancel()
            for token, _ in parked:
                self._produce_waiters.pop(token, None)
        return codes

    def _time_out_waiters(self, tokens: list[int]) -> None:
        for token in tokens:
            waiter = self._produce_waiters.pop(token, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(ErrorCode.REQUEST_TIMED_OUT)

    def alter_replica_log_dir(self, tp: TopicPartition, log_dir: str) -> int:
        """AlterReplicaLogDirs for one replica; the error code."""
        now = self.now_ms()
        return self.run(lambda core: core.alter_replica_log_dir(tp, log_dir, now))

    def delete_records(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        return self.run(lambda core: core.delete_records(tp, offset))

    # ------------------------------------------------------------ fetch

    def read(self, tp: TopicPartition, fetch_offset: int, max_bytes: int, current_leader_epoch: int,
             replica_id: int, min_one_batch: bool, client_rack: str | None = None,
             replica_epoch: int = -1, isolation_level: int = READ_UNCOMMITTED,
             update_fetch_state: bool = True) -> ReadResult:
        # ``run``'s steps without its closure: one call per partition of every fetch.
        try:
            result = self.core.read(tp, fetch_offset, max_bytes, current_leader_epoch, replica_id,
                                    self.now_ms(), min_one_batch, client_rack, replica_epoch,
                                    isolation_level, update_fetch_state)
        finally:
            self.carry_out()
        if replica_id >= 0 and self.tracer.enabled:
            self.tracer.follower_read(tp, fetch_offset, None if result.records is None
                                      else result.records.last_offset,
                                      result.high_watermark, time.monotonic_ns(), replica_id)
        return result

    def report_idle_follower_fetches(self, replica_id: int, replica_epoch: int,
                                     positions: Iterable[tuple[TopicPartition, int, int, int, int]]
                                     ) -> set[TopicPartition]:
        """``ReplicaManager.report_idle_follower_fetches``: the partitions of a follower's
        incremental fetch that need no read."""
        try:
            return self.core.report_idle_follower_fetches(replica_id, replica_epoch, positions,
                                                          self.now_ms())
        finally:
            self.carry_out()

    def consumer_answered(self, reads: Iterable[tuple[TopicPartition, int, ReadResult]]
                          ) -> Callable[[], None] | None:
        """A consumer fetch is answered with these (partition, fetch offset, read); what
        to call once the response is written, when it carries a traced batch."""
        if not self.tracer.enabled:
            return None
        traced = self.tracer.consumer_answered(
            ((tp, offset, r.records.last_offset) for tp, offset, r in reads if r.records is not None),
            time.monotonic_ns())
        if not traced:
            return None
        return lambda: self.tracer.consumer_flushed(traced, time.monotonic_ns())

    def _journal_add(self, tps: frozenset[TopicPartition]) -> None:
        journal = self._journal
        journal.append(tps)
        self._journal_partitions += len(tps)
        if self._journal_partitions > CHANGE_JOURNAL_PARTITIONS_MAX:
            # Drop the oldest half: a session that had not fetched since looks at all.
            cut = len(journal) // 2 + 1
            self._journal_partitions -= sum(len(t) for t in journal[:cut])
            del journal[:cut]
            self._journal_first += cut

    @property
    def change_seq(self) -> int:
        """The number of the last partition change carried out (0: none yet)."""
        return self._journal_first + len(self._journal) - 1

    def changes_since(self, seq: int) -> list[frozenset[TopicPartition]] | None:
        """The partitions of each change after number ``seq``; None when some of them are
        no longer kept (take every partition as changed)."""
        start = seq + 1 - self._journal_first
        if start < 0:
            return None
        return self._journal[start:]

    def follower_answered(self, replica_id: int, tps: Iterable[TopicPartition]) -> Callable[[], None] | None:
        """A follower fetch is answered with records of ``tps``: what to call once the
        response is written (the trace's follower_flush)."""
        if not self.tracer.enabled:
            return None
        tps = list(tps)
        return lambda: self.tracer.follower_flushed(replica_id, tps, time.monotonic_ns())

    def records_bytes(self, result: ReadResult) -> bytes:
        """A read's bytes, always copied (for answers that rewrite them: tag filters)."""
        if result.remote_records is not None:
            return result.remote_records
        if result.records is None or result.log is None:
            return b""
        return bytes(result.log.read_records_bytes(result.records))

    def records_of(self, result: ReadResult) -> Any:
        """The bytes to send for a read: a zero-copy file region, or a copy."""
        if result.remote_records is not None:
            return result.remote_records
        if result.records is None or result.log is None:
            return b""
        if result.records.length_bytes < SENDFILE_MIN_BYTES:
            # A small read is cheaper copied than sent with sendfile (quorum/network.py).
            return result.log.read_records_bytes(result.records)
        cm = result.log.storage.open_slice(result.records)
        try:
            fd = cm.__enter__()
        except StaleFileSliceError:
            return result.log.read_records_bytes(result.records)
        return FileRegion(fd, result.records.position, result.records.length_bytes,
                          lambda: cm.__exit__(None, None, None))

    def _expect_followers(self, tp: TopicPartition) -> None:
        """This broker leads ``tp`` now: its followers' fetches that do not name it yet are
        answered (parked ones at once), so that their next fetches do."""
        topic = self.core.image.topics.get(tp.topic)
        reg = None if topic is None else topic.partitions.get(tp.partition)
        if reg is None:
            return
        until = time.monotonic() + NEW_LEADERSHIP_WINDOW_S
        for replica_id in reg.replicas:
            if replica_id != self.core.broker_id:
                self._new_leaderships.setdefault(replica_id, {})[tp] = until
        for waiter in self._follower_waiters:
            if (waiter.replica_id in reg.replicas and tp not in waiter.partitions
                    and not waiter.future.done()):
                waiter.future.set_result(_SESSION_LACKS)

    def _session_lacks(self, replica_id: int, tps: Container[TopicPartition]) -> bool:
        """Whether a fetch of follower ``replica_id`` over ``tps`` lacks a partition this
        broker began to lead within NEW_LEADERSHIP_WINDOW_S (entries it names, or that
        are older, are dropped)."""
        expected = self._new_leaderships.get(replica_id)
        if not expected:
            return False
        now = time.monotonic()
        lacks = False
        for tp, until in list(expected.items()):
            if tp in tps or until < now:
                del expected[tp]
            else:
                lacks = True
        if not expected:
            del self._new_leaderships[replica_id]
        return lacks

    async def wait_for_data(self, tps: Iterable[TopicPartition], timeout_s: float,
                            follower: bool = False, replica_id: int = -1) -> set[TopicPartition] | None:
        """Long poll: return when any of the partitions changes or the time is up. Returns
        the partitions that changed while it waited (empty: the time is up), so that a
        fetch woken for one partition reads that one again, not all of its session's.
        ``follower``: a follower's fetch, which a leader's HW advance alone does not end;
        its ``replica_id``: None is returned, at once or while parked, when it lacks a
        partition this broker just began to lead with that follower as a replica (answer
        it now: the follower's next fetch names the partition)."""
        loop = asyncio.get_running_loop()
        if not isinstance(tps, (set, frozenset)):
            tps = list(tps)
        if replica_id >= 0 and self._session_lacks(replica_id, tps):
            return None
        wide = len(tps) > _WIDE_WAITER_PARTITIONS
        if wide:
            waiter = _FetchWaiter(loop.create_future(), follower,
                                  tps if isinstance(tps, (set, frozenset)) else frozenset(tps), replica_id)
            self._wide_waiters.append(waiter)
        else:
            waiter = _FetchWaiter(loop.create_future(), follower, tps, replica_id)
            for tp in tps:
                self._data_waiters.setdefault(tp, []).append(waiter)
        if replica_id >= 0:
            self._follower_waiters.append(waiter)
        # A timer resolves the same future a change does: a woken fetch resumes in one
        # turn of the event loop (wait_for took three; issue 22).
        timer = loop.call_later(timeout_s, _time_up, waiter.future)
        try:
            result = await waiter.future
            if result is _TIMED_OUT:
                return set()    # read everything again (a follower's HW-only changes too)
            if result is _SESSION_LACKS:
                return None
        finally:
            timer.cancel()
            if replica_id >= 0:
                self._follower_waiters.remove(waiter)
            if wide:
                self._wide_waiters.remove(waiter)
            else:
                for tp in tps:
                    waiters = self._data_waiters.get(tp)
                    if waiters and waiter in waiters:
                        waiters.remove(waiter)
                        if not waiters:
                            del self._data_waiters[tp]
        return waiter.woken

    # ------------------------------------------------------------ AlterPartition

    def _queue_alter_partition(self, effect: SendAlterPartition) -> None:
        self._alter_unsent.append(effect)
        if self._alter_sender is None or self._alter_sender.done():
            self._alter_sender = asyncio.get_running_loop().create_task(
                self._send_alter_partitions(), name="alter-partition")

    async def _send_alter_partitions(self) -> None:
        """One AlterPartition request in flight at a time, carrying every proposal queued
        meanwhile (up to ``BATCH_MAX``), as Kafka's AlterPartitionManager does; the core
        decides what each partition's answer means. (One request per partition was ~30 %
        of a broker's CPU at 10k partitions, and one metadata-log append each.)"""
        while self._alter_unsent and not self._stopping:
            batch = self._alter_unsent[:alter_partition_batch.BATCH_MAX]
            del self._alter_unsent[:len(batch)]
            req = alter_partition_batch.request_for(self.core.broker_id, self.broker_epoch(), batch)
            answers: list[AlterPartitionAnswer | None]
            try:
                version, resp = await self.controller.request(ApiKey.ALTER_PARTITION, (0, 3), req,
                                                              timeout_s=ALTER_PARTITION_TIMEOUT_S)
            except (ControllerUnavailableError, ConnectionError) as e:
                log.warning("AlterPartition of %d partitions (%s...): %s", len(batch),
                            batch[0].proposal.partition, e)
                answers = [None] * len(batch)
            except Exception:
                # Anything else (an undecodable answer, say) loses the answers too: the
                # proposals must not stay in flight for good, a batch of up to 1,000.
                log.exception("AlterPartition of %d partitions failed", len(batch))
                answers = [None] * len(batch)
            else:
                answers = list(alter_partition_batch.answers_for(batch, version, resp))
            if self._stopping:
                return
            now = self.now_ms()

            def answer_all(core: ReplicaManager) -> None:
                for effect, answer in zip(batch, answers):
                    core.handle_alter_partition_response(effect.proposal, answer, now)
            self.run(answer_all)

    # ------------------------------------------------------------ time and stopping

    async def _poll_loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_checkpoint = self.now_ms() + HW_CHECKPOINT_INTERVAL_MS
        while not self._stopping:
            now = self.now_ms()
            due_ms = self.run(lambda core: core.poll(now))
            if now >= next_checkpoint and (self._checkpointing is None or self._checkpointing.done()):
                # Written and fsynced on a thread, as Kafka's scheduler thread does: on the
                # event loop it held every request of this broker for tens of milliseconds
                # every few seconds (issue 22, seen with py-spy under load).
                self._checkpointing = loop.create_task(
                    self._checkpoint(self.core.high_watermark_checkpoints()))
                next_checkpoint = now + HW_CHECKPOINT_INTERVAL_MS
            # Inputs do not wake this loop (that would scan every partition per request):
            # deadlines are kept within a quarter second.
            await asyncio.sleep(min(due_ms, 250) / 1000)

    async def _checkpoint(self, writes: list[CheckpointWrite]) -> None:
        for write in writes:
            try:
                await asyncio.to_thread(self.core.write_checkpoint, write)
            except OSError as e:
                self.run(lambda core: core.checkpoint_failed(write, e))

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._checkpointing is not None:
            # The shutdown's own checkpoint below writes the same files.
            await asyncio.gather(self._checkpointing, return_exceptions=True)
        self.run(lambda core: core.shutdown())
