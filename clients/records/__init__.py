"""Record batches v2 (magic 2), the `records` bytes of Produce, Fetch and the log.

Lives here: the batch header fast path the broker uses (`validate_batches`,
`iter_batches`, `read_batch_header`) and its in-place rewrites (`assign_base_offset`,
`set_partition_leader_epoch`, `set_log_append_time`); full record decoding and encoding
(`decode_batch`, `RecordBatchBuilder`, `build_batch`, control records); the four
compression codecs (`compression`); the typed errors, each with a Kafka `error_code`
(`errors`); the zig-zag varints of records (`varint`, not re-exported here).

Does not live here: the request/response codec (`clients.protocol`), log segments and
offsets bookkeeping (`broker.log`), producer-state checks such as sequence numbers (broker).
Legacy message sets (magic 0/1) are refused, not parsed.
"""

from clients.records.batch import (
    BATCH_HEADER_SIZE,
    DECOMPRESSED_BYTES_MAX_DEFAULT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_MAGIC,
    BatchHeader,
    ControlRecord,
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    assign_base_offset,
    assign_offsets,
    build_batch,
    build_control_batch,
    filtered_batch,
    control_record_key,
    decode_batch,
    decode_batches,
    decode_end_transaction_marker,
    end_transaction_marker_value,
    iter_batches,
    keyless_records,
    read_batch_header,
    read_transaction_marker,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)
from clients.records.compression import CompressionType, compress, compression_type_for, decompress
from clients.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
    UnsupportedMagicError,
)

__all__ = [
    # batch level (broker fast path)
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "RECORD_BATCH_MAGIC",
    "BatchHeader",
    "read_batch_header",
    "iter_batches",
    "validate_batches",
    "assign_base_offset",
    "assign_offsets",
    "set_partition_leader_epoch",
    "set_log_append_time",
    # records
    "NO_TIMESTAMP",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "DECOMPRESSED_BYTES_MAX_DEFAULT",
    "TimestampType",
    "Record",
    "RecordBatch",
    "decode_batch",
    "decode_batches",
    "keyless_records",
    "RecordBatchBuilder",
    "build_batch",
    # control records
    "ControlRecordType",
    "ControlRecord",
    "EndTransactionMarker",
    "build_control_batch",
    "filtered_batch",
    "read_transaction_marker",
    "control_record_key",
    "end_transaction_marker_value",
    "decode_end_transaction_marker",
    # compression
    "CompressionType",
    "compression_type_for",
    "compress",
    "decompress",
    # errors
    "RecordError",
    "CorruptRecordError",
    "UnsupportedMagicError",
    "UnsupportedCompressionTypeError",
    "RecordTooLargeError",
    "InvalidRecordError",
]
