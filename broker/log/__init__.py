"""Partition log storage: segments, indexes, the leader epoch cache, recovery, retention,
compaction and zero-copy reads.

Lives here: `PartitionLog` (one topic-partition's log), `LogManager` (all logs of a data
directory: loading, checkpoints, clean shutdown, periodic duties), `LogCleaner`
(cleanup.policy=compact), `LogConfig` (topic configs), the storage port (`FileStorage`
with its shared LRU of file descriptors, `SimStorage` for tests) and `FileSlice`, what a
read returns for `os.sendfile`, and the aborted transaction index per segment
(`TransactionIndex`, `AbortedTxn`) with the producer snapshot files beside the segments.

Does not live here: the high watermark, ISR and leader epochs as replication state
(`broker.replica`), producer state (`broker.producer_state`), anything networked. Every
method is synchronous and takes time as `now_ms`.

Picture of a produce and a fetch:

    Produce: records (bytearray or writable view) -> PartitionLog.append_as_leader -> validate (CRC, magic,
             sizes) -> assign offsets / stamp epoch in place -> active LogSegment.append
             -> storage.write; AppendResult(error_code, base_offset, ...)
    Fetch:   PartitionLog.read(fetch_offset, max_bytes, max_offset=HW or LEO)
             -> LogSegment.read (index lookup + header walk) -> FileSlice(path, position,
             length); the network shell does `with storage.open_slice(s) as fd:
             os.sendfile(sock, fd, s.position, s.length_bytes)`.
"""

from broker.log.cleaner import (
    CleaningPlan,
    CleanResult,
    LastRecord,
    LogCleaner,
    cleanable_range,
    dirty_ratio,
    logs_to_clean,
)
from broker.log.config import CREATE_TIME, LOG_APPEND_TIME, NO_LIMIT, LogConfig, LogConfigError
from broker.log.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    EpochEntry,
    LeaderEpochCache,
)
from broker.log.log_manager import LogManager, LogManagerConfig
from broker.log.offset_index import OffsetIndex
from broker.log.partition_log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    EARLIEST_LOCAL_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    AppendOrigin,
    AppendResult,
    LogReadResult,
    PartitionLog,
    RetentionResult,
    TimestampAndOffset,
    writable,
)
from broker.log.recovery import RecoveryReport, SegmentRecovery
from broker.log.segment import LogSegment, SegmentCorruptError
from broker.log.storage import (
    FileSlice,
    FileStorage,
    SimStorage,
    StaleFileSliceError,
    Storage,
    StorageError,
    read_slice_bytes,
)
from broker.log.time_index import TimeIndex
from broker.log.transaction_index import AbortedTxn, TransactionIndex

__all__ = [
    # logs
    "PartitionLog",
    "LogManager",
    "LogManagerConfig",
    "LogConfig",
    "LogConfigError",
    "NO_LIMIT",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    # results
    "AppendOrigin",
    "AppendResult",
    "LogReadResult",
    "TimestampAndOffset",
    "writable",
    "RetentionResult",
    "RecoveryReport",
    "SegmentRecovery",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    # leader epochs
    "LeaderEpochCache",
    "EpochEntry",
    "EpochEndOffset",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    # compaction
    "LastRecord",
    "LogCleaner",
    "CleaningPlan",
    "CleanResult",
    "cleanable_range",
    "dirty_ratio",
    "logs_to_clean",
    # storage
    "Storage",
    "FileStorage",
    "SimStorage",
    "FileSlice",
    "StaleFileSliceError",
    "StorageError",
    "read_slice_bytes",
    # building blocks
    "LogSegment",
    "SegmentCorruptError",
    "OffsetIndex",
    "TimeIndex",
    "TransactionIndex",
    "AbortedTxn",
]
