"""The replicated metadata log: command codec, apply (dedupe, fencing, offset CAS), dumps,
compaction, and the read side that serves the metadata fetch."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quorum.replicated_log import (
    AppendCommand, Appended, CommittedBatch, CommittedLog, CorruptCommandError, Duplicate,
    LeaderChangeCommand, LeaderChangeIgnored, LeaderEstablished, MetadataSnapshot,
    ReadStatus, Rejected, RejectReason, ReplicatedLogState, decode_command, encode_command,
)

records_st = st.lists(st.binary(max_size=40), min_size=1, max_size=6).map(tuple)
rid_st = st.binary(min_size=16, max_size=16)


def rid(n: int) -> bytes:
    return n.to_bytes(16, "big")


def append(state: ReplicatedLogState, n: int, records: tuple[bytes, ...], epoch: int | None = None,
           base: int | None = None):
    return state.apply(AppendCommand(rid(n), state.leader_epoch if epoch is None else epoch,
                                     state.next_offset if base is None else base, 1000 + n, records))


def flat(state: ReplicatedLogState) -> list[tuple[int, bytes]]:
    return [(b.base_offset + i, r) for b in state.batches for i, r in enumerate(b.records)]


@given(rid_st, st.integers(0, 2**32 - 1), st.integers(0, 2**62), st.integers(0, 2**62), records_st)
def test_append_command_round_trips(request_id, epoch, base, time_ms, records) -> None:
    command = AppendCommand(request_id, epoch, base, time_ms, records)
    assert decode_command(encode_command(command)) == command


@given(st.integers(0, 2**32 - 1), st.integers(-1, 2**31 - 1))
def test_leader_change_round_trips(epoch, leader_id) -> None:
    command = LeaderChangeCommand(epoch, leader_id)
    assert decode_command(encode_command(command)) == command


@given(st.binary(min_size=1, max_size=80))
def test_garbage_decodes_to_a_command_or_corrupt_command_error(data) -> None:
    try:
        decode_command(data)
    except CorruptCommandError:
        pass


def test_truncated_command_is_rejected_as_corrupt_not_applied() -> None:
    state = ReplicatedLogState()
    state.apply(LeaderChangeCommand(1, 7))
    data = encode_command(AppendCommand(rid(1), 1, 0, 0, (b"abc", b"defg")))
    outcome = state.apply_encoded(data[:-2])
    assert isinstance(outcome, Rejected) and outcome.reason is RejectReason.CORRUPT
    assert state.next_offset == 0 and state.batches == []


def test_offsets_are_per_record_and_batches_follow_each_other() -> None:
    state = ReplicatedLogState()
    assert state.apply(LeaderChangeCommand(3, 1)) == LeaderEstablished(3, 1, 0)
    a = append(state, 1, (b"a", b"b", b"c"))
    b = append(state, 2, (b"d",))
    assert isinstance(a, Appended) and isinstance(b, Appended)
    assert (a.batch.base_offset, a.batch.last_offset) == (0, 2)
    assert (b.batch.base_offset, b.batch.last_offset, b.batch.epoch) == (3, 3, 3)
    assert flat(state) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_a_retried_request_id_reports_the_first_offsets_and_appends_nothing() -> None:
    state = ReplicatedLogState()
    state.apply(LeaderChangeCommand(1, 1))
    append(state, 1, (b"a", b"b"))
    append(state, 2, (b"c",))
    # The retry carries the offsets it was proposed with the first time.
    again = state.apply(AppendCommand(rid(1), 1, 0, 5, (b"a", b"b")))
    assert again == Duplicate(rid(1), 0, 1)
    assert state.next_offset == 3 and len(state.batches) == 2


def test_commands_of_a_deposed_epoch_are_fenced() -> None:
    state = ReplicatedLogState()
    state.apply(LeaderChangeCommand(1, 1))
    append(state, 1, (b"a",))
    state.apply(LeaderChangeCommand(2, 2))
    # Node 1 still had this queued; pysyncobj forwards it to the new leader.
    outcome = append(state, 2, (b"stale",), epoch=1)
    assert outcome == Rejected(rid(2), RejectReason.FENCED_EPOCH, 2, 1)
    assert flat(state) == [(0, b"a")]


def test_an_append_that_expects_another_offset_is_rejected() -> None:
    state = ReplicatedLogState()
    state.apply(LeaderChangeCommand(1, 1))
    append(state, 1, (b"a",))
    outcome = append(state, 2, (b"b",), base=5)
    assert isinstance(outcome, Rejected) and outcome.reason is RejectReason.OFFSET_MISMATCH
    assert state.next_offset == 1


def test_a_stale_leader_change_is_ignored() -> None:
    state = ReplicatedLogState()
    state.apply(LeaderChangeCommand(4, 1))
    assert state.apply(LeaderChangeCommand(3, 2)) == LeaderChangeIgnored(3, 4)
    assert (state.leader_epoch, state.leader_id) == (4, 1)


def test_dedupe_window_evicts_oldest_first_and_the_offset_check_still_refuses_the_retry() -> None:
    state = ReplicatedLogState(dedupe_window_size=2)
    state.apply(LeaderChangeCommand(1, 1))
    for n in range(3):
        append(state, n, (b"x",))
    assert list(state.dedupe) == [rid(1), rid(2)]
    late_retry = state.apply(AppendCommand(rid(0), 1, 0, 0, (b"x",)))
    assert isinstance(late_retry, Rejected) and late_retry.reason is RejectReason.OFFSET_MISMATCH
    assert state.next_offset == 3


command_st = st.one_of(
    st.builds(lambda e, l: ("leader", e, l), st.integers(0, 4), st.integers(0, 2)),
    st.builds(lambda n, r, e, skew: ("append", n, r, e, skew),
              st.integers(0, 12), records_st, st.integers(0, 4), st.sampled_from([0, 0, 0, 1, -1])),
)


@given(st.lists(command_st, max_size=40), st.integers(1, 8))
def test_apply_matches_a_model_and_survives_a_dump(commands, window) -> None:
    """Real apply against the rules written the slow way: a list of records, the set of
    request ids seen (within the window), the current epoch."""
    state = ReplicatedLogState(dedupe_window_size=window)
    model: list[bytes] = []
    seen: dict[bytes, tuple[int, int]] = {}
    order: list[bytes] = []
    epoch = 0
    for command in commands:
        if command[0] == "leader":
            _, e, leader = command
            outcome = state.apply(LeaderChangeCommand(e, leader))
            if e > epoch:
                epoch = e
                assert outcome == LeaderEstablished(e, leader, len(model))
            else:
                assert isinstance(outcome, LeaderChangeIgnored)
            continue
        _, n, records, e, skew = command
        base = len(model) + skew
        outcome = state.apply(AppendCommand(rid(n), e, base, 0, records))
        if rid(n) in seen:
            assert outcome == Duplicate(rid(n), *seen[rid(n)])
        elif e != epoch or base != len(model):
            assert isinstance(outcome, Rejected)
        else:
            assert isinstance(outcome, Appended)
            seen[rid(n)] = (len(model), len(model) + len(records) - 1)
            order.append(rid(n))
            if len(order) > window:
                del seen[order.pop(0)]
            model.extend(records)
    state.check()
    assert [r for _, r in flat(state)] == model
    again = ReplicatedLogState.decode(state.encode())
    assert again.encode() == state.encode()
    assert flat(again) == flat(state) and again.dedupe == state.dedupe


def test_dump_with_snapshot_round_trips_and_corruption_is_detected() -> None:
    state = ReplicatedLogState()
    state.apply(LeaderChangeCommand(2, 1))
    append(state, 1, (b"a", b"b"))
    append(state, 2, (b"c",))
    state.compact(MetadataSnapshot(2, 2, (b"image-1", b"image-2")))
    assert [b.base_offset for b in state.batches] == [2]
    data = state.encode()
    again = ReplicatedLogState.decode(data)
    assert again.snapshot == state.snapshot and flat(again) == [(2, b"c")]
    damaged = bytearray(data)
    damaged[len(damaged) // 2] ^= 0x40
    with pytest.raises(CorruptCommandError):
        ReplicatedLogState.decode(bytes(damaged))
    with pytest.raises(CorruptCommandError):
        ReplicatedLogState.decode(data[:10])


def _log_with(batches: list[tuple[int, ...]]) -> CommittedLog:
    log = CommittedLog()
    offset = 0
    for sizes in batches:
        records = tuple(b"r" * s for s in sizes)
        log.append(CommittedBatch(offset, 1, 0, records))
        offset += len(records)
    return log


def test_read_returns_the_batch_holding_the_fetch_offset_and_respects_max_bytes() -> None:
    log = _log_with([(10, 10), (10,), (30,), (5,)])   # offsets 0-1, 2, 3, 4
    read = log.read(1, max_bytes=25)
    assert read.status is ReadStatus.OK
    assert [b.base_offset for b in read.batches] == [0]           # 20 + 10 > 25
    read = log.read(3, max_bytes=1)
    assert [b.base_offset for b in read.batches] == [3]           # first batch always fits
    assert log.read(5, 100).batches == () and log.read(5, 100).high_watermark == 5
    assert log.read(6, 100).status is ReadStatus.OFFSET_OUT_OF_RANGE
    assert log.records_after(2) == [(3, b"r" * 30), (4, b"r" * 5)]


def test_compacted_log_sends_readers_below_the_snapshot_to_it() -> None:
    log = _log_with([(1, 1), (1,), (1,)])               # offsets 0-1, 2, 3
    log.compact(MetadataSnapshot(3, 1, (b"img",)))
    assert (log.log_start_offset, log.high_watermark) == (3, 4)
    read = log.read(0, 100)
    assert read.status is ReadStatus.SNAPSHOT_NEEDED
    assert (read.snapshot_end_offset, read.snapshot_epoch) == (3, 1)
    assert [b.base_offset for b in log.read(3, 100).batches] == [3]
    with pytest.raises(AssertionError):
        log.compact(MetadataSnapshot(9, 1, ()))        # beyond what is committed
