"""The partitions this broker hosts: their logs, replica state and producer state.

This is the asyncio shell around the pure cores (``broker.log.PartitionLog``,
``broker.replica.PartitionReplica``, ``broker.producer_state.ProducerStateTable``). It

- applies the metadata image: a partition whose committed leader is this broker becomes
  leader at that leader epoch, one that names another leader becomes follower (and is
  handed to the replica fetchers, which truncate by leader epoch before fetching), one
  no longer assigned here is stopped and its log deleted;
- serves Produce (idempotence checks, append, acks=0/1/all with a delayed-produce wait),
  Fetch for consumers (below the high watermark) and followers (below the LEO, which also
  reports the follower's LEO to the leader's replica state), ListOffsets and
  OffsetForLeaderEpoch;
- wakes long-polling fetches when data or the high watermark moves;
- checkpoints high watermarks (``replication-offset-checkpoint``) so a restarted broker
  starts from the HW it last knew (a new leader then advances it from its followers).

Everything runs on the event loop; disk writes are synchronous, as Kafka's request
handler threads make them, and cheap because nothing is fsynced on the hot path.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from broker.log import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, AppendResult, FileSlice, LogConfig,
    LogManager, PartitionLog, StaleFileSliceError,
)
from broker.log.log_manager import decode_offset_checkpoint, encode_offset_checkpoint
from broker.producer_state import ProducerStateTable
from broker.replica.partition import AlterIsr, PartitionReplica, ProduceCompletion, Role, TopicPartition
from quorum.network import FileRegion
from clients.protocol.errors import ErrorCode
from clients.records import RecordError, iter_batches
from metadata_log.config_layers import ConfigLayers
from metadata_log.delta import ConfigChange, MetadataChange
from metadata_log.image import NO_LEADER, ConfigResourceType, MetadataImage, PartitionRegistration

log = logging.getLogger(__name__)

__all__ = ["HostedPartition", "ProduceResult", "ReadResult", "ReplicaManager", "now_ms"]

HW_CHECKPOINT = "replication-offset-checkpoint"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class HostedPartition:
    tp: TopicPartition
    topic_id: uuid.UUID
    log: PartitionLog
    replica: PartitionReplica
    producers: ProducerStateTable
    registration: PartitionRegistration | None = None
    # Futures of long-polling fetches waiting for this partition to change.
    waiters: list[asyncio.Future] = field(default_factory=list)

    def wake(self) -> None:
        for w in self.waiters:
            if not w.done():
                w.set_result(None)
        self.waiters.clear()


@dataclass(frozen=True, slots=True)
class ProduceResult:
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()     # KIP-467


@dataclass(slots=True)
class ReadResult:
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: Any = None          # a FileRegion, bytes, or None
    size_in_bytes: int = 0


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, static_properties: Mapping[str, str],
                 replica_lag_time_max_ms: int = 30_000, use_sendfile: bool = True) -> None:
        self.broker_id = broker_id
        self.logs = log_manager
        self.static_properties = dict(static_properties)
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.use_sendfile = use_sendfile
        self.partitions: dict[TopicPartition, HostedPartition] = {}
        self.image = MetadataImage()
        # Every config this broker applies or describes resolves through these layers.
        self.config_layers = ConfigLayers(self.image.configs, broker_id, self.static_properties)
        self._hw_checkpoint = self._read_hw_checkpoint()
        self._produce_waiters: dict[object, asyncio.Future] = {}
        self._next_token = 0
        # Set by the broker: carry an ISR change proposal to the active controller.
        self.send_alter_isr: Callable[[AlterIsr, HostedPartition], None] = lambda e, p: None
        # Set by the broker: (partition, leader id, leader epoch) -> start/stop following.
        self.on_become_follower: Callable[[HostedPartition], None] = lambda p: None
        self.on_stop_following: Callable[[TopicPartition], None] = lambda tp: None
        # Told after every role change of a hosted partition (the group coordinator
        # loads and unloads __consumer_offsets partitions with their leadership).
        self.leadership_listeners: list[Callable[[HostedPartition], None]] = []

    # ------------------------------------------------------------ configs

    def topic_config(self, topic: str) -> dict[str, str]:
        """The effective configs of ``topic`` on this broker (topic, then broker layers)."""
        return self.config_layers.topic_config(topic)

    def log_config_for(self, topic: str) -> LogConfig:
        return LogConfig.from_properties(self.topic_config(topic))

    def min_insync_replicas(self, topic: str) -> int:
        try:
            return max(1, int(self.topic_config(topic).get("min.insync.replicas", "1")))
        except ValueError:
            return 1

    def _apply_topic_config(self, hosted: HostedPartition) -> None:
        """Configs reach the log (size, retention, roll, compaction, timestamps) and the
        replica (min.insync.replicas: the next append and every acks=all completion)."""
        try:
            config = self.log_config_for(hosted.tp.topic)
        except ValueError as e:
            # The controller validates every value it commits; a value this broker cannot
            # parse (a newer controller's) keeps the last good config rather than crashing.
            log.error("%s: config not applied: %s", hosted.tp, e)
            return
        if config != hosted.log.config:
            hosted.log.update_config(config)
        hosted.replica.min_insync_replicas = self.min_insync_replicas(hosted.tp.topic)

    def _topics_reconfigured(self, changes: Sequence[MetadataChange] | None) -> set[str] | None:
        """Topics whose effective configs the typed changes may have changed; None: all
        (a snapshot was loaded, or a broker-level default changed)."""
        if changes is None:
            return None
        topics: set[str] = set()
        for change in changes:
            if not isinstance(change, ConfigChange):
                continue
            if change.resource_type == ConfigResourceType.TOPIC:
                topics.add(change.resource_name)
            elif (change.resource_type == ConfigResourceType.BROKER
                  and change.resource_name in ("", str(self.broker_id))):
                return None
        return topics

    # ------------------------------------------------------------ metadata

    def apply_image(self, image: MetadataImage, now: int,
                    changes: Sequence[MetadataChange] | None = None) -> None:
        """Make hosted partitions match the committed image (leader/follower/stopped) and
        apply the config changes among ``changes`` (the typed changes since the last
        image applied, in metadata order; None: anything may have changed)."""
        if image.configs is not self.image.configs:
            self.config_layers = ConfigLayers(image.configs, self.broker_id, self.static_properties)
        self.image = image
        reconfigured = self._topics_reconfigured(changes)
        wanted: set[TopicPartition] = set()
        for topic, index, reg in image.topics.iter_partitions():
            if self.broker_id not in reg.replicas:
                continue
            tp = TopicPartition(topic.name, index)
            wanted.add(tp)
            hosted = self.partitions.get(tp)
            if hosted is not None and hosted.topic_id != topic.topic_id:
                # The topic was deleted and recreated with the same name: start afresh.
                self._stop_partition(tp, delete=True)
                hosted = None
            if hosted is None:
                # A log opened at start-up has the static defaults: configure it now.
                hosted = self._create_partition(tp, topic.topic_id, now)
                self._apply_topic_config(hosted)
            elif reconfigured is None or tp.topic in reconfigured:
                self._apply_topic_config(hosted)
            if hosted.registration is not None and hosted.registration == reg:
                continue
            self._apply_registration(hosted, reg, now)
        for tp in [tp for tp in self.partitions if tp not in wanted]:
            self._stop_partition(tp, delete=True)

    def _create_partition(self, tp: TopicPartition, topic_id: uuid.UUID, now: int) -> HostedPartition:
        partition_log = self.logs.get_or_create_log(tp.topic, tp.partition, now,
                                                    self.log_config_for(tp.topic))
        replica = PartitionReplica(tp, self.broker_id, self.replica_lag_time_max_ms,
                                   self.min_insync_replicas(tp.topic))
        producers = self._rebuild_producer_state(partition_log)
        hosted = HostedPartition(tp, topic_id, partition_log, replica, producers)
        self.partitions[tp] = hosted
        return hosted

    def _rebuild_producer_state(self, partition_log: PartitionLog) -> ProducerStateTable:
        """Scan batch headers of the tail of the log (idempotence survives restarts and
        failovers). Kafka snapshots this state; Ketch re-reads the last segment only."""
        table = ProducerStateTable()
        segment = partition_log.active_segment
        start = segment.base_offset
        result = partition_log.read(max(start, partition_log.log_start_offset), 1 << 62,
                                    partition_log.log_end_offset)
        if result.records.is_empty:
            return table
        data = partition_log.read_records_bytes(result.records)
        try:
            for _, header in iter_batches(data, partial_tail_ok=True, check_crc=False):
                table.update(header.producer_id, header.producer_epoch, header.base_sequence,
                             header.last_offset_delta, header.base_offset, header.max_timestamp)
        except RecordError as e:
            log.warning("%s: producer state rebuild stopped: %s", partition_log.dir_path, e)
        return table

    def _apply_registration(self, hosted: HostedPartition, reg: PartitionRegistration, now: int) -> None:
        replica = hosted.replica
        completions: list[ProduceCompletion] = []
        if reg.leader == self.broker_id:
            if replica.role is Role.LEADER and reg.leader_epoch == replica.leader_epoch:
                completions = replica.apply_committed(reg.leader_epoch, reg.partition_epoch,
                                                      reg.isr, reg.replicas)
            else:
                self.on_stop_following(hosted.tp)
                hw = self._hw_checkpoint.get((hosted.tp.topic, hosted.tp.partition), 0)
                hw = max(hw, replica.high_watermark)
                completions = replica.become_leader(
                    reg.leader_epoch, reg.partition_epoch, reg.replicas, reg.isr,
                    hosted.log.log_start_offset, hosted.log.log_end_offset, hw, now)
                log.info("%s: leader at epoch %d, ISR %s, LEO %d, HW %d", hosted.tp,
                         reg.leader_epoch, list(reg.isr), hosted.log.log_end_offset,
                         replica.high_watermark)
        else:
            changed_leader = (replica.role is not Role.FOLLOWER or replica.leader_id != reg.leader
                              or replica.leader_epoch != reg.leader_epoch)
            completions = replica.become_follower(reg.leader, reg.leader_epoch, reg.partition_epoch,
                                                  reg.replicas, reg.isr)
            if changed_leader:
                if reg.leader == NO_LEADER:
                    self.on_stop_following(hosted.tp)
                else:
                    self.on_become_follower(hosted)
        hosted.registration = reg
        self._complete(completions)
        hosted.wake()
        for listener in self.leadership_listeners:
            listener(hosted)

    def _stop_partition(self, tp: TopicPartition, delete: bool) -> None:
        hosted = self.partitions.pop(tp, None)
        if hosted is None:
            return
        self.on_stop_following(tp)
        self._complete(hosted.replica.stop())
        hosted.wake()
        for listener in self.leadership_listeners:
            listener(hosted)
        if delete:
            self.logs.delete_log(tp.topic, tp.partition)
            self._hw_checkpoint.pop((tp.topic, tp.partition), None)
            log.info("%s: no longer hosted here; log deleted", tp)

    # ------------------------------------------------------------ produce

    def _complete(self, completions: Iterable[ProduceCompletion]) -> None:
        for c in completions:
            waiter = self._produce_waiters.pop(c.token, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(c.error_code)

    def append(self, tp: TopicPartition, records: Any, acks: int, now: int) -> tuple[ProduceResult, int | None]:
        """Append to a led partition. Returns the result and, for acks=all, the offset the
        HW must reach (None when nothing to wait for)."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            known = self.image.topics.get(tp.topic)
            code = (ErrorCode.NOT_LEADER_OR_FOLLOWER if known is not None and
                    tp.partition in known.partitions else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return ProduceResult(code), None
        replica = hosted.replica
        check = replica.check_append(acks)
        if check.error_code != ErrorCode.NONE:
            return ProduceResult(check.error_code), None
        if records is None or len(records) == 0:
            return ProduceResult(ErrorCode.NONE, hosted.log.log_end_offset,
                                 log_start_offset=hosted.log.log_start_offset), None
        try:
            headers = [h for _, h in iter_batches(records, check_crc=False)]
        except RecordError as e:
            return ProduceResult(e.error_code, error_message=str(e)), None
        # Idempotence: Kafka clients send one batch per partition; check each in order.
        duplicate = None
        for h in headers:
            seq = hosted.producers.check(h.producer_id, h.producer_epoch, h.base_sequence,
                                         h.last_offset_delta)
            if seq.error_code != ErrorCode.NONE:
                return ProduceResult(seq.error_code, log_start_offset=hosted.log.log_start_offset), None
            if seq.duplicate_of is not None:
                duplicate = seq.duplicate_of
        if duplicate is not None and len(headers) == 1:
            # A retry of a batch we already have: acknowledge its original offsets.
            required = duplicate.last_offset + 1 if acks == -1 else None
            return ProduceResult(ErrorCode.NONE, duplicate.first_offset,
                                 log_start_offset=hosted.log.log_start_offset), required
        buf = records if isinstance(records, bytearray) else bytearray(records)
        result: AppendResult = hosted.log.append_as_leader(buf, replica.leader_epoch, now)
        if result.error_code != ErrorCode.NONE:
            return ProduceResult(result.error_code, error_message=result.error_message,
                                 log_start_offset=hosted.log.log_start_offset,
                                 record_errors=result.record_errors), None
        offset = result.base_offset
        for h in headers:
            hosted.producers.update(h.producer_id, h.producer_epoch, h.base_sequence,
                                    h.last_offset_delta, offset, h.max_timestamp)
            offset += h.last_offset_delta + 1
        self._complete(replica.on_local_append(hosted.log.log_end_offset))
        hosted.wake()
        required = result.last_offset + 1 if acks == -1 else None
        return ProduceResult(ErrorCode.NONE, result.base_offset, result.log_append_time_ms,
                             result.log_start_offset), required

    async def wait_for_replication(self, tp: TopicPartition, required_offset: int,
                                   timeout_ms: int) -> int:
        """acks=all: wait until the HW passes ``required_offset``; the error code."""
        hosted = self.partitions.get(tp)
        if hosted is None or hosted.replica.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        self._next_token += 1
        token = (tp, self._next_token)
        waiter = asyncio.get_running_loop().create_future()
        self._produce_waiters[token] = waiter
        self._complete(hosted.replica.await_replication(token, required_offset, now_ms() + timeout_ms))
        try:
            return await asyncio.wait_for(waiter, timeout_ms / 1000 + 1.0)
        except asyncio.TimeoutError:
            self._produce_waiters.pop(token, None)
            return ErrorCode.REQUEST_TIMED_OUT

    # ------------------------------------------------------------ fetch

    def check_leader_epoch(self, hosted: HostedPartition, current_leader_epoch: int) -> int:
        """KIP-320: fence requests that name another leader epoch (-1: no check)."""
        if current_leader_epoch < 0:
            return ErrorCode.NONE
        if current_leader_epoch < hosted.replica.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > hosted.replica.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def read(self, tp: TopicPartition, fetch_offset: int, max_bytes: int, current_leader_epoch: int,
             replica_id: int, now: int, min_one_batch: bool) -> ReadResult:
        hosted = self.partitions.get(tp)
        if hosted is None:
            return ReadResult(self._unknown_code(tp))
        replica = hosted.replica
        if replica.role is not Role.LEADER:
            return ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        code = self.check_leader_epoch(hosted, current_leader_epoch)
        if code != ErrorCode.NONE:
            return ReadResult(code)
        is_follower = replica_id >= 0
        if is_follower:
            if replica_id not in replica.replicas:
                return ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if fetch_offset <= hosted.log.log_end_offset:
                hw_before = replica.high_watermark
                completions, effects = replica.on_follower_fetch(replica_id, fetch_offset, now)
                self._complete(completions)
                for effect in effects:
                    self.send_alter_isr(effect, hosted)
                if replica.high_watermark != hw_before:
                    hosted.wake()   # consumers long-polling below the old HW can read now
        upper = hosted.log.log_end_offset if is_follower else replica.high_watermark
        result = hosted.log.read(fetch_offset, max_bytes, upper, min_one_batch)
        out = ReadResult(result.error_code, replica.high_watermark, result.log_start_offset,
                         result.log_end_offset)
        if result.error_code == ErrorCode.NONE and not result.records.is_empty:
            out.records = self._region(hosted.log, result.records)
            out.size_in_bytes = result.records.length_bytes
        return out

    def _region(self, partition_log: PartitionLog, file_slice: FileSlice) -> Any:
        if not self.use_sendfile:
            return partition_log.read_records_bytes(file_slice)
        cm = partition_log.storage.open_slice(file_slice)
        try:
            fd = cm.__enter__()
        except StaleFileSliceError:
            return partition_log.read_records_bytes(file_slice)
        return FileRegion(fd, file_slice.position, file_slice.length_bytes,
                          lambda: cm.__exit__(None, None, None))

    def _unknown_code(self, tp: TopicPartition) -> int:
        topic = self.image.topics.get(tp.topic)
        if topic is not None and tp.partition in topic.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    async def wait_for_data(self, tps: Iterable[TopicPartition], timeout_s: float) -> None:
        """Long poll: return when any of the partitions changes or the time is up."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        hosted = [self.partitions[tp] for tp in tps if tp in self.partitions]
        for h in hosted:
            h.waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            for h in hosted:
                if waiter in h.waiters:
                    h.waiters.remove(waiter)

    # ------------------------------------------------------------ offsets

    def list_offset(self, tp: TopicPartition, timestamp: int, current_leader_epoch: int,
                    isolation_committed: bool, replica_id: int) -> tuple[int, int, int, int]:
        """ListOffsets for one partition: (error, timestamp, offset, leader epoch)."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            return self._unknown_code(tp), -1, -1, -1
        if hosted.replica.role is not Role.LEADER and replica_id != -2:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1
        code = self.check_leader_epoch(hosted, current_leader_epoch)
        if code != ErrorCode.NONE:
            return code, -1, -1, -1
        hw = hosted.replica.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return ErrorCode.NONE, -1, hw, hosted.replica.leader_epoch
        if timestamp == EARLIEST_TIMESTAMP:
            start = hosted.log.log_start_offset
            return ErrorCode.NONE, -1, start, hosted.log.leader_epoch_cache.epoch_for_offset(start)
        found = hosted.log.offset_for_timestamp(timestamp)
        if found is None or found.offset >= hw:
            return ErrorCode.NONE, -1, -1, -1
        return ErrorCode.NONE, found.timestamp, found.offset, found.leader_epoch

    def end_offset_for_epoch(self, tp: TopicPartition, leader_epoch: int,
                             current_leader_epoch: int) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch: (error, epoch, end offset)."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            return self._unknown_code(tp), -1, -1
        if hosted.replica.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
        code = self.check_leader_epoch(hosted, current_leader_epoch)
        if code != ErrorCode.NONE:
            return code, -1, -1
        answer = hosted.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.NONE, answer.leader_epoch, answer.end_offset

    # ------------------------------------------------------------ time and shutdown

    def poll(self, now: int) -> float:
        """ISR shrink proposals, acks=all timeouts, log duties. Seconds until next due."""
        next_ms = 1000
        for hosted in list(self.partitions.values()):
            completions, effects, due = hosted.replica.poll(now)
            self._complete(completions)
            for effect in effects:
                self.send_alter_isr(effect, hosted)
            next_ms = min(next_ms, due)
        hw_of = lambda topic, partition: (self.partitions[TopicPartition(topic, partition)].replica.high_watermark
                                          if TopicPartition(topic, partition) in self.partitions else 0)
        next_ms = min(next_ms, self.logs.poll(now, hw_of))
        return max(0.01, next_ms / 1000)

    def checkpoint_high_watermarks(self) -> None:
        offsets = {(tp.topic, tp.partition): h.replica.high_watermark
                   for tp, h in self.partitions.items() if h.replica.role is not Role.NONE}
        self._hw_checkpoint.update(offsets)
        self.logs.storage.write_atomically(f"{self.logs.data_dir}/{HW_CHECKPOINT}",
                                           encode_offset_checkpoint(self._hw_checkpoint))

    def _read_hw_checkpoint(self) -> dict[tuple[str, int], int]:
        path = f"{self.logs.data_dir}/{HW_CHECKPOINT}"
        if not self.logs.storage.exists(path):
            return {}
        try:
            data = self.logs.storage.read(path, 0, self.logs.storage.size(path))
            return decode_offset_checkpoint(data)
        except Exception as e:  # a torn checkpoint: start from 0, the leader catches us up
            log.warning("ignoring unreadable %s: %s", path, e)
            return {}

    def shutdown(self) -> None:
        for hosted in self.partitions.values():
            self._complete(hosted.replica.stop())
            hosted.wake()
        self.checkpoint_high_watermarks()
        self.logs.shutdown()
