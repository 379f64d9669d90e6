"""The partition log over SimStorage against a list of batches (STYLE.md section 6).

Random appends (good and bad), reads, truncations, rolls, retention runs, DeleteRecords,
flushes, clean restarts and crashes that lose unflushed bytes. After every step the log
and the model agree on offsets and on every byte a read returns; after a crash the log
is a prefix of the model that holds at least everything below the recovery point.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from _log_helpers import make_batch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker.log import LogConfig, LogManager, LogManagerConfig, SimStorage
from clients.protocol.errors import ErrorCode
from clients.records import CompressionType, iter_batches

CONFIG = LogConfig(
    segment_bytes=1200,
    index_interval_bytes=100,
    segment_index_bytes=48,  # 6 offset index entries: index-full rolls happen too
    retention_ms=5_000,
    retention_bytes=3_000,
)
MANAGER = LogManagerConfig(flush_offset_checkpoint_interval_ms=50,
                           retention_check_interval_ms=2**40)  # retention only when a rule asks


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes


class PartitionLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.storage = SimStorage()
        self.now_ms = 0
        self.manager, _ = LogManager.open(self.storage, "/data", now_ms=0, default_config=CONFIG,
                                          manager_config=MANAGER)
        self.log = self.manager.get_or_create_log("t", 0, now_ms=0)
        self.batches: list[ModelBatch] = []  # everything still in a segment, in order
        self.start = 0
        self.leo = 0
        self.epoch = 0
        self.tag = 0

    # --- helpers --------------------------------------------------------------------------

    def _reopen(self, *, clean: bool, seed: int = 0) -> None:
        if clean:
            self.manager.shutdown()
        else:
            self.storage.crash(random.Random(seed))
        self.manager, reports = LogManager.open(self.storage, "/data", now_ms=self.now_ms,
                                                default_config=CONFIG, manager_config=MANAGER)
        self.log = self.manager.get_log("t", 0)
        assert self.log is not None
        report = reports[("t", 0)]
        assert report.clean_shutdown == clean

    def _stored(self) -> list[bytes]:
        """Every batch in the log, read back through the read path, from the first segment."""
        out = []
        offset = self.log.log_start_offset
        while True:
            result = self.log.read(offset, 1500, self.log.log_end_offset)
            assert result.error_code == ErrorCode.NONE, result
            if result.records.is_empty:
                break
            data = self.log.read_records_bytes(result.records)
            for pos, header in iter_batches(data):
                out.append(data[pos: pos + header.size_in_bytes])
                offset = header.last_offset + 1
        return out

    def _visible(self) -> list[ModelBatch]:
        return [b for b in self.batches if b.last_offset >= self.start]

    # --- rules ----------------------------------------------------------------------------

    @rule(
        shapes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 150)), min_size=1, max_size=3),
        ts_jitter=st.integers(-50, 50),
        gzip=st.booleans(),
    )
    def append(self, shapes: list[tuple[int, int]], ts_jitter: int, gzip: bool) -> None:
        buf = bytearray()
        for count, value_bytes in shapes:
            self.tag += 1
            buf += make_batch(count, value_bytes=value_bytes, timestamp_ms=self.now_ms + ts_jitter,
                              tag=self.tag % 1000,
                              compression=CompressionType.GZIP if gzip else CompressionType.NONE)
        size = self.log.size_bytes
        result = self.log.append_as_leader(buf, self.epoch, self.now_ms)
        if len(buf) > CONFIG.segment_bytes:
            assert result.error_code == ErrorCode.RECORD_LIST_TOO_LARGE
            assert self.log.size_bytes == size and self.log.log_end_offset == self.leo
            return
        assert result.error_code == ErrorCode.NONE, result
        assert result.base_offset == self.leo
        # The log rewrote `buf` in place: these are the bytes it stored.
        for pos, header in iter_batches(buf):
            assert header.partition_leader_epoch == self.epoch
            assert header.base_offset == self.leo
            self.batches.append(ModelBatch(header.base_offset, header.last_offset, self.epoch,
                                           bytes(buf[pos: pos + header.size_in_bytes])))
            self.leo = header.last_offset + 1
        assert result.last_offset == self.leo - 1

    @rule(damage=st.sampled_from(["crc", "magic", "torn"]))
    def append_corrupt(self, damage: str) -> None:
        buf = make_batch(2)
        if damage == "crc":
            buf[-1] ^= 0x40
        elif damage == "magic":
            buf[16] = 3
        else:
            del buf[-4:]
        size = self.log.size_bytes
        result = self.log.append_as_leader(buf, self.epoch, self.now_ms)
        assert result.error_code == ErrorCode.CORRUPT_MESSAGE
        assert self.log.size_bytes == size and self.log.log_end_offset == self.leo

    @rule(step=st.integers(1, 3))
    def new_leader_epoch(self, step: int) -> None:
        self.epoch += step

    @rule(ms=st.integers(0, 3_000))
    def advance_time(self, ms: int) -> None:
        self.now_ms += ms

    @rule(where=st.floats(0, 1), span=st.integers(-2, 2), max_bytes=st.integers(0, 1500),
          bound=st.floats(0, 1), min_one=st.booleans())
    def read(self, where: float, span: int, max_bytes: int, bound: float, min_one: bool) -> None:
        offset = self.start + int(where * (self.leo - self.start)) + span
        upper = self.start + int(bound * (self.leo - self.start))
        result = self.log.read(offset, max_bytes, upper, min_one)
        if offset < self.start or offset > self.leo:
            assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            assert result.records.is_empty
            return
        assert result.error_code == ErrorCode.NONE
        upper = min(upper, self.leo)
        candidates = []
        for b in self.batches:
            if b.last_offset < offset:
                continue
            if b.last_offset >= upper:
                break
            candidates.append(b)
        data = self.log.read_records_bytes(result.records)
        got = [data[p: p + h.size_in_bytes] for p, h in iter_batches(data)]
        k = len(got)
        assert got == [c.data for c in candidates[:k]]
        if k > 1 or (k == 1 and not min_one):
            assert len(data) <= max_bytes
        if candidates and (min_one or len(candidates[0].data) <= max_bytes):
            assert k >= 1, "no progress"
        if 0 < k < len(candidates) and len(data) + len(candidates[k].data) <= max_bytes:
            # A read stops short of the byte limit only at a segment boundary.
            assert candidates[k].base_offset in [s.base_offset for s in self.log.segments]

    @rule(where=st.floats(0, 1.1))
    def truncate_to(self, where: float) -> None:
        offset = int(where * self.leo)
        first_base = self.log.segments[0].base_offset
        changed = self.log.truncate_to(offset, self.now_ms)
        if offset >= self.leo:
            assert not changed
            return
        assert changed
        if offset <= first_base:
            self.batches, self.start, self.leo = [], offset, offset
            return
        kept = [b for b in self.batches if b.last_offset < offset]
        removed = [b for b in self.batches if b.last_offset >= offset]
        self.leo = min(offset, removed[0].base_offset) if removed else offset
        self.batches = kept
        self.start = min(self.start, self.leo)

    @rule(ahead=st.integers(0, 50))
    def truncate_fully_and_start_at(self, ahead: int) -> None:
        self.log.truncate_fully_and_start_at(self.leo + ahead, self.now_ms)
        self.batches, self.start = [], self.leo + ahead
        self.leo = self.start

    @rule()
    def roll(self) -> None:
        self.log.roll(self.now_ms)

    @rule(hw_fraction=st.floats(0, 1))
    def retention(self, hw_fraction: float) -> None:
        hw = self.start + int(hw_fraction * (self.leo - self.start))
        before = list(self.batches)
        result = self.log.delete_old_segments(self.now_ms, hw)
        first_base = self.log.segments[0].base_offset
        self.batches = [b for b in self.batches if b.last_offset >= first_base]
        gone = before[: len(before) - len(self.batches)]
        assert all(b.last_offset < hw for b in gone), "retention deleted records at/above the HW"
        assert (result.deleted_base_offsets != ()) == (gone != [] or len(result.deleted_base_offsets) > 0)
        assert self.start <= self.log.log_start_offset <= max(hw, self.start)
        self.start = self.log.log_start_offset
        if self.log.log_end_offset != self.leo:
            raise AssertionError("retention moved the LEO")

    @rule(hw_fraction=st.floats(0, 1), where=st.floats(0, 1.2))
    def delete_records(self, hw_fraction: float, where: float) -> None:
        hw = self.start + int(hw_fraction * (self.leo - self.start))
        target = self.start + int(where * (self.leo - self.start))
        code = self.log.maybe_increment_log_start_offset(target, hw)
        if target > hw:
            assert code == ErrorCode.OFFSET_OUT_OF_RANGE
        else:
            assert code == ErrorCode.NONE
            self.start = max(self.start, target)

    @rule()
    def flush(self) -> None:
        self.log.flush(self.now_ms)
        assert self.log.recovery_point == self.leo

    @rule()
    def poll(self) -> None:
        self.manager.poll(self.now_ms)

    @rule()
    def clean_restart(self) -> None:
        self._reopen(clean=True)
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.start, self.leo)

    @rule(seed=st.integers(0, 2**32))
    def crash_and_recover(self, seed: int) -> None:
        durable = self.log.recovery_point
        model = list(self.batches)
        old_start = self.start
        self._reopen(clean=False, seed=seed)
        stored = self._stored_from_first_segment()
        k = len(stored)
        assert stored == [b.data for b in model[:k]], "recovered log is not a prefix of what was appended"
        assert all(b.last_offset < self.log.log_end_offset for b in model[:k])
        # Batches wholly below the log start offset were deleted by DeleteRecords: if the
        # crash cut the log below that offset, recovery restarts it empty at the start.
        lost = [b for b in model[k:] if b.last_offset >= old_start]
        assert all(b.last_offset >= durable for b in lost), "lost a batch below the recovery point"
        assert self.log.log_start_offset <= max(old_start, self.log.log_end_offset)
        self.batches = model[:k]
        self.start = self.log.log_start_offset
        self.leo = self.log.log_end_offset

    def _stored_from_first_segment(self) -> list[bytes]:
        out = []
        for segment in self.log.segments:
            for bp in segment.iter_headers():
                out.append(segment.read_bytes(bp.position, bp.header.size_in_bytes))
        return out

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def offsets_match(self) -> None:
        log = self.log
        assert (log.log_start_offset, log.log_end_offset) == (self.start, self.leo)
        assert log.segments[0].base_offset <= log.log_start_offset <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset

    @invariant()
    def every_byte_matches(self) -> None:
        assert self._stored_from_first_segment() == [b.data for b in self.batches]
        assert self._stored() == [b.data for b in self._visible()]

    @invariant()
    def epochs_match(self) -> None:
        cache = self.log.leader_epoch_cache
        visible = self._visible()
        for entry in cache.entries():
            assert self.start <= entry.start_offset <= self.leo, (entry, self.start, self.leo)
        for b in visible:
            assert cache.epoch_for_offset(max(b.base_offset, self.start)) == b.epoch
        runs: list[tuple[int, int]] = []  # (epoch, first offset), from the batches
        for b in visible:
            if not runs or runs[-1][0] != b.epoch:
                runs.append((b.epoch, max(b.base_offset, self.start)))
        for (epoch, _), nxt in zip(runs, runs[1:] + [None]):
            end = self.log.end_offset_for_epoch(epoch)
            if nxt is None:
                if cache.latest_epoch == epoch:
                    assert (end.leader_epoch, end.end_offset) == (epoch, self.leo)
            else:
                assert (end.leader_epoch, end.end_offset) == (epoch, nxt[1])

    def teardown(self) -> None:
        self.storage.close()


PartitionLogMachine.TestCase.settings = settings(
    PartitionLogMachine.TestCase.settings, stateful_step_count=40, deadline=None
)
test_partition_log_matches_model = PartitionLogMachine.TestCase
