"""Consumer positions and fetch planning, pure: what to fetch from whom, and what a fetch
response means for each partition.

Theory of operation
-------------------
``SubscriptionState`` holds, for every assigned partition, where the application reads
next (Kafka's SubscriptionState): a ``position`` (the offset of the next record to hand
out, with the leader epoch of the record before it, KIP-320), or a pending *reset* (no
position yet: look up the committed offset, or apply ``auto.offset.reset``), a ``paused``
flag, and what the last fetch said about the log (high watermark, last stable offset, log
start offset). Positions only move forward through ``advance`` (records handed out) and
anywhere through ``seek``.

``plan_fetches`` turns that into one Fetch request per leader, for partitions that have
a position, are not paused, have no fetch in flight and no records still buffered (so
records of one partition always come out in offset order, and a seek during a fetch
simply makes that fetch's answer stale: ``handle_partition_response`` drops data whose
fetch offset is no longer the position). Each partition carries its
``current_leader_epoch`` so a broker with a newer epoch answers FENCED_LEADER_EPOCH rather
than serving a stale leader's view.

``handle_partition_response`` reads one partition of a Fetch response: record batches
(decompressed; batches and records before the fetch offset skipped, since a compressed
batch is returned whole; control batches skipped; with ``read_committed`` the records of
aborted transactions dropped using the response's aborted-transaction list), or an error
turned into an action: refresh metadata (leader moved), reset the position
(OFFSET_OUT_OF_RANGE with a reset policy), or raise (OFFSET_OUT_OF_RANGE with
``auto.offset.reset=none``, authorization).
"""
from __future__ import annotations

import heapq
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable, Mapping

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.protocol.tag_filter import FETCH_TAG_FILTER, encode_tag_filter
from clients.protocol.fetch_session import (
    TOPIC_ID_FETCH_VERSION, ZERO_TOPIC_ID, FetchSessionHandler, SessionRequest, WantedPartition,
    request_topics,
)
import crc32c

from clients.records import (
    BATCH_HEADER_SIZE, DECOMPRESSED_BYTES_MAX_DEFAULT, CorruptRecordError, decode_batch, decompress, iter_batches,
)
from clients.records.batch import ControlRecordType
from clients.records.compression import compression_type_for
from clients.records.tags import record_matches
from clients.records.varint import read_varint, read_varlong
from clients.types import NO_LEADER_EPOCH, ConsumerRecord, TopicPartition

__all__ = [
    "ResetStrategy", "PartitionState", "SubscriptionState", "FetchPlan", "PartitionFetchResult",
    "plan_fetches", "handle_partition_response", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP",
    "READ_UNCOMMITTED", "READ_COMMITTED", "records_from_batches", "FETCH_VERSION_MIN",
    "FETCH_VERSION_MAX",
]

EARLIEST_TIMESTAMP = -2      # ListOffsets sentinels
LATEST_TIMESTAMP = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CONSUMER_REPLICA_ID = -1


class ResetStrategy(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"

    @property
    def timestamp(self) -> int:
        assert self is not ResetStrategy.NONE
        return EARLIEST_TIMESTAMP if self is ResetStrategy.EARLIEST else LATEST_TIMESTAMP


@dataclass(slots=True)
class PartitionState:
    # Invariant: position is None exactly when the partition awaits a committed offset or
    # a reset; then ``reset`` says which (None: look up the committed offset first).
    position: int | None = None
    position_epoch: int = NO_LEADER_EPOCH       # leader epoch of the last record consumed
    reset: ResetStrategy | None = None
    paused: bool = False
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    fetch_in_flight: bool = False
    error: Exception | None = None              # raised at the next poll (reset=none, ...)
    # KIP-320: the leader epoch our fetches last named; when the metadata shows a newer
    # one, the position is checked against the new leader's log before fetching again.
    fetch_epoch: int = NO_LEADER_EPOCH
    awaiting_validation: bool = False


class SubscriptionState:
    """Assigned partitions and their positions, in assignment order."""

    def __init__(self, default_reset: ResetStrategy) -> None:
        self.default_reset = default_reset
        self.partitions: dict[TopicPartition, PartitionState] = {}

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; partitions kept keep their positions."""
        keep = {tp: self.partitions[tp] for tp in partitions if tp in self.partitions}
        for tp in partitions:
            keep.setdefault(tp, PartitionState())
        self.partitions = keep

    def add(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.partitions.setdefault(tp, PartitionState())

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.partitions.pop(tp, None)

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self.partitions[tp]
        except KeyError:
            raise KeyError(f"partition {tp} is not assigned to this consumer") from None

    def seek(self, tp: TopicPartition, offset: int, epoch: int = NO_LEADER_EPOCH) -> None:
        s = self.state(tp)
        s.position, s.position_epoch, s.reset, s.error = offset, epoch, None, None
        s.awaiting_validation, s.fetch_epoch = False, NO_LEADER_EPOCH

    def maybe_validate(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """Note the leader epoch the next fetch will name; True when the leader changed
        under a position read from the old one, so it must be validated first (KIP-320:
        the new leader's log may end before our position, a truncation)."""
        s = self.partitions[tp]
        if s.awaiting_validation:
            return True
        if (s.fetch_epoch != NO_LEADER_EPOCH and leader_epoch > s.fetch_epoch
                and s.position_epoch != NO_LEADER_EPOCH and s.position is not None):
            s.awaiting_validation = True
            return True
        s.fetch_epoch = leader_epoch
        return False

    def complete_validation(self, tp: TopicPartition, leader_epoch: int, end_offset: int,
                            end_epoch: int) -> bool:
        """The new leader says our epoch ends at ``end_offset``; True if that is before our
        position (the log was truncated: the position moves back to ``end_offset``)."""
        s = self.partitions.get(tp)
        if s is None or not s.awaiting_validation:
            return False
        s.awaiting_validation, s.fetch_epoch = False, leader_epoch
        if s.position is not None and 0 <= end_offset < s.position:
            s.position, s.position_epoch = end_offset, end_epoch
            return True
        return False

    def request_reset(self, tp: TopicPartition, strategy: ResetStrategy | None = None) -> None:
        s = self.state(tp)
        s.position, s.reset, s.error = None, strategy or self.default_reset, None

    def needs_committed(self) -> list[TopicPartition]:
        return [tp for tp, s in self.partitions.items() if s.position is None and s.reset is None]

    def needs_reset(self) -> list[TopicPartition]:
        return [tp for tp, s in self.partitions.items() if s.position is None and s.reset is not None
                and s.reset is not ResetStrategy.NONE and s.error is None]

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, s in self.partitions.items()
                if s.position is not None and not s.paused and not s.fetch_in_flight and s.error is None
                and not s.awaiting_validation]


# Fetch versions Ketch's consumer speaks: v4 (isolation level) to v17; v13+ name topics by
# id, so a fetch naming a partition whose topic id is unknown stops at v12.
FETCH_VERSION_MIN = 4
FETCH_VERSION_MAX = 17
FETCH_VERSION_MAX_BY_NAME = TOPIC_ID_FETCH_VERSION - 1


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """One Fetch to one node; the request itself is built for the version the connection
    picks (``request(version)``), since v13+ name topics by id and the session must know."""
    node_id: int
    partitions: tuple[tuple[TopicPartition, int], ...]       # (partition, fetch offset)
    versions: tuple[int, int]
    wanted: dict[TopicPartition, WantedPartition]
    fields: dict[str, Any]                  # the request's other fields
    session: FetchSessionHandler | None     # KIP-227: None fetches sessionless

    def request(self, version: int) -> Any:
        """The Fetch request at ``version`` (one of ``versions``); with a session, this is
        the request the session's next ``handle_response`` answers."""
        assert self.versions[0] <= version <= self.versions[1]
        by_id = version >= TOPIC_ID_FETCH_VERSION
        session = (self.session.build(self.wanted, by_id) if self.session is not None
                   else SessionRequest(0, -1, tuple(self.wanted), (), by_id))
        topics, forgotten = request_topics(session, self.wanted)
        return messages.FetchRequest(session_id=session.session_id, session_epoch=session.session_epoch,
                                     topics=topics, forgotten_topics_data=forgotten, **self.fields)

    def topic_names(self) -> dict[uuid.UUID, str]:
        """How a v13+ answer's topic ids map back to the names this plan fetched."""
        return {w.topic_id: tp.topic for tp, w in self.wanted.items()}


def plan_fetches(subs: SubscriptionState, leaders: Mapping[TopicPartition, tuple[int, int]],
                 skip: Callable[[TopicPartition], bool], *, max_wait_ms: int, min_bytes: int,
                 max_bytes: int, partition_max_bytes: int, isolation_level: int,
                 rack_id: str = "", busy_nodes: Iterable[int] = (),
                 sessions: Mapping[int, FetchSessionHandler] | None = None,
                 topic_ids: Mapping[str, uuid.UUID] | None = None,
                 tag_filters: Mapping[str, frozenset[bytes]] | None = None) -> list[FetchPlan]:
    """One Fetch per leader for every fetchable partition that ``skip`` does not exclude
    (records still buffered) and whose leader is known and not busy. With ``sessions`` (a
    handler per node, KIP-227) a request names only what changed since the last one.
    ``topic_ids`` (from the metadata): with an id for every topic of a plan, the plan
    may use Fetch v13+; without, it stops at v12. ``tag_filters`` (topic -> wanted tags)
    ride in Ketch's tagged field (clients/protocol/tag_filter.py)."""
    busy = set(busy_nodes)
    ids = topic_ids or {}
    by_node: dict[int, dict[TopicPartition, WantedPartition]] = {}
    for tp in subs.fetchable():
        if skip(tp):
            continue
        leader = leaders.get(tp)
        if leader is None or leader[0] < 0 or leader[0] in busy:
            continue
        node, epoch = leader
        position = subs.partitions[tp].position
        assert position is not None     # fetchable: its position is known
        by_node.setdefault(node, {})[tp] = WantedPartition(
            position, epoch, partition_max_bytes, topic_id=ids.get(tp.topic, ZERO_TOPIC_ID))
    fields = dict(replica_id=CONSUMER_REPLICA_ID, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                  max_bytes=max_bytes, isolation_level=isolation_level, rack_id=rack_id)
    if tag_filters:
        fields["unknown_tagged_fields"] = ((FETCH_TAG_FILTER, encode_tag_filter(tag_filters)),)
    plans = []
    for node, wanted in by_node.items():
        by_id = all(w.topic_id != ZERO_TOPIC_ID for w in wanted.values())
        versions = (FETCH_VERSION_MIN, FETCH_VERSION_MAX if by_id else FETCH_VERSION_MAX_BY_NAME)
        plans.append(FetchPlan(node, tuple((tp, w.fetch_offset) for tp, w in wanted.items()),
                               versions, wanted, fields,
                               sessions.get(node) if sessions is not None else None))
    return plans


class FetchAction(Enum):
    RECORDS = "records"                 # records (maybe none) and a new position
    REFRESH_METADATA = "refresh"        # the leader moved or is unknown: ask again
    RESET = "reset"                     # out of range with a reset policy
    VALIDATE = "validate"               # epoch fenced: the shell refreshes metadata
    RAISE = "raise"                     # the application must see this error


@dataclass(slots=True)
class PartitionFetchResult:
    action: FetchAction
    records: list = field(default_factory=list)
    next_offset: int | None = None      # the position after these records
    last_epoch: int = NO_LEADER_EPOCH
    error_code: int = 0
    bytes_read: int = 0


_REFRESH = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
            ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_LEADER_EPOCH,
            ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_ID,
            ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.CORRUPT_MESSAGE}


def handle_partition_response(tp: TopicPartition, fetch_offset: int, data: Any, *, isolation_level: int,
                              make_record: Callable[..., Any] | None = None, check_crcs: bool = True,
                              tags: frozenset[bytes] | None = None) -> PartitionFetchResult:
    """What one partition of a Fetch response means (see the module docstring). With
    ``tags`` only records carrying one of them are returned: a Ketch broker has dropped
    the others already, any other broker has not."""
    code = data.error_code
    if code == ErrorCode.NONE:
        raw = data.records
        if not raw:
            return PartitionFetchResult(FetchAction.RECORDS, next_offset=fetch_offset)
        aborted = None
        if isolation_level == READ_COMMITTED and data.aborted_transactions:
            aborted = [(a.first_offset, a.producer_id) for a in data.aborted_transactions]
            heapq.heapify(aborted)
        records, next_offset, epoch = records_from_batches(tp, raw, fetch_offset, make_record, aborted, check_crcs)
        if tags is not None:
            records = [r for r in records if record_matches(r.headers, tags)]
        return PartitionFetchResult(FetchAction.RECORDS, records, next_offset, epoch, bytes_read=len(raw))
    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return PartitionFetchResult(FetchAction.RESET, error_code=code)
    if code == ErrorCode.FENCED_LEADER_EPOCH:
        return PartitionFetchResult(FetchAction.VALIDATE, error_code=code)
    if code in _REFRESH:
        return PartitionFetchResult(FetchAction.REFRESH_METADATA, error_code=code)
    return PartitionFetchResult(FetchAction.RAISE, error_code=code)


def records_from_batches(tp: TopicPartition, raw: Any, fetch_offset: int, make_record: Callable[..., Any] | None,
                         aborted: list | None = None, check_crcs: bool = True
                         ) -> tuple[list, int, int]:
    """Records at or after ``fetch_offset`` from the complete batches in ``raw`` (a partial
    batch at the end, cut by the fetch's byte limits, is left for the next fetch);
    returns (records, next fetch offset, leader epoch of the last batch read).
    ``make_record`` None builds ``ConsumerRecord``s (serialized sizes included)."""
    view = memoryview(raw)
    out: list = []
    next_offset = fetch_offset
    epoch = NO_LEADER_EPOCH
    aborted_pids: set[int] = set()
    topic, partition = tp.topic, tp.partition
    for pos, header in iter_batches(view, partial_tail_ok=True):
        if header.last_offset < fetch_offset:
            continue
        if aborted is not None:
            # producers whose aborted transaction started at or before this batch
            while aborted and aborted[0][0] <= header.last_offset:
                aborted_pids.add(heapq.heappop(aborted)[1])
        if header.is_control:
            batch = decode_batch(view, pos, check_crc=check_crcs)
            # an ABORT marker ends that producer's aborted transaction
            if aborted is not None and batch.records and \
                    getattr(batch.records[0], "control_type", None) == ControlRecordType.ABORT:
                aborted_pids.discard(header.producer_id)
            next_offset = header.last_offset + 1
            continue
        if aborted is not None and header.is_transactional and header.producer_id in aborted_pids:
            next_offset = header.last_offset + 1
            continue
        end = pos + header.size_in_bytes
        if check_crcs and crc32c.crc32c(view[pos + 21: end]) != header.crc:
            raise CorruptRecordError(f"{tp}: the record batch at offset {header.base_offset} fails its CRC-32C")
        region = view[pos + BATCH_HEADER_SIZE: end]
        compression = compression_type_for(header.attributes & 0x07)
        data = bytes(region) if compression == 0 else decompress(
            compression, region, decompressed_bytes_max=DECOMPRESSED_BYTES_MAX_DEFAULT)
        epoch = header.partition_leader_epoch
        _decode_into(out, data, header, fetch_offset, topic, partition, epoch, make_record)
        next_offset = header.last_offset + 1
    return out, next_offset, epoch


# Zig-zag varints of one byte (index: the byte) and of two (index: second byte << 8 | first;
# only entries with the first byte's continuation bit set are ever read).
_ZIGZAG_1 = [(b >> 1) ^ -(b & 1) for b in range(128)]
_ZIGZAG_2 = [(((b & 0x7F) | (b2 << 7)) >> 1) ^ -(((b & 0x7F) | (b2 << 7)) & 1) if b2 < 0x80 else 0
             for b2 in range(256) for b in range(256)]


def _decode_into(out: list, data: bytes, header: Any, fetch_offset: int, topic: str, partition: int,
                 epoch: int, make: Callable[..., Any] | None) -> None:
    """The consumer's hot loop: the records of one batch straight into ConsumerRecords
    (or ``make(...)`` objects), skipping those before ``fetch_offset``, with no
    intermediate Record objects.

    Varints of one or two bytes (every length under 8192) are read inline. Lengths are not
    checked field by field: a slice past the end of the data is only shorter, so a lying
    length shows as a record that does not end where its length says, which is checked
    once per record; reads past the end of the data raise IndexError, turned into
    CorruptRecordError once, outside the loop."""
    base_offset, base_ts = header.base_offset, header.base_timestamp
    ts_type = header.timestamp_type
    fixed_ts = header.max_timestamp if header.attributes & 0x08 else None   # LogAppendTime
    pos = 0
    append = out.append
    new, CR = tuple.__new__, ConsumerRecord       # ConsumerRecord is a NamedTuple: build it raw
    zz1, zz2 = _ZIGZAG_1, _ZIGZAG_2
    try:
        for _ in range(header.records_count):
            # record length
            b = data[pos]
            if b < 0x80:
                record_end = pos + 1 + zz1[b]
                pos += 2                                    # and the attributes byte
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    record_end = pos + 2 + zz2[(b2 << 8) | b]
                    pos += 3
                else:
                    length, pos = read_varint(data, pos)
                    record_end = pos + length
                    pos += 1
            # timestamp delta
            b = data[pos]
            if b < 0x80:
                ts_delta = zz1[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    ts_delta = zz2[(b2 << 8) | b]
                    pos += 2
                else:
                    ts_delta, pos = read_varlong(data, pos)
            # offset delta
            b = data[pos]
            if b < 0x80:
                off_delta = zz1[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    off_delta = zz2[(b2 << 8) | b]
                    pos += 2
                else:
                    off_delta, pos = read_varint(data, pos)
            # key
            b = data[pos]
            if b == 1:                                      # zig-zag -1: null key
                key = None
                klen = -1
                pos += 1
            else:
                if b < 0x80:
                    klen = zz1[b]
                    pos += 1
                else:
                    klen, pos = read_varint(data, pos)
                key = data[pos:pos + klen]
                pos += klen
            # value
            b = data[pos]
            if b < 0x80:
                vlen = zz1[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    vlen = zz2[(b2 << 8) | b]
                    pos += 2
                else:
                    vlen, pos = read_varint(data, pos)
            if vlen < 0:
                value = None
            else:
                value = data[pos:pos + vlen]
                pos += vlen
            # headers
            if data[pos] == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = _read_headers(data, pos, record_end)
            if pos != record_end or klen < -1 or vlen < -1:
                raise CorruptRecordError(
                    f"a record of the batch at offset {base_offset} ends at {pos}, its length says {record_end}")
            offset = base_offset + off_delta
            if offset >= fetch_offset:
                ts = base_ts + ts_delta if fixed_ts is None else fixed_ts
                if make is None:
                    append(new(CR, (topic, partition, offset, ts, ts_type, key, value, headers, epoch, klen, vlen)))
                else:
                    append(make(topic, partition, offset, ts, ts_type, key, value, headers, epoch))
    except IndexError:
        raise CorruptRecordError(f"a record of the batch at offset {base_offset} runs past its end") from None


def _read_headers(data: bytes, pos: int, record_end: int) -> tuple[tuple, int]:
    count, pos = read_varint(data, pos)
    if count < 0 or count > record_end - pos:
        raise CorruptRecordError(f"header count {count}")
    headers = []
    for _ in range(count):
        n, pos = read_varint(data, pos)
        if n < 0 or pos + n > record_end:
            raise CorruptRecordError(f"header key length {n}")
        key = data[pos:pos + n].decode()
        pos += n
        n, pos = read_varint(data, pos)
        if n < 0:
            value = None
        else:
            if pos + n > record_end:
                raise CorruptRecordError(f"header value length {n}")
            value = data[pos:pos + n]
            pos += n
        headers.append((key, value))
    return tuple(headers), pos


def default_make_record(topic: str, partition: int, offset: int, timestamp: int, ts_type: Any, key: Any,
                        value: Any, headers: Any, epoch: int) -> ConsumerRecord:
    return ConsumerRecord(topic, partition, offset, timestamp, ts_type, key, value, headers, epoch,
                          -1 if key is None else len(key), -1 if value is None else len(value))


