"""Record batches v2 (magic 2): the `records` payload of Produce and Fetch, and the log.

Theory of operation
-------------------
A `records` field holds batches laid end to end. Each batch is a fixed 61-byte header and
a records region, compressed as one blob when the attributes name a codec
(kafka-protocol/README.md, "Record batch v2"):

    offset  0  base_offset            int64   rewritten by the broker on append
            8  batch_length           int32   bytes after this field
           12  partition_leader_epoch int32   stamped by the broker
           16  magic                  int8    2  (legacy message sets keep magic here too)
           17  crc                    uint32  CRC-32C of bytes 21 .. end of batch
           21  attributes             int16   codec, timestamp type, transactional, control
           23  last_offset_delta      int32
           27  base_timestamp         int64
           35  max_timestamp          int64
           43  producer_id            int64
           51  producer_epoch         int16
           53  base_sequence          int32
           57  records_count          int32
           61  records ...

The module has three layers, from cheap to dear:

1. *Batch level* (`read_batch_header`, `iter_batches`, `validate_batches`): what the broker
   needs for Produce, replication and Fetch. One `struct.unpack_from` per batch and one
   CRC-32C pass over its bytes (the `crc32c` package uses SSE4.2 / ARMv8 instructions); the
   records are never looked at, so the cost is close to the CRC's own (bench/protocol.py).
   Magic is checked before anything else is trusted: a legacy message set (magic 0/1) puts
   its magic byte at the same offset 16, so it is recognised and refused with
   UnsupportedMagicError, never read as if it were v2.
2. *In-place rewrites* (`assign_base_offset`, `set_partition_leader_epoch`,
   `set_log_append_time`): the CRC starts at `attributes`, so the broker may rewrite the base
   offset and leader epoch without touching it; LogAppendTime changes attributes and
   max_timestamp and so recomputes it (Kafka's MutableRecordBatch does the same).
3. *Record level* (`decode_batch`, `decode_batches`, `RecordBatchBuilder`, `build_batch`):
   decompression and the zig-zag varint records, for clients and for the rare broker paths
   that must look inside (control records, compaction).

Everything here is pure: bytes in, values or bytes out. Bad input raises a `RecordError`
subclass carrying the Kafka `error_code`; nothing else escapes (no IndexError,
struct.error, codec errors). Misuse by Ketch's own code (a builder fed a str key) is a bug
and fails an assert.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

import crc32c

from clients.frozen import fast_init
from clients.records.compression import (
    CompressionType,
    compress,
    compression_type_for,
    decompress,
)
from clients.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
    UnsupportedMagicError,
)
from clients.records.varint import read_varint, read_varlong, write_varint, write_varlong

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "RECORD_BATCH_MAGIC",
    "NO_TIMESTAMP",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "DECOMPRESSED_BYTES_MAX_DEFAULT",
    "TimestampType",
    "ControlRecordType",
    "BatchHeader",
    "Record",
    "ControlRecord",
    "RecordBatch",
    "EndTransactionMarker",
    "read_batch_header",
    "iter_batches",
    "validate_batches",
    "assign_base_offset",
    "assign_offsets",
    "set_partition_leader_epoch",
    "set_log_append_time",
    "decode_batch",
    "decode_batches",
    "RecordBatchBuilder",
    "build_batch",
    "build_control_batch",
    "filtered_batch",
    "read_transaction_marker",
    "control_record_key",
    "end_transaction_marker_value",
    "decode_end_transaction_marker",
]

# -- layout --------------------------------------------------------------------------------

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes batch_length does not count
RECORD_BATCH_MAGIC = 2
# Invariant: batch_length >= BATCH_LENGTH_MIN (a batch is at least its header).
BATCH_LENGTH_MIN = BATCH_HEADER_SIZE - LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_BATCH_LENGTH_OFFSET = 8
_PARTITION_LEADER_EPOCH_OFFSET = 12
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35
# Bytes needed to know a batch's length and magic (Kafka's HEADER_SIZE_UP_TO_MAGIC).
_HEADER_BYTES_UP_TO_MAGIC = _MAGIC_OFFSET + 1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_MARKER = struct.Struct(">hi")  # version, coordinator_epoch

# Attribute bits.
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40  # KIP-534; set only by log compaction

# Kafka's sentinels.
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# A default for callers without a configured limit: comfortably above what Kafka's default
# limits let a producer send (message.max.bytes ~1 MiB, compressed), yet bounded.
DECOMPRESSED_BYTES_MAX_DEFAULT = 64 * 1024 * 1024


class TimestampType(IntEnum):
    """Bit 3 of the attributes."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    """The int16 type in a control record's key (Kafka's ControlRecordType)."""

    UNKNOWN = -1  # a newer type: Kafka's readers skip these, so do ours
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_CONTROL_TYPES = {t.value: t for t in ControlRecordType if t is not ControlRecordType.UNKNOWN}


# -- header --------------------------------------------------------------------------------


@fast_init
@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61 fixed bytes of a batch, as read; no record has been looked at."""

    base_offset: int
    batch_length: int  # Invariant: >= 49 (BATCH_LENGTH_MIN)
    partition_leader_epoch: int
    magic: int  # Invariant: == 2 once read_batch_header accepted it
    crc: int  # CRC-32C of attributes .. end of batch
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> CompressionType:
        return compression_type_for(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


# A frozen dataclass's __init__ pays an object.__setattr__ lookup per field; the broker
# reads one header per batch on every Produce and Fetch, so headers are built through the
# slot descriptors directly, which is what that __init__ does, minus the overhead.
_new = object.__new__
_set_base_offset = BatchHeader.base_offset.__set__  # type: ignore[attr-defined,misc]
_set_batch_length = BatchHeader.batch_length.__set__  # type: ignore[attr-defined,misc]
_set_partition_leader_epoch = BatchHeader.partition_leader_epoch.__set__  # type: ignore[attr-defined,misc]
_set_magic = BatchHeader.magic.__set__  # type: ignore[attr-defined,misc]
_set_crc = BatchHeader.crc.__set__  # type: ignore[attr-defined,misc]
_set_attributes = BatchHeader.attributes.__set__  # type: ignore[attr-defined,misc]
_set_last_offset_delta = BatchHeader.last_offset_delta.__set__  # type: ignore[attr-defined,misc]
_set_base_timestamp = BatchHeader.base_timestamp.__set__  # type: ignore[attr-defined,misc]
_set_max_timestamp = BatchHeader.max_timestamp.__set__  # type: ignore[attr-defined,misc]
_set_producer_id = BatchHeader.producer_id.__set__  # type: ignore[attr-defined,misc]
_set_producer_epoch = BatchHeader.producer_epoch.__set__  # type: ignore[attr-defined,misc]
_set_base_sequence = BatchHeader.base_sequence.__set__  # type: ignore[attr-defined,misc]
_set_records_count = BatchHeader.records_count.__set__  # type: ignore[attr-defined,misc]


def _header_from_fields(fields: tuple[int, ...]) -> BatchHeader:
    (base_offset, batch_length, partition_leader_epoch, magic, crc, attributes,
     last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
     base_sequence, records_count) = fields
    h = _new(BatchHeader)
    _set_base_offset(h, base_offset)
    _set_batch_length(h, batch_length)
    _set_partition_leader_epoch(h, partition_leader_epoch)
    _set_magic(h, magic)
    _set_crc(h, crc)
    _set_attributes(h, attributes)
    _set_last_offset_delta(h, last_offset_delta)
    _set_base_timestamp(h, base_timestamp)
    _set_max_timestamp(h, max_timestamp)
    _set_producer_id(h, producer_id)
    _set_producer_epoch(h, producer_epoch)
    _set_base_sequence(h, base_sequence)
    _set_records_count(h, records_count)
    return h


def _bad_magic(magic: int) -> Exception:
    if magic in (0, 1):
        return UnsupportedMagicError(magic)
    return CorruptRecordError(f"record batch magic {magic} is not a Kafka magic (0, 1 or 2)")


_unpack_header = _HEADER.unpack_from
_crc = crc32c.crc32c


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`, its magic and length checked, its CRC not.

    Needs the 61 header bytes only, not the whole batch.
    """
    avail = len(buf) - pos
    if avail < _HEADER_BYTES_UP_TO_MAGIC:
        raise CorruptRecordError(f"truncated record batch header: {avail} bytes at {pos}")
    magic = buf[pos + _MAGIC_OFFSET]
    if magic != RECORD_BATCH_MAGIC:
        raise _bad_magic(magic if magic < 128 else magic - 256)
    if avail < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"truncated record batch header: {avail} bytes at {pos}")
    header = _header_from_fields(_unpack_header(buf, pos))
    if header.batch_length < BATCH_LENGTH_MIN:
        raise CorruptRecordError(
            f"record batch length {header.batch_length} is below the minimum {BATCH_LENGTH_MIN}"
        )
    return header


def _batch_end_at(view: memoryview, pos: int, end: int, partial_tail_ok: bool) -> int:
    """End of the batch starting at `pos`, its magic and length checked; -1 for a partial
    tail when `partial_tail_ok`. The careful path, with a precise error for each fault."""
    avail = end - pos
    if avail < _HEADER_BYTES_UP_TO_MAGIC:
        if partial_tail_ok:
            return -1
        raise CorruptRecordError(f"truncated record batch: {avail} bytes at {pos}")
    magic = view[pos + _MAGIC_OFFSET]
    if magic != RECORD_BATCH_MAGIC:
        raise _bad_magic(magic if magic < 128 else magic - 256)
    (batch_length,) = _INT32.unpack_from(view, pos + _BATCH_LENGTH_OFFSET)
    if batch_length < BATCH_LENGTH_MIN:
        raise CorruptRecordError(
            f"record batch length {batch_length} at {pos} is below the minimum {BATCH_LENGTH_MIN}"
        )
    batch_end = pos + LOG_OVERHEAD + batch_length
    if batch_end > end:
        if partial_tail_ok:
            return -1
        raise CorruptRecordError(
            f"truncated record batch at {pos}: {batch_end - pos} bytes declared, {avail} present"
        )
    return batch_end


def iter_batches(
    buf: bytes | bytearray | memoryview, *, partial_tail_ok: bool = False, check_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch laid end to end in `buf`, CRC checked.

    With `partial_tail_ok`, bytes at the end that do not hold a whole batch end the
    iteration silently: a Fetch response may stop in the middle of a batch, and clients
    drop that part (Kafka's ByteBufferLogInputStream). Without it they are corrupt.
    Raises RecordError subclasses only; an invalid codec id raises
    UnsupportedCompressionTypeError.
    """
    view = memoryview(buf)
    end = len(view)
    pos = 0
    while pos < end:
        batch_end = _batch_end_at(view, pos, end, partial_tail_ok)
        if batch_end < 0:
            return
        header = _header_from_fields(_unpack_header(view, pos))
        if check_crc and _crc(view[pos + _ATTRIBUTES_OFFSET : batch_end]) != header.crc:
            raise CorruptRecordError(
                f"record batch at {pos} (base offset {header.base_offset}) fails its CRC-32C"
            )
        if header.attributes & _COMPRESSION_MASK > CompressionType.ZSTD:
            raise UnsupportedCompressionTypeError(header.attributes & _COMPRESSION_MASK)
        yield pos, header
        pos = batch_end


def validate_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Headers of every batch in `buf`, each checked (magic, lengths, codec id, CRC-32C).

    The broker's path for Produce: it never decodes a record. The whole buffer must be
    whole batches; an empty buffer gives an empty list (the caller decides if that is
    allowed). Raises a RecordError subclass on the first bad batch.
    """
    # iter_batches' loop, inlined and with cheap tests first: this runs once per batch on
    # every Produce. Any doubt goes to _batch_end_at, which raises the precise error.
    view = memoryview(buf)
    end = len(view)
    pos = 0
    headers: list[BatchHeader] = []
    append = headers.append
    unpack_header = _unpack_header
    crc = _crc
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE or view[pos + _MAGIC_OFFSET] != RECORD_BATCH_MAGIC:
            _batch_end_at(view, pos, end, False)
            raise AssertionError("_batch_end_at accepted a batch shorter than its header")
        fields = unpack_header(view, pos)
        batch_length = fields[1]
        batch_end = pos + LOG_OVERHEAD + batch_length
        if batch_length < BATCH_LENGTH_MIN or batch_end > end:
            _batch_end_at(view, pos, end, False)
            raise AssertionError("_batch_end_at accepted what validate_batches refused")
        if crc(view[pos + _ATTRIBUTES_OFFSET : batch_end]) != fields[4]:
            raise CorruptRecordError(
                f"record batch at {pos} (base offset {fields[0]}) fails its CRC-32C"
            )
        if fields[5] & _COMPRESSION_MASK > CompressionType.ZSTD:
            raise UnsupportedCompressionTypeError(fields[5] & _COMPRESSION_MASK)
        append(_header_from_fields(fields))
        pos = batch_end
    return headers


# -- in-place rewrites ---------------------------------------------------------------------


def _assert_batch_at(buf: bytearray | memoryview, pos: int) -> int:
    """The batch's end; the caller must have validated the batch (a bug otherwise)."""
    assert len(buf) - pos >= BATCH_HEADER_SIZE, (len(buf), pos)
    assert buf[pos + _MAGIC_OFFSET] == RECORD_BATCH_MAGIC, buf[pos + _MAGIC_OFFSET]
    (batch_length,) = _INT32.unpack_from(buf, pos + _BATCH_LENGTH_OFFSET)
    batch_end = pos + LOG_OVERHEAD + batch_length
    assert BATCH_LENGTH_MIN <= batch_length and batch_end <= len(buf), (batch_length, len(buf))
    return batch_end


def assign_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Set the base offset of the batch at `pos`. Not covered by the CRC: left as it is."""
    _assert_batch_at(buf, pos)
    assert base_offset >= 0, base_offset
    _INT64.pack_into(buf, pos, base_offset)


def assign_offsets(buf: bytearray | memoryview, base_offset: int) -> int:
    """Give the batches in `buf`, in order, consecutive offsets from `base_offset`.

    Each batch keeps its offset deltas, so it spans last_offset_delta + 1 offsets. Returns
    the next offset after the last batch (the log end offset after appending `buf`).
    """
    next_offset = base_offset
    for pos, header in iter_batches(buf, check_crc=False):
        _INT64.pack_into(buf, pos, next_offset)
        next_offset += header.last_offset_delta + 1
    return next_offset


def set_partition_leader_epoch(
    buf: bytearray | memoryview, partition_leader_epoch: int, pos: int = 0
) -> None:
    """Stamp the leader epoch of the batch at `pos` (KIP-101). Not covered by the CRC."""
    _assert_batch_at(buf, pos)
    _INT32.pack_into(buf, pos + _PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, log_append_time_ms: int, pos: int = 0) -> None:
    """Mark the batch at `pos` LogAppendTime with max_timestamp = `log_append_time_ms`.

    Readers then give every record of the batch this timestamp. Attributes and
    max_timestamp are inside the CRC, so the CRC is recomputed.
    """
    batch_end = _assert_batch_at(buf, pos)
    (attributes,) = _INT16.unpack_from(buf, pos + _ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + _ATTRIBUTES_OFFSET, attributes | _TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, log_append_time_ms)
    crc = _crc(memoryview(buf)[pos + _ATTRIBUTES_OFFSET : batch_end])
    _UINT32.pack_into(buf, pos + _CRC_OFFSET, crc)


# -- records -------------------------------------------------------------------------------


@fast_init
@dataclass(frozen=True, slots=True)
class Record:
    """One record as a consumer sees it: absolute offset and timestamp."""

    offset: int
    timestamp: int  # ms; with LogAppendTime, the batch's max_timestamp
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class ControlRecord(Record):
    """A record of a control batch (attribute bit 5), its key parsed.

    The value stays raw bytes: for ABORT/COMMIT see `decode_end_transaction_marker`; for
    the KRaft types it is the matching `data` schema (LeaderChangeMessage, ...), which
    `clients.protocol` decodes.
    """

    control_type: ControlRecordType = ControlRecordType.UNKNOWN


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A batch with its records decoded."""

    header: BatchHeader
    records: tuple[Record, ...]  # Invariant: len == header.records_count


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """The value of an ABORT or COMMIT control record."""

    version: int
    coordinator_epoch: int


def control_record_key(control_type: ControlRecordType) -> bytes:
    """The key of a control record of `control_type` (version 0)."""
    assert control_type is not ControlRecordType.UNKNOWN
    return _CONTROL_KEY.pack(0, control_type)


def end_transaction_marker_value(coordinator_epoch: int) -> bytes:
    """The value of an ABORT/COMMIT control record (version 0)."""
    return _END_TXN_MARKER.pack(0, coordinator_epoch)


def decode_end_transaction_marker(value: bytes | None) -> EndTransactionMarker:
    """Parse an ABORT/COMMIT control record's value; InvalidRecordError when malformed."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise InvalidRecordError(
            f"end transaction marker value of {0 if value is None else len(value)} bytes; "
            f"needs {_END_TXN_MARKER.size}"
        )
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"end transaction marker version {version}")
    return EndTransactionMarker(version=version, coordinator_epoch=coordinator_epoch)


def read_transaction_marker(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[bool, EndTransactionMarker] | None:
    """(committed, marker) of the transaction marker batch at `pos`; None when that
    control batch is no marker (a KRaft or unknown type) or is empty (a cleaned one).
    InvalidRecordError for a malformed marker."""
    header = read_batch_header(buf, pos)
    if header.attributes & _COMPRESSION_MASK == 0 and header.records_count == 1:
        # The common case (markers are written uncompressed), read in place: one
        # record's length, attributes, timestamp and offset deltas, then key and value.
        # A producer state rebuild meets one per transaction.
        at = pos + BATCH_HEADER_SIZE
        end = pos + header.size_in_bytes
        if end > len(buf):
            raise CorruptRecordError(f"truncated control batch at {pos}")
        _, at = read_varint(buf, at)            # record length
        at += 1                                 # record attributes
        _, at = read_varlong(buf, at)           # timestamp delta
        _, at = read_varint(buf, at)            # offset delta
        key_length, at = read_varint(buf, at)
        if key_length < _CONTROL_KEY.size or at + key_length > end:
            raise InvalidRecordError(f"control record key of {key_length} bytes")
        control_type = _control_type_of(bytes(buf[at:at + key_length]))
        at += key_length
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        value_length, at = read_varint(buf, at)
        value = bytes(buf[at:at + value_length]) if 0 <= value_length <= end - at else None
        return control_type is ControlRecordType.COMMIT, decode_end_transaction_marker(value)
    batch = decode_batch(buf, pos, check_crc=False)
    if not batch.records:
        return None
    record = batch.records[0]
    assert isinstance(record, ControlRecord), "decode_batch parses a control batch's key"
    if record.control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    return (record.control_type is ControlRecordType.COMMIT,
            decode_end_transaction_marker(record.value))


def _control_type_of(key: bytes | None) -> ControlRecordType:
    # Kafka's ControlRecordType.parse: version int16 (a newer one is read the same way),
    # then type int16; an unknown type is UNKNOWN, which readers skip.
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError(
            f"control record key of {0 if key is None else len(key)} bytes; needs 4"
        )
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"control record key version {version}")
    return _CONTROL_TYPES.get(type_id, ControlRecordType.UNKNOWN)


def _decode_records(data: bytes, header: BatchHeader) -> tuple[Record, ...]:
    """Parse `header.records_count` records filling all of `data` (the records region).

    The hot loop of the consumer: each varint is read inline when it fits one byte (the
    usual case for lengths under 64 and small deltas) and through `varint.py` otherwise.
    Every slice is checked against the end of its record; reads that run past the end of
    `data` surface as IndexError, which is turned into CorruptRecordError once, outside the
    loop, so the common path pays no extra test.
    """
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"negative records count {count}")
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.attributes & _TIMESTAMP_TYPE_BIT
    max_timestamp = header.max_timestamp
    is_control = header.attributes & _CONTROL_BIT
    end = len(data)
    pos = 0
    records: list[Record] = []
    append = records.append
    try:
        for _ in range(count):
            # length (varint)
            b = data[pos]
            pos += 1
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
            else:
                length, pos = read_varint(data, pos - 1)
            record_end = pos + length
            if length < 6 or record_end > end:
                # 6 = attributes + the five one-byte varints of the emptiest record
                raise CorruptRecordError(f"record length {length} at {pos} in a {end}-byte region")
            pos += 1  # attributes: unused
            # timestamp delta (varlong)
            b = data[pos]
            pos += 1
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
            else:
                timestamp_delta, pos = read_varlong(data, pos - 1)
            # offset delta (varint)
            b = data[pos]
            pos += 1
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
            else:
                offset_delta, pos = read_varint(data, pos - 1)
            # key
            b = data[pos]
            pos += 1
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
            else:
                key_length, pos = read_varint(data, pos - 1)
            if key_length >= 0:
                if pos + key_length > record_end:
                    raise CorruptRecordError(f"record key of {key_length} bytes overruns its record")
                key: bytes | None = data[pos : pos + key_length]
                pos += key_length
            elif key_length == -1:
                key = None
            else:
                raise CorruptRecordError(f"record key length {key_length}")
            # value
            b = data[pos]
            pos += 1
            if b < 0x80:
                value_length = (b >> 1) ^ -(b & 1)
            else:
                value_length, pos = read_varint(data, pos - 1)
            if value_length >= 0:
                if pos + value_length > record_end:
                    raise CorruptRecordError(
                        f"record value of {value_length} bytes overruns its record"
                    )
                value: bytes | None = data[pos : pos + value_length]
                pos += value_length
            elif value_length == -1:
                value = None
            else:
                raise CorruptRecordError(f"record value length {value_length}")
            # headers
            b = data[pos]
            pos += 1
            if b < 0x80:
                headers_count = (b >> 1) ^ -(b & 1)
            else:
                headers_count, pos = read_varint(data, pos - 1)
            if headers_count == 0:
                headers: tuple[tuple[str, bytes | None], ...] = ()
            else:
                headers, pos = _decode_headers(data, pos, record_end, headers_count)
            if pos != record_end:
                raise CorruptRecordError(
                    f"record declares {length} bytes but its fields take {length + pos - record_end}"
                )
            timestamp = max_timestamp if log_append_time else base_timestamp + timestamp_delta
            if is_control:
                append(ControlRecord(base_offset + offset_delta, timestamp, key, value, headers,
                                     _control_type_of(key)))
            else:
                append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    except IndexError:
        raise CorruptRecordError(
            f"records region of {end} bytes ends inside record {len(records)} of {count}"
        ) from None
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes left in the records region after {count} records"
        )
    return tuple(records)


def _decode_headers(
    data: bytes, pos: int, record_end: int, count: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    # Each header takes at least 2 bytes; a count that cannot fit is refused up front.
    if count * 2 > record_end - pos:
        raise CorruptRecordError(f"{count} headers cannot fit in {record_end - pos} bytes")
    headers = []
    for _ in range(count):
        # the one-byte varints inline, as in _decode_records
        b = data[pos]
        if b < 0x80:
            key_length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            key_length, pos = read_varint(data, pos)
        if key_length < 0 or pos + key_length > record_end:
            raise CorruptRecordError(f"header key length {key_length}")
        # Java's reader decodes header keys leniently (malformed UTF-8 becomes U+FFFD); so
        # do we, so that one odd producer cannot make a partition unreadable.
        key = data[pos : pos + key_length].decode("utf-8", "replace")
        pos += key_length
        b = data[pos]
        if b < 0x80:
            value_length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            value_length, pos = read_varint(data, pos)
        if value_length == -1:
            value = None
        elif value_length < 0 or pos + value_length > record_end:
            raise CorruptRecordError(f"header value length {value_length}")
        else:
            value = data[pos : pos + value_length]
            pos += value_length
        headers.append((key, value))
    return tuple(headers), pos


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
    check_crc: bool = True,
) -> RecordBatch:
    """The batch at `pos` with its records decompressed and decoded.

    `decompressed_bytes_max` bounds the records region after decompression.
    """
    view = memoryview(buf)
    header = read_batch_header(view, pos)
    batch_end = pos + header.size_in_bytes
    if batch_end > len(view):
        raise CorruptRecordError(
            f"truncated record batch at {pos}: {header.size_in_bytes} bytes declared, "
            f"{len(view) - pos} present"
        )
    if check_crc and _crc(view[pos + _ATTRIBUTES_OFFSET : batch_end]) != header.crc:
        raise CorruptRecordError(
            f"record batch at {pos} (base offset {header.base_offset}) fails its CRC-32C"
        )
    region = view[pos + BATCH_HEADER_SIZE : batch_end]
    compression = compression_type_for(header.attributes & _COMPRESSION_MASK)
    if compression == CompressionType.NONE:
        if len(region) > decompressed_bytes_max:
            raise RecordTooLargeError(
                f"records region of {len(region)} bytes passes the limit of "
                f"{decompressed_bytes_max} bytes"
            )
        data = bytes(region)
    else:
        data = decompress(compression, region, decompressed_bytes_max=decompressed_bytes_max)
    records = _decode_records(data, header)
    if header.attributes & _CONTROL_BIT and len(records) != 1:
        raise InvalidRecordError(f"control batch holds {len(records)} records; Kafka's hold 1")
    return RecordBatch(header=header, records=records)


def keyless_records(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
) -> list[int]:
    """The indexes of the records without a key in the batch at `pos` (what a compacted
    topic refuses), read from each record's lengths alone: no field is copied and no
    Record built. A records region that does not add up raises CorruptRecordError, as
    `decode_batch` would."""
    view = memoryview(buf)
    header = read_batch_header(view, pos)
    batch_end = pos + header.size_in_bytes
    if batch_end > len(view):
        raise CorruptRecordError(f"truncated record batch at {pos}")
    region = view[pos + BATCH_HEADER_SIZE : batch_end]
    compression = compression_type_for(header.attributes & _COMPRESSION_MASK)
    data = bytes(region) if compression == CompressionType.NONE else decompress(
        compression, region, decompressed_bytes_max=decompressed_bytes_max)
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"negative records count {count}")
    end = len(data)
    p = 0
    keyless: list[int] = []
    try:
        for i in range(count):
            b = data[p]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                length, p = read_varint(data, p)
            record_end = p + length
            if length < 6 or record_end > end:
                raise CorruptRecordError(f"record length {length} at {p} in a {end}-byte region")
            p += 1  # attributes
            while data[p] & 0x80:  # timestamp delta (varlong): skipped
                p += 1
            p += 1
            while data[p] & 0x80:  # offset delta (varint): skipped
                p += 1
            p += 1
            b = data[p]
            key_length = (b >> 1) ^ -(b & 1) if b < 0x80 else read_varint(data, p)[0]
            if key_length == -1:
                keyless.append(i)
            elif key_length < 0 or p + key_length > record_end:
                raise CorruptRecordError(f"record key length {key_length}")
            p = record_end
    except IndexError:
        raise CorruptRecordError(
            f"records region of {end} bytes ends inside record {len(keyless)} of {count}"
        ) from None
    if p != end:
        raise CorruptRecordError(f"{end - p} bytes left in the records region after {count} records")
    return keyless


def decode_batches(
    buf: bytes | bytearray | memoryview,
    *,
    partial_tail_ok: bool = False,
    decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
) -> list[RecordBatch]:
    """Every batch in `buf`, decoded. `partial_tail_ok` as in `iter_batches`.

    `decompressed_bytes_max` applies to each batch on its own.
    """
    view = memoryview(buf)
    return [
        decode_batch(view, pos, decompressed_bytes_max=decompressed_bytes_max, check_crc=False)
        for pos, _ in iter_batches(view, partial_tail_ok=partial_tail_ok)
    ]


# -- building ------------------------------------------------------------------------------

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1
_BYTES_LIKE = (bytes, bytearray, memoryview)


def _encode_record(out: bytearray, timestamp_delta: int, offset_delta: int, key: bytes | None,
                   value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> None:
    """One record v2, length-prefixed, appended to ``out``."""
    body = bytearray(1)  # attributes: unused, 0
    write_varlong(body, timestamp_delta)
    write_varint(body, offset_delta)
    if key is None:
        body.append(1)  # zig-zag -1
    else:
        write_varint(body, len(key))
        body += key
    if value is None:
        body.append(1)
    else:
        write_varint(body, len(value))
        body += value
    write_varint(body, len(headers))
    for header_key, header_value in headers:
        assert isinstance(header_key, str), type(header_key)
        encoded = header_key.encode("utf-8")
        write_varint(body, len(encoded))
        body += encoded
        if header_value is None:
            body.append(1)
        else:
            assert isinstance(header_value, _BYTES_LIKE), type(header_value)
            write_varint(body, len(header_value))
            body += header_value
    write_varint(out, len(body))
    out += body


class RecordBatchBuilder:
    """Accumulates records, then writes one batch v2 (compressed, CRC filled in).

    Used by producers (one builder per open batch) and by the broker for the batches it
    writes itself (control records, metadata). The first record's timestamp becomes the
    batch's base_timestamp, as in Kafka's MemoryRecordsBuilder; deltas may be negative.
    """

    def __init__(
        self,
        *,
        base_offset: int = 0,
        compression: CompressionType = CompressionType.NONE,
        compression_level: int | None = None,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        log_append_time_ms: int = NO_TIMESTAMP,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        assert base_offset >= 0, base_offset
        # LogAppendTime batches carry the append time in max_timestamp.
        assert (timestamp_type == TimestampType.LOG_APPEND_TIME) == (
            log_append_time_ms != NO_TIMESTAMP
        ), (timestamp_type, log_append_time_ms)
        assert not is_transactional or producer_id != NO_PRODUCER_ID, "transactional needs a producer id"
        self.base_offset = base_offset
        self.compression = CompressionType(compression)
        self.compression_level = compression_level
        self.timestamp_type = TimestampType(timestamp_type)
        self.log_append_time_ms = log_append_time_ms
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self._records = bytearray()
        self._count = 0
        # Invariant: with _count > 0, _base_timestamp is the first record's timestamp,
        # _max_timestamp the largest so far, _last_offset_delta the last record's delta.
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP
        self._last_offset_delta = -1

    @property
    def records_count(self) -> int:
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """The batch's size if built now without compression (an upper-bound estimate)."""
        return BATCH_HEADER_SIZE + len(self._records)

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        *,
        offset_delta: int | None = None,
    ) -> int:
        """Add one record; returns its offset delta (the next one unless given).

        `offset_delta` may skip ahead (compacted batches keep gaps) but never go back.
        """
        assert _INT64_MIN <= timestamp_ms <= _INT64_MAX, timestamp_ms
        assert key is None or isinstance(key, _BYTES_LIKE), type(key)
        assert value is None or isinstance(value, _BYTES_LIKE), type(value)
        if offset_delta is None:
            offset_delta = self._last_offset_delta + 1
        assert self._last_offset_delta < offset_delta <= _INT32_MAX, (self._last_offset_delta, offset_delta)
        assert not self.is_control or self._count == 0, "a control batch holds one record"
        if self._count == 0:
            self._base_timestamp = timestamp_ms
            self._max_timestamp = timestamp_ms
        elif timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        _encode_record(self._records, timestamp_ms - self._base_timestamp, offset_delta, key, value, headers)
        self._count += 1
        self._last_offset_delta = offset_delta
        return offset_delta

    def build(self) -> bytes:
        """The batch's bytes. A batch holds at least one record (as Kafka's builder)."""
        assert self._count > 0, "an empty batch is not built; Kafka sends none"
        region = compress(self.compression, self._records, level=self.compression_level)
        attributes = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= _TIMESTAMP_TYPE_BIT
            max_timestamp = self.log_append_time_ms
        else:
            max_timestamp = self._max_timestamp
        if self.is_transactional:
            attributes |= _TRANSACTIONAL_BIT
        if self.is_control:
            attributes |= _CONTROL_BIT
        out = bytearray(BATCH_HEADER_SIZE + len(region))
        _HEADER.pack_into(
            out,
            0,
            self.base_offset,
            len(out) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            RECORD_BATCH_MAGIC,
            0,  # crc, filled in below
            attributes,
            self._last_offset_delta,
            self._base_timestamp,
            max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        )
        out[BATCH_HEADER_SIZE:] = region
        _UINT32.pack_into(out, _CRC_OFFSET, _crc(memoryview(out)[_ATTRIBUTES_OFFSET:]))
        return bytes(out)


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time_ms: int = NO_TIMESTAMP,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One batch holding `records`; each record's offset must be >= `base_offset` and
    increasing (`decode_batch` gives them back, equal, for CreateTime batches)."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        compression=compression,
        compression_level=compression_level,
        timestamp_type=timestamp_type,
        log_append_time_ms=log_append_time_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        partition_leader_epoch=partition_leader_epoch,
    )
    for record in records:
        builder.append(
            record.timestamp,
            record.key,
            record.value,
            record.headers,
            offset_delta=record.offset - base_offset,
        )
    return builder.build()


def filtered_batch(header: BatchHeader, records: Sequence[Record]) -> bytes:
    """A copy of a batch holding only ``records``, a subsequence of its own records as
    ``decode_batch`` gave them: the same base offset, last offset delta, timestamps,
    producer fields, leader epoch, attributes and codec, so a reader's next offset is the
    same as after the whole batch; the record count, length and CRC are recomputed. With
    no records it is an empty batch, which readers step over (as over a batch that log
    compaction emptied)."""
    body = bytearray()
    log_append_time = header.attributes & _TIMESTAMP_TYPE_BIT
    for r in records:
        # LogAppendTime readers take max_timestamp: the deltas are not read.
        delta = 0 if log_append_time else r.timestamp - header.base_timestamp
        _encode_record(body, delta, r.offset - header.base_offset, r.key, r.value, r.headers)
    # An empty region has nothing to decompress: an empty batch is written uncompressed.
    region = compress(header.compression, body) if records else b""
    attributes = header.attributes if records else header.attributes & ~_COMPRESSION_MASK
    out = bytearray(BATCH_HEADER_SIZE + len(region))
    _HEADER.pack_into(out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch,
                      RECORD_BATCH_MAGIC, 0, attributes, header.last_offset_delta,
                      header.base_timestamp, header.max_timestamp, header.producer_id,
                      header.producer_epoch, header.base_sequence, len(records))
    out[BATCH_HEADER_SIZE:] = region
    _UINT32.pack_into(out, _CRC_OFFSET, _crc(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_control_batch(
    control_type: ControlRecordType,
    value: bytes,
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    is_transactional: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch of one record: transaction markers (ABORT/COMMIT, transactional,
    value from `end_transaction_marker_value`) or KRaft control records."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=is_transactional,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(timestamp_ms, control_record_key(control_type), value)
    return builder.build()
