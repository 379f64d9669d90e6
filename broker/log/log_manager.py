"""All partition logs of one data directory: loading, checkpoints, shutdown, periodic duties.

Theory of operation
-------------------
A data directory holds one sub-directory per partition (`<topic>-<partition>`) and three
files of its own, as Kafka's `LogManager` keeps them:

* `recovery-point-offset-checkpoint`: per partition, the offset below which everything
  was fsynced. Written every `flush_offset_checkpoint_interval_ms` and at shutdown. It
  may lag the logs' real recovery points (that only costs recovery time), never lead
  them: it is written after the fsyncs it reports.
* `.kafka_cleanshutdown`: written last by a clean shutdown, removed right after loading,
  so a crash at any later time leads to recovery at the next start. It holds the broker
  epoch the broker had (KIP-966: `{"version":0,"broker_epoch":N}`), which the next start
  registers as its previous broker epoch: the controller then knows the shutdown was
  clean and keeps the broker among the eligible leader replicas.

(Unlike Kafka, a log start offset that DeleteRecords moved inside a segment is kept by
the partition itself, written before its leader epoch checkpoint is, so the two never
disagree after a crash; see `PartitionLog.maybe_increment_log_start_offset`.)

The checkpoint uses Kafka's text format: a version line `0`, a count line, then
`topic partition offset` lines. An unreadable checkpoint is treated as absent (recovery
from offset 0: slower, never wrong).

`poll(now_ms)` runs, for every log: the flush.ms policy; every
`retention_check_interval_ms` the retention pass (which needs each partition's high
watermark from the replica layer); and the checkpoint writes. It returns the ms until
something is next due. It does no waiting of its own; the broker's shell calls it.

One `FileStorage` (one LRU of file descriptors) serves every partition.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from broker.log.config import LogConfig
from broker.log.leader_epoch_cache import CorruptCheckpointError
from broker.log.partition_log import PartitionLog, RetentionResult
from broker.log.recovery import RecoveryReport
from broker.log.storage import Storage

__all__ = [
    "LogManager",
    "LogManagerConfig",
    "RECOVERY_POINT_CHECKPOINT",
    "CLEAN_SHUTDOWN_MARKER",
    "encode_offset_checkpoint",
    "decode_offset_checkpoint",
    "partition_dir_name",
    "parse_partition_dir_name",
]

log = logging.getLogger("ketch.log")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
_NO_DEADLINE_MS = 2**31 - 1

Key = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    flush_offset_checkpoint_interval_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> Key | None:
    topic, dash, number = name.rpartition("-")
    if not dash or not topic or not number.isdigit():
        return None
    return topic, int(number)


def encode_offset_checkpoint(offsets: Mapping[Key, int]) -> bytes:
    lines = ["0", str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode("utf-8")


def decode_offset_checkpoint(data: bytes) -> dict[Key, int]:
    try:
        lines = data.decode("utf-8").splitlines()
        if len(lines) < 2 or lines[0] != "0" or int(lines[1]) != len(lines) - 2:
            raise CorruptCheckpointError("bad offset checkpoint header")
        out: dict[Key, int] = {}
        for line in lines[2:]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        return out
    except (UnicodeDecodeError, ValueError) as e:
        if isinstance(e, CorruptCheckpointError):
            raise
        raise CorruptCheckpointError(str(e)) from None


class LogManager:
    def __init__(
        self,
        storage: Storage,
        data_dir: str,
        default_config: LogConfig,
        now_ms: int,
        manager_config: LogManagerConfig = LogManagerConfig(),
    ) -> None:
        self.storage = storage
        self.data_dir = data_dir.rstrip("/") or "/"
        self.default_config = default_config
        self.manager_config = manager_config
        self._logs: dict[Key, PartitionLog] = {}
        self._next_recovery_checkpoint_ms = now_ms + manager_config.flush_offset_checkpoint_interval_ms
        self._next_retention_ms = now_ms + manager_config.retention_check_interval_ms
        self.closed = False
        # The broker's epoch, kept for the clean-shutdown marker (set by the broker), and
        # the one the marker found at start (-1: none, or an unclean stop before).
        self.broker_epoch = -1
        self.previous_broker_epoch = -1

    @classmethod
    def open(
        cls,
        storage: Storage,
        data_dir: str,
        *,
        now_ms: int,
        default_config: LogConfig = LogConfig(),
        config_for_topic: Callable[[str], LogConfig] | None = None,
        manager_config: LogManagerConfig = LogManagerConfig(),
    ) -> tuple[LogManager, dict[Key, RecoveryReport]]:
        """Load every partition log under `data_dir`, recovering after an unclean stop."""
        manager = cls(storage, data_dir, default_config, now_ms, manager_config)
        storage.make_dirs(manager.data_dir)
        marker = manager._path(CLEAN_SHUTDOWN_MARKER)
        clean = storage.exists(marker)
        if clean:
            manager.previous_broker_epoch = _marker_broker_epoch(
                storage.read(marker, 0, storage.size(marker)))
        recovery_points = manager._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        reports: dict[Key, RecoveryReport] = {}
        for name in storage.list_dir(manager.data_dir):
            key = parse_partition_dir_name(name)
            if key is None:
                continue  # the checkpoint files and the marker
            config = config_for_topic(key[0]) if config_for_topic else default_config
            partition_log, report = PartitionLog.open(
                storage, f"{manager.data_dir}/{name}", config, now_ms=now_ms,
                recovery_point=recovery_points.get(key, 0),
                clean_shutdown=clean,
            )
            partition_log.on_recovery_point_lowered = manager.checkpoint_recovery_points
            manager._logs[key] = partition_log
            reports[key] = report
        # Recovery may have cut logs below their checkpointed recovery points: the file
        # must not keep claiming offsets that new appends will reuse.
        manager.checkpoint_recovery_points()
        if clean:
            storage.delete(marker)
            storage.fsync_dir(manager.data_dir)
        return manager, reports

    def _path(self, name: str) -> str:
        return f"{self.data_dir}/{name}"

    def _read_checkpoint(self, name: str) -> dict[Key, int]:
        path = self._path(name)
        if not self.storage.exists(path):
            return {}
        try:
            return decode_offset_checkpoint(self.storage.read(path, 0, self.storage.size(path)))
        except CorruptCheckpointError as e:
            log.warning("%s: unreadable (%s); treating as absent", path, e)
            return {}

    # --- logs -----------------------------------------------------------------------------

    def reconfigure(self, manager_config: LogManagerConfig, now_ms: int) -> None:
        """A dynamic broker config change: the new intervals count from now."""
        if manager_config == self.manager_config:
            return
        self.manager_config = manager_config
        self._next_retention_ms = min(self._next_retention_ms,
                                      now_ms + manager_config.retention_check_interval_ms)
        self._next_recovery_checkpoint_ms = min(
            self._next_recovery_checkpoint_ms,
            now_ms + manager_config.flush_offset_checkpoint_interval_ms)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(
        self, topic: str, partition: int, now_ms: int, config: LogConfig | None = None
    ) -> PartitionLog:
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        partition_log, _ = PartitionLog.open(
            self.storage, self._path(partition_dir_name(topic, partition)),
            config or self.default_config, now_ms=now_ms, clean_shutdown=True,
        )
        partition_log.on_recovery_point_lowered = self.checkpoint_recovery_points
        self._logs[key] = partition_log
        return partition_log

    def delete_log(self, topic: str, partition: int) -> bool:
        partition_log = self._logs.pop((topic, partition), None)
        if partition_log is None:
            return False
        partition_log.delete()
        return True

    def logs(self) -> Iterator[tuple[Key, PartitionLog]]:
        return iter(list(self._logs.items()))

    def __len__(self) -> int:
        return len(self._logs)

    # --- duties ---------------------------------------------------------------------------

    def poll(
        self, now_ms: int, high_watermark_of: Callable[[str, int], int] | None = None
    ) -> int:
        """Flushes, retention and checkpoints that are due; ms until the next is due.

        `high_watermark_of(topic, partition)` bounds retention; without it the LEO is used
        (a single replica).
        """
        assert not self.closed
        next_due = _NO_DEADLINE_MS
        for _, partition_log in self.logs():
            next_due = min(next_due, partition_log.poll(now_ms))
        if now_ms >= self._next_retention_ms:
            self.run_retention(now_ms, high_watermark_of)
            self._next_retention_ms = now_ms + self.manager_config.retention_check_interval_ms
        if now_ms >= self._next_recovery_checkpoint_ms:
            self.checkpoint_recovery_points()
            self._next_recovery_checkpoint_ms = (
                now_ms + self.manager_config.flush_offset_checkpoint_interval_ms)
        for due in (self._next_retention_ms, self._next_recovery_checkpoint_ms):
            next_due = min(next_due, max(0, due - now_ms))
        return next_due

    def run_retention(
        self, now_ms: int, high_watermark_of: Callable[[str, int], int] | None = None
    ) -> dict[Key, RetentionResult]:
        results = {}
        for key, partition_log in self.logs():
            hw = high_watermark_of(*key) if high_watermark_of else partition_log.log_end_offset
            result = partition_log.delete_old_segments(now_ms, hw)
            if result.deleted_base_offsets:
                log.info("%s-%d: retention deleted segments %s (%s)", key[0], key[1],
                         list(result.deleted_base_offsets), ", ".join(sorted(set(result.reasons))))
                results[key] = result
        return results

    def checkpoint_recovery_points(self) -> None:
        offsets = {key: pl.recovery_point for key, pl in self._logs.items()}
        self.storage.write_atomically(self._path(RECOVERY_POINT_CHECKPOINT),
                                      encode_offset_checkpoint(offsets))

    def flush_all(self, now_ms: int) -> None:
        for _, partition_log in self.logs():
            partition_log.flush(now_ms)
        self.checkpoint_recovery_points()

    def shutdown(self) -> None:
        """Clean shutdown: fsync every log, write the checkpoint, then the marker."""
        if self.closed:
            return
        for _, partition_log in self.logs():
            partition_log.close(fsync=False)
        # One sync for every log, index and staged epoch checkpoint, instead of five
        # fsyncs per partition; only then may the checkpoint and marker say "clean".
        self.storage.sync_all()
        self.checkpoint_recovery_points()
        self.storage.write_atomically(
            self._path(CLEAN_SHUTDOWN_MARKER),
            json.dumps({"version": 0, "broker_epoch": self.broker_epoch}).encode())
        self.storage.close()
        self.closed = True


def _marker_broker_epoch(data: bytes) -> int:
    """The broker epoch a clean-shutdown marker holds; -1 for an empty (older) or
    unreadable one: the controller then treats the stop as unclean, the safe side."""
    try:
        value = json.loads(data.decode()).get("broker_epoch", -1)
    except (ValueError, AttributeError):
        return -1
    return value if isinstance(value, int) else -1
