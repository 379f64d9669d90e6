"""The Produce path's decision: which records are parked rather than appended (pure).

A record whose header ``ketch.deliver.at`` (ms since the epoch, ASCII decimal) or
``ketch.deliver.after`` (ms from its arrival at the leader) puts it in the future is not
appended to its target partition. ``divert`` re-encodes each batch holding such records
without them, keeping the batch's base offset, last offset delta, producer id, epoch and
base sequence (``clients.records.filtered_batch``): the parked records leave offset gaps
exactly as log compaction does, and a batch whose records are all parked becomes an empty
batch spanning the same offsets (Kafka's cleaner keeps such batches for the same reason).
So the idempotent producer's sequence bookkeeping, followers, a new leader and every reader
see an ordinary batch; a parked record's offset in the Produce response is a hole, and
the delivered copy gets a new offset when due.

Bad input, the whole partition's data refused with INVALID_RECORD and a message (nothing
parked, nothing appended):
- a header that is not a decimal integer (or a negative ``after``), or both headers;
- a delivery time more than ``max_delay_ms`` ahead;
- a delayed record in a transactional batch (a transaction's records become visible at
  its commit; parking some of them would split it; not supported).
A delivery time not in the future (``due <= now``) is appended at once, as it is.

Cost: a produce with no ``ketch.deliver.`` bytes anywhere is passed through after one
substring search over the request's own buffer (no copy) and a look at each batch
header's magic and compression bits (compressed batches: after decompressing them, in C);
only batches that hold those bytes are decoded record by record.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from clients._core.delayed import DELIVER_AFTER, DELIVER_AT
from clients.records import (
    BATCH_HEADER_SIZE, DECOMPRESSED_BYTES_MAX_DEFAULT, CompressionType, RecordError, decode_batch,
    decompress, filtered_batch, iter_batches,
)
from clients.records.batch import BatchHeader
from clients.types import TopicPartition
from broker.delayed.store import ParkedRecord

__all__ = ["DELIVER_AFTER", "DELIVER_AT", "Diversion", "DivertError", "divert",
           "delivery_time"]
_MARKER = b"ketch.deliver."
# re searches any buffer in place: a memoryview into the request frame is not copied.
_find_marker = re.compile(re.escape(_MARKER)).search
# Record batch v2 header: batchLength at 8..12, magic at 16, attributes' low byte at 22.
_MAGIC_AT, _ATTRIBUTES_LOW_AT, _COMPRESSION_BITS = 16, 22, 0x07
_NO_PRODUCER = -1


class DivertError(ValueError):
    """Refuse the partition's data with INVALID_RECORD and this message."""


@dataclass(frozen=True, slots=True)
class Diversion:
    """What to append to the target (the re-encoded batches) and what to park."""
    records: bytes
    parked: tuple[ParkedRecord, ...]


def delivery_time(headers: tuple[tuple[str, bytes | None], ...] | list, arrival_ms: int) -> int | None:
    """The record's due time from its headers, None without them; DivertError if malformed."""
    at = after = None
    for name, value in headers:
        if name == DELIVER_AT:
            at = _decimal(name, value)
        elif name == DELIVER_AFTER:
            after = _decimal(name, value)
    if at is not None and after is not None:
        raise DivertError(f"a record carries both {DELIVER_AT} and {DELIVER_AFTER}")
    if after is not None:
        if after < 0:
            raise DivertError(f"{DELIVER_AFTER} is negative: {after}")
        return arrival_ms + after
    return at


def _decimal(name: str, value: bytes | None) -> int:
    text = b"" if value is None else value.strip()
    if not text or not (text.isdigit() or (text[:1] == b"-" and text[1:].isdigit())) or len(text) > 19:
        raise DivertError(f"header {name} must be a decimal integer (ms), got {value!r}")
    return int(text)


def divert(target: TopicPartition, records: bytes | bytearray | memoryview, now_ms: int,
           max_delay_ms: int, rng: random.Random) -> Diversion | None:
    """None: nothing to park, append ``records`` as they are. Raises DivertError for bad
    input; a RecordError from a malformed batch is left to the append to report (None)."""
    if _plainly_without_marker(records):
        return None
    raw = records if isinstance(records, (bytes, bytearray)) else bytes(records)
    view = memoryview(raw)
    try:
        batches = list(iter_batches(view, check_crc=False))
    except RecordError:
        return None
    if not batches:
        return None
    if _MARKER not in raw and all(h.compression == CompressionType.NONE for _, h in batches):
        return None
    out = bytearray()
    parked: list[ParkedRecord] = []
    changed = False
    for pos, header in batches:
        end = pos + header.size_in_bytes
        if header.is_control or not _may_carry_marker(view, pos, end, header):
            out += view[pos:end]
            continue
        try:
            batch = decode_batch(view, pos, check_crc=False)
        except RecordError:
            return None         # the append refuses it with the right code
        kept = []
        for r in batch.records:
            due = delivery_time(r.headers, now_ms)
            if due is None or due <= now_ms:
                kept.append(r)
                continue
            if due - now_ms > max_delay_ms:
                raise DivertError(f"delivery time {due} is {due - now_ms} ms ahead; at most "
                                  f"{max_delay_ms} ms (ketch.delayed.delivery.max.delay.ms)")
            if header.is_transactional:
                raise DivertError("delayed delivery is not supported in transactions: "
                                  f"a transactional record carries {DELIVER_AT}/{DELIVER_AFTER}")
            parked.append(ParkedRecord(
                _store_key(target, header, r.offset - header.base_offset, rng), target, due,
                r.timestamp, r.key, r.value,
                # The delivered copy says when it was due, absolutely: a relative
                # ``after`` would delay it again.
                tuple((n, v) for n, v in r.headers if n not in (DELIVER_AT, DELIVER_AFTER))
                + ((DELIVER_AT, str(due).encode()),)))
        if len(kept) == len(batch.records):
            out += view[pos:end]
        else:
            changed = True
            out += filtered_batch(header, kept)
    if not changed:
        return None
    return Diversion(bytes(out), tuple(parked))


def _plainly_without_marker(records: bytes | bytearray | memoryview) -> bool:
    """The common Produce, told without copying or decoding (about 8 % of a broker's
    Produce CPU went to ``iter_batches`` and a copy here): the marker's bytes are nowhere
    and every batch is an uncompressed v2 batch. False: ``divert`` looks closer (a
    malformed or older-format batch included)."""
    if _find_marker(records) is not None:
        return False
    end, pos = len(records), 0
    while pos + BATCH_HEADER_SIZE <= end:
        if records[pos + _MAGIC_AT] != 2 or records[pos + _ATTRIBUTES_LOW_AT] & _COMPRESSION_BITS:
            return False
        pos += 12 + int.from_bytes(records[pos + 8:pos + 12], "big")
    return pos == end


def _may_carry_marker(view: memoryview, pos: int, end: int, header: BatchHeader) -> bool:
    """Whether the batch's records region holds the header names' prefix at all: a
    compressed batch is only decompressed (C code) for this, its records decoded only
    when it does."""
    region = view[pos + BATCH_HEADER_SIZE:end]
    if header.compression == CompressionType.NONE:
        return _MARKER in region.tobytes()
    try:
        return _MARKER in decompress(header.compression, region,
                                     decompressed_bytes_max=DECOMPRESSED_BYTES_MAX_DEFAULT)
    except RecordError:
        return True         # decode_batch below meets the same error: the append reports it


def _store_key(target: TopicPartition, header: BatchHeader, offset_delta: int,
               rng: random.Random) -> bytes:
    """A parked record's unique id. For an idempotent producer it is derived from its
    producer id, epoch and sequence, so a retried Produce parks the same key again
    (compaction and the scheduler's index keep one); otherwise random."""
    if header.producer_id != _NO_PRODUCER and header.base_sequence >= 0:
        seq = (header.base_sequence + offset_delta) % 2**31
        return (f"{target.topic}:{target.partition}:{header.producer_id}:"
                f"{header.producer_epoch}:{seq}").encode()
    return f"{target.topic}:{target.partition}:r{rng.getrandbits(96):024x}".encode()
