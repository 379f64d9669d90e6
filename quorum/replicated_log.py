"""The metadata log as the replicated state of the controller quorum (pure: no I/O, no clock).

Theory of operation
-------------------
Kafka's KRaft keeps the cluster metadata in one log, ``__cluster_metadata``, whose Raft
leader is the active controller. Ketch runs Raft with pysyncobj (``quorum/raft.py``), and
this module is the state machine pysyncobj replicates: every Raft entry is one *command*
and applying the committed commands, in order, on every controller yields the same log.

Three commands exist:

- ``LeaderChangeCommand(epoch, leader_id)``: proposed by a node right after it wins the
  Raft election for term ``epoch`` (Kafka writes a LeaderChangeMessage control record for
  the same reason). Once it is applied, every entry of earlier terms has been applied too,
  so the new leader's view of the log is complete: only from then on may it append. This
  is the point where a hot standby becomes the *active* controller.
- ``AppendCommand(request_id, epoch, expected_base_offset, append_time_ms, records)``: a
  batch of encoded metadata records appended atomically. Its records get the offsets
  ``expected_base_offset .. expected_base_offset + len(records) - 1``.
- ``VotersCommand(epoch, voters)``: the controller quorum's voter set (KIP-853), an encoded
  ``VotersRecord`` that this module keeps opaque (``quorum/voters.py`` reads it). It is
  Kafka's VotersRecord control record: fenced by epoch like an append, it takes no offset
  and brokers never see it. The last one applied is the voter set, dumped with the state.

Apply is a compare-and-set, so that a command can never land twice or out of place:

1. a ``request_id`` seen in the dedupe window is a duplicate: nothing is appended and the
   offsets it got the first time are reported again (a retry after an unknown outcome is
   safe);
2. an ``epoch`` other than the established leader epoch is fenced: pysyncobj forwards
   commands queued on a deposed leader to the new one, and these were computed on state
   that may be stale (Kafka: ``scheduleAppend`` fails when the epoch moved on);
3. an ``expected_base_offset`` other than ``next_offset`` is rejected: the leader assigns
   offsets when it proposes (as Kafka's ``scheduleAppend`` returns the offset), so any
   reordering or loss upstream shows up here instead of shifting offsets silently.

Offsets are per record, as in Kafka: the first record of the log has offset 0 and a batch's
base offset is the previous batch's last offset + 1. Leader changes take no offset.

Log compaction: a controller may replace the prefix of its log with a *snapshot* (the
records of its metadata image at ``end_offset``, written by ``metadata_log.snapshot``).
Snapshots are taken independently on each node, as in KRaft; the log they stand for is the
same. ``CommittedLog`` is the read side (the metadata fetch serves from it);
``ReplicatedLogState`` is the apply side, which pysyncobj also dumps to disk.
"""
from __future__ import annotations

import bisect
import struct
from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Iterator, Sequence

import crc32c

from metadata_log.committed import CommittedBatch, MetadataSnapshot

REQUEST_ID_BYTES = 16
DEDUPE_WINDOW_DEFAULT = 4096
NO_LEADER = -1
NO_OFFSET = -1


class CorruptCommandError(Exception):
    """Bytes that do not decode as a command or a state dump (a bug or a damaged file)."""


# ---------------------------------------------------------------------------------------
# Value objects


@dataclass(frozen=True, slots=True)
class AppendCommand:
    request_id: bytes               # Invariant: REQUEST_ID_BYTES long, unique per proposal
    epoch: int
    expected_base_offset: int
    append_time_ms: int
    records: tuple[bytes, ...]      # Invariant: non-empty


@dataclass(frozen=True, slots=True)
class LeaderChangeCommand:
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class VotersCommand:
    epoch: int
    voters: bytes                   # an encoded VotersRecord (quorum/voters.py)


Command = AppendCommand | LeaderChangeCommand | VotersCommand


# Outcomes of apply: data, handed from pysyncobj's thread to the asyncio side.

@dataclass(frozen=True, slots=True)
class Appended:
    request_id: bytes
    batch: CommittedBatch


@dataclass(frozen=True, slots=True)
class Duplicate:
    request_id: bytes
    base_offset: int
    last_offset: int


class RejectReason(Enum):
    FENCED_EPOCH = "fenced_epoch"           # proposed under an epoch that is not the current one
    OFFSET_MISMATCH = "offset_mismatch"     # the log moved: expected_base_offset != next_offset
    CORRUPT = "corrupt"                     # did not decode (never expected from our own peers)


@dataclass(frozen=True, slots=True)
class Rejected:
    request_id: bytes
    reason: RejectReason
    leader_epoch: int
    next_offset: int


@dataclass(frozen=True, slots=True)
class LeaderEstablished:
    epoch: int
    leader_id: int
    next_offset: int                # the offset the new leader's first batch will get


@dataclass(frozen=True, slots=True)
class LeaderChangeIgnored:
    epoch: int                      # a stale marker: a later epoch is established already
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class VotersChanged:
    epoch: int
    voters: bytes


@dataclass(frozen=True, slots=True)
class VotersFenced:
    epoch: int                      # proposed under an epoch that is not the current one
    leader_epoch: int


ApplyOutcome = (Appended | Duplicate | Rejected | LeaderEstablished | LeaderChangeIgnored
                | VotersChanged | VotersFenced)


# ---------------------------------------------------------------------------------------
# Command codec: a few fixed fields and length-prefixed records, big-endian as Kafka is.


class _Kind(IntEnum):
    APPEND = 1
    LEADER_CHANGE = 2
    VOTERS = 3


_APPEND_HEAD = struct.Struct(">B16sIqqI")       # kind, request id, epoch, base, time, count
_LEADER_CHANGE = struct.Struct(">BIi")          # kind, epoch, leader id
_VOTERS_HEAD = struct.Struct(">BI")             # kind, epoch; then the VotersRecord
_U32 = struct.Struct(">I")


def _pack_records(records: Sequence[bytes]) -> list[bytes]:
    parts: list[bytes] = []
    for record in records:
        parts.append(_U32.pack(len(record)))
        parts.append(record)
    return parts


def _unpack_records(data: bytes | memoryview, pos: int, count: int) -> tuple[tuple[bytes, ...], int]:
    view = memoryview(data)
    records: list[bytes] = []
    end = len(view)
    for _ in range(count):
        if pos + 4 > end:
            raise CorruptCommandError("record length past the end")
        (size,) = _U32.unpack_from(view, pos)
        pos += 4
        if pos + size > end:
            raise CorruptCommandError("record past the end")
        records.append(bytes(view[pos:pos + size]))
        pos += size
    return tuple(records), pos


def encode_command(command: Command) -> bytes:
    if isinstance(command, AppendCommand):
        assert len(command.request_id) == REQUEST_ID_BYTES
        assert command.records, "an append carries at least one record"
        head = _APPEND_HEAD.pack(_Kind.APPEND, command.request_id, command.epoch,
                                 command.expected_base_offset, command.append_time_ms,
                                 len(command.records))
        return b"".join([head, *_pack_records(command.records)])
    if isinstance(command, VotersCommand):
        assert command.voters, "a voter set is never empty"
        return _VOTERS_HEAD.pack(_Kind.VOTERS, command.epoch) + command.voters
    assert isinstance(command, LeaderChangeCommand)
    return _LEADER_CHANGE.pack(_Kind.LEADER_CHANGE, command.epoch, command.leader_id)


def decode_command(data: bytes) -> Command:
    try:
        kind = data[0]
        if kind == _Kind.APPEND:
            _, rid, epoch, base, time_ms, count = _APPEND_HEAD.unpack_from(data, 0)
            records, pos = _unpack_records(data, _APPEND_HEAD.size, count)
            if pos != len(data) or not records:
                raise CorruptCommandError("trailing bytes or empty append")
            return AppendCommand(rid, epoch, base, time_ms, records)
        if kind == _Kind.LEADER_CHANGE:
            if len(data) != _LEADER_CHANGE.size:
                raise CorruptCommandError("leader change has the wrong size")
            _, epoch, leader_id = _LEADER_CHANGE.unpack(data)
            return LeaderChangeCommand(epoch, leader_id)
        if kind == _Kind.VOTERS:
            _, epoch = _VOTERS_HEAD.unpack_from(data, 0)
            if len(data) == _VOTERS_HEAD.size:
                raise CorruptCommandError("voters command without voters")
            return VotersCommand(epoch, bytes(data[_VOTERS_HEAD.size:]))
    except (IndexError, struct.error) as e:
        raise CorruptCommandError(str(e)) from e
    raise CorruptCommandError(f"unknown command kind {data[0]}")


# ---------------------------------------------------------------------------------------
# The apply side


class ReplicatedLogState:
    """The deterministic state pysyncobj replicates: apply() is called with each committed
    command, in log order, on every controller."""

    def __init__(self, dedupe_window_size: int = DEDUPE_WINDOW_DEFAULT) -> None:
        assert dedupe_window_size > 0
        self.dedupe_window_size = dedupe_window_size
        # Invariant: next_offset == batches[-1].next_offset if batches
        #            else (snapshot.end_offset if snapshot else 0)
        self.next_offset = 0
        self.leader_epoch = 0           # the last established epoch; 0: none yet
        self.leader_id = NO_LEADER
        self.snapshot: MetadataSnapshot | None = None
        self.batches: list[CommittedBatch] = []
        # request id -> (base_offset, last_offset); oldest first, evicted first. Part of the
        # replicated state, so every node evicts the same ids at the same point.
        self.dedupe: OrderedDict[bytes, tuple[int, int]] = OrderedDict()
        self.voters: bytes | None = None    # the last VotersCommand's; None: static voters

    def apply(self, command: Command) -> ApplyOutcome:
        if isinstance(command, LeaderChangeCommand):
            return self._apply_leader_change(command)
        if isinstance(command, VotersCommand):
            if command.epoch != self.leader_epoch:
                return VotersFenced(command.epoch, self.leader_epoch)
            self.voters = command.voters
            return VotersChanged(command.epoch, command.voters)
        return self._apply_append(command)

    def apply_encoded(self, data: bytes) -> ApplyOutcome:
        try:
            command = decode_command(data)
        except CorruptCommandError:
            return Rejected(b"", RejectReason.CORRUPT, self.leader_epoch, self.next_offset)
        return self.apply(command)

    def _apply_leader_change(self, command: LeaderChangeCommand) -> ApplyOutcome:
        if command.epoch <= self.leader_epoch:
            return LeaderChangeIgnored(command.epoch, self.leader_epoch)
        self.leader_epoch = command.epoch
        self.leader_id = command.leader_id
        return LeaderEstablished(command.epoch, command.leader_id, self.next_offset)

    def _apply_append(self, command: AppendCommand) -> ApplyOutcome:
        seen = self.dedupe.get(command.request_id)
        if seen is not None:
            return Duplicate(command.request_id, seen[0], seen[1])
        if command.epoch != self.leader_epoch:
            return Rejected(command.request_id, RejectReason.FENCED_EPOCH,
                            self.leader_epoch, self.next_offset)
        if command.expected_base_offset != self.next_offset:
            return Rejected(command.request_id, RejectReason.OFFSET_MISMATCH,
                            self.leader_epoch, self.next_offset)
        batch = CommittedBatch(self.next_offset, command.epoch, command.append_time_ms,
                               command.records)
        self.batches.append(batch)
        self.next_offset = batch.next_offset
        self.dedupe[command.request_id] = (batch.base_offset, batch.last_offset)
        if len(self.dedupe) > self.dedupe_window_size:
            self.dedupe.popitem(last=False)
        return Appended(command.request_id, batch)

    def compact(self, snapshot: MetadataSnapshot) -> None:
        """Replace the log below snapshot.end_offset by the snapshot (local, not replicated)."""
        assert snapshot.end_offset <= self.next_offset, "snapshot of uncommitted records"
        if self.snapshot is not None and snapshot.end_offset <= self.snapshot.end_offset:
            return
        keep = [b for b in self.batches if b.base_offset >= snapshot.end_offset]
        dropped = len(self.batches) - len(keep)
        if dropped:
            # A snapshot must end on a batch boundary: batches are atomic.
            assert self.batches[dropped - 1].next_offset == snapshot.end_offset
        self.batches = keep
        self.snapshot = snapshot

    def copy(self) -> "ReplicatedLogState":
        """An independent copy (records are immutable bytes and are shared)."""
        other = ReplicatedLogState(self.dedupe_window_size)
        other.next_offset, other.leader_epoch, other.leader_id = (
            self.next_offset, self.leader_epoch, self.leader_id)
        other.snapshot = self.snapshot
        other.batches = list(self.batches)
        other.dedupe = OrderedDict(self.dedupe)
        other.voters = self.voters
        return other

    # -- dump: the state as bytes, for pysyncobj's log compaction and snapshot install --

    _DUMP_MAGIC = b"KETCHMLS"
    _DUMP_VERSION = 2               # 2 added the voter set at the end; 1 is still read
    _NO_VOTERS = 0xFFFFFFFF
    _DUMP_HEAD = struct.Struct(">8sHqIiII")  # magic, version, next offset, epoch, leader, window, dedupe n
    _DUMP_SNAPSHOT = struct.Struct(">BqII")  # present, end offset, epoch, count
    _DUMP_BATCH = struct.Struct(">qIqI")     # base offset, epoch, time, count
    _DUMP_DEDUPE = struct.Struct(">16sqq")

    def encode(self) -> bytes:
        parts = [self._DUMP_HEAD.pack(self._DUMP_MAGIC, self._DUMP_VERSION, self.next_offset,
                                      self.leader_epoch, self.leader_id,
                                      self.dedupe_window_size, len(self.dedupe))]
        for rid, (base, last) in self.dedupe.items():
            parts.append(self._DUMP_DEDUPE.pack(rid, base, last))
        snap = self.snapshot
        if snap is None:
            parts.append(self._DUMP_SNAPSHOT.pack(0, 0, 0, 0))
        else:
            parts.append(self._DUMP_SNAPSHOT.pack(1, snap.end_offset, snap.epoch, len(snap.records)))
            parts.extend(_pack_records(snap.records))
        parts.append(_U32.pack(len(self.batches)))
        for b in self.batches:
            parts.append(self._DUMP_BATCH.pack(b.base_offset, b.epoch, b.append_time_ms,
                                               len(b.records)))
            parts.extend(_pack_records(b.records))
        if self.voters is None:
            parts.append(_U32.pack(self._NO_VOTERS))
        else:
            parts += [_U32.pack(len(self.voters)), self.voters]
        body = b"".join(parts)
        return body + _U32.pack(crc32c.crc32c(body))

    @classmethod
    def decode(cls, data: bytes) -> "ReplicatedLogState":
        if len(data) < 4 or crc32c.crc32c(memoryview(data)[:-4]) != _U32.unpack_from(data, len(data) - 4)[0]:
            raise CorruptCommandError("state dump checksum mismatch")
        view = memoryview(data)[:-4]
        try:
            magic, version, next_offset, epoch, leader, window, n_dedupe = cls._DUMP_HEAD.unpack_from(view, 0)
            if magic != cls._DUMP_MAGIC or version not in (1, cls._DUMP_VERSION):
                raise CorruptCommandError("not a Ketch metadata log dump")
            state = cls(window)
            state.next_offset, state.leader_epoch, state.leader_id = next_offset, epoch, leader
            pos = cls._DUMP_HEAD.size
            for _ in range(n_dedupe):
                rid, base, last = cls._DUMP_DEDUPE.unpack_from(view, pos)
                state.dedupe[rid] = (base, last)
                pos += cls._DUMP_DEDUPE.size
            present, end_offset, snap_epoch, count = cls._DUMP_SNAPSHOT.unpack_from(view, pos)
            pos += cls._DUMP_SNAPSHOT.size
            if present:
                records, pos = _unpack_records(view, pos, count)
                state.snapshot = MetadataSnapshot(end_offset, snap_epoch, records)
            (n_batches,) = _U32.unpack_from(view, pos)
            pos += 4
            for _ in range(n_batches):
                base, b_epoch, time_ms, count = cls._DUMP_BATCH.unpack_from(view, pos)
                pos += cls._DUMP_BATCH.size
                records, pos = _unpack_records(view, pos, count)
                state.batches.append(CommittedBatch(base, b_epoch, time_ms, records))
            if version >= 2:
                (size,) = _U32.unpack_from(view, pos)
                pos += 4
                if size != cls._NO_VOTERS:
                    if pos + size > len(view):
                        raise CorruptCommandError("voter set past the end")
                    state.voters = bytes(view[pos:pos + size])
                    pos += size
        except struct.error as e:
            raise CorruptCommandError(str(e)) from e
        if pos != len(view):
            raise CorruptCommandError("trailing bytes in state dump")
        state.check()
        return state

    def check(self) -> None:
        """Assert the invariants (after a load, and in tests)."""
        expected = self.snapshot.end_offset if self.snapshot is not None else 0
        if self.batches:
            expected = self.batches[0].base_offset
        for b in self.batches:
            assert b.records, "empty batch"
            assert b.base_offset == expected, "batches are not contiguous"
            expected = b.next_offset
        assert self.next_offset == expected, "next_offset does not follow the last batch"
        if self.snapshot is not None and self.batches:
            assert self.batches[0].base_offset == self.snapshot.end_offset
        assert len(self.dedupe) <= self.dedupe_window_size


# ---------------------------------------------------------------------------------------
# The read side


class ReadStatus(Enum):
    OK = "ok"                           # batches (possibly none: nothing new yet)
    SNAPSHOT_NEEDED = "snapshot_needed"  # fetch_offset is below the log start: load the snapshot
    OFFSET_OUT_OF_RANGE = "offset_out_of_range"  # fetch_offset is past the log end


@dataclass(frozen=True, slots=True)
class LogRead:
    status: ReadStatus
    batches: tuple[CommittedBatch, ...]
    log_start_offset: int
    high_watermark: int             # the next offset to be committed (Kafka's HW is exclusive)
    snapshot_end_offset: int        # NO_OFFSET when there is no snapshot
    snapshot_epoch: int


class CommittedLog:
    """The committed metadata log as one controller holds it in memory: an optional snapshot,
    then the batches committed after it. It serves the metadata fetch of observers."""

    def __init__(self) -> None:
        self.snapshot: MetadataSnapshot | None = None
        self._batches: list[CommittedBatch] = []
        self._bases: list[int] = []     # Invariant: _bases[i] == _batches[i].base_offset
        # Invariant: log_start_offset <= high_watermark
        self.log_start_offset = 0
        self.high_watermark = 0         # next offset: last committed offset + 1
        self.size_bytes = 0             # record bytes held in batches (not the snapshot)

    @property
    def last_committed_offset(self) -> int:
        return self.high_watermark - 1

    @property
    def last_epoch(self) -> int:
        if self._batches:
            return self._batches[-1].epoch
        return self.snapshot.epoch if self.snapshot is not None else 0

    def batches(self) -> Sequence[CommittedBatch]:
        return tuple(self._batches)

    def append(self, batch: CommittedBatch) -> None:
        assert batch.base_offset == self.high_watermark, (
            f"batch at {batch.base_offset} does not follow high watermark {self.high_watermark}")
        self._batches.append(batch)
        self._bases.append(batch.base_offset)
        self.high_watermark = batch.next_offset
        self.size_bytes += batch.size_bytes

    def load_snapshot(self, snapshot: MetadataSnapshot, batches: Sequence[CommittedBatch] = ()) -> None:
        """Replace everything by a snapshot and the batches after it (restart, catch-up)."""
        self.snapshot = snapshot
        self._batches, self._bases = [], []
        self.log_start_offset = self.high_watermark = snapshot.end_offset
        self.size_bytes = 0
        for b in batches:
            self.append(b)

    def compact(self, snapshot: MetadataSnapshot) -> None:
        """Drop the batches a newer snapshot covers; readers below it get the snapshot."""
        assert snapshot.end_offset <= self.high_watermark, "snapshot of uncommitted records"
        if self.snapshot is not None and snapshot.end_offset <= self.snapshot.end_offset:
            return
        cut = bisect.bisect_left(self._bases, snapshot.end_offset)
        if cut:
            assert self._batches[cut - 1].next_offset == snapshot.end_offset, \
                "a snapshot must end on a batch boundary"
        self.size_bytes -= sum(b.size_bytes for b in self._batches[:cut])
        del self._batches[:cut]
        del self._bases[:cut]
        self.snapshot = snapshot
        self.log_start_offset = snapshot.end_offset

    def read(self, fetch_offset: int, max_bytes: int) -> LogRead:
        """Committed batches from the one holding fetch_offset, at least one, then as many as
        fit in max_bytes (Kafka returns a first batch even when it is larger than the limit)."""
        snap = self.snapshot
        snap_end = snap.end_offset if snap is not None else NO_OFFSET
        snap_epoch = snap.epoch if snap is not None else 0
        if fetch_offset < self.log_start_offset:
            status, batches = ReadStatus.SNAPSHOT_NEEDED, ()
        elif fetch_offset > self.high_watermark:
            status, batches = ReadStatus.OFFSET_OUT_OF_RANGE, ()
        else:
            status, batches = ReadStatus.OK, tuple(self._read_from(fetch_offset, max_bytes))
        return LogRead(status, batches, self.log_start_offset, self.high_watermark,
                       snap_end, snap_epoch)

    def _read_from(self, fetch_offset: int, max_bytes: int) -> Iterator[CommittedBatch]:
        i = bisect.bisect_right(self._bases, fetch_offset) - 1
        i = max(i, 0)
        total = 0
        while i < len(self._batches):
            batch = self._batches[i]
            if batch.next_offset <= fetch_offset:
                i += 1
                continue
            size = batch.size_bytes
            if total and total + size > max_bytes:
                return
            total += size
            yield batch
            i += 1

    def records_after(self, offset: int) -> list[tuple[int, bytes]]:
        """(offset, record) for every committed record after `offset` still in memory."""
        out: list[tuple[int, bytes]] = []
        for batch in self._read_from(offset + 1, 1 << 62):
            for i, record in enumerate(batch.records):
                if batch.base_offset + i > offset:
                    out.append((batch.base_offset + i, record))
        return out
