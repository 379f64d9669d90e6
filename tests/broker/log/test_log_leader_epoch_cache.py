"""Leader epoch cache: KIP-279 lookups against a slow model, truncation, checkpoint format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.log.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    CorruptCheckpointError,
    EpochEndOffset,
    EpochEntry,
    LeaderEpochCache,
)


def test_end_offset_for_follows_kip_279() -> None:
    cache = LeaderEpochCache()
    for epoch, start in [(1, 0), (3, 10), (6, 25)]:
        assert cache.assign(epoch, start)
    leo = 40
    assert cache.end_offset_for(6, leo) == EpochEndOffset(6, 40)  # latest: the LEO
    assert cache.end_offset_for(3, leo) == EpochEndOffset(3, 25)
    assert cache.end_offset_for(4, leo) == EpochEndOffset(3, 25)  # largest epoch <= 4
    assert cache.end_offset_for(5, leo) == EpochEndOffset(3, 25)
    assert cache.end_offset_for(0, leo) == EpochEndOffset(0, 0)  # older than all
    assert cache.end_offset_for(7, leo) == EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, leo) == EpochEndOffset(-1, -1)
    assert LeaderEpochCache().end_offset_for(3, leo) == EpochEndOffset(-1, -1)


def test_assign_removes_entries_that_would_break_monotonicity() -> None:
    cache = LeaderEpochCache([EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(6, 25)])
    assert not cache.assign(6, 30)  # same epoch, later start: nothing to do
    assert cache.assign(6, 20)  # same epoch, earlier start (re-append after truncation)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(6, 20)]
    assert cache.assign(4, 12)  # a smaller epoch: drops epoch 6
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(4, 12)]
    assert cache.assign(9, 5)  # an earlier start offset: drops 3 and 4
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(9, 5)]


def test_truncate_from_start_keeps_the_epoch_covering_the_new_start() -> None:
    cache = LeaderEpochCache([EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(6, 25)])
    assert cache.truncate_from_start(12)
    assert cache.entries() == [EpochEntry(3, 12), EpochEntry(6, 25)]
    assert not cache.truncate_from_start(12)
    assert not cache.truncate_from_start(5)
    assert cache.truncate_from_start(25)
    assert cache.entries() == [EpochEntry(6, 25)]


def test_truncate_from_end_drops_epochs_starting_at_or_after_the_cut() -> None:
    cache = LeaderEpochCache([EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(6, 25)])
    assert not cache.truncate_from_end(26)
    assert cache.truncate_from_end(25)
    assert cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 10)]
    assert cache.truncate_from_end(0)
    assert cache.entries() == []


@st.composite
def epoch_histories(draw: st.DrawFn) -> list[tuple[int, int]]:
    """(epoch, record count) runs as a log would see them: epochs non-decreasing."""
    runs = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), min_size=1, max_size=12))
    epoch, out = 0, []
    for step, count in runs:
        epoch += step
        out.append((epoch, count))
    return out


@given(history=epoch_histories(), requested=st.integers(-1, 40))
def test_end_offset_for_matches_a_scan_of_the_log(history: list[tuple[int, int]], requested: int) -> None:
    per_offset: list[int] = []  # the epoch of each offset, the slow way
    cache = LeaderEpochCache()
    for epoch, count in history:
        if epoch != cache.latest_epoch:
            cache.assign(epoch, len(per_offset))
        per_offset.extend([epoch] * count)
    leo = len(per_offset)
    got = cache.end_offset_for(requested, leo)
    at_or_below = [e for e in per_offset if e <= requested]
    if requested < 0 or requested > per_offset[-1]:
        assert got == EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    elif not at_or_below:
        assert got == EpochEndOffset(requested, 0)
    else:
        largest = max(at_or_below)
        end = next((i for i, e in enumerate(per_offset) if e > requested), leo)
        assert got == EpochEndOffset(largest, end)
    for offset in range(leo):
        assert cache.epoch_for_offset(offset) == per_offset[offset]


def test_checkpoint_is_kafkas_text_format_and_round_trips() -> None:
    cache = LeaderEpochCache([EpochEntry(1, 0), EpochEntry(3, 10)])
    data = cache.to_checkpoint()
    assert data == b"0\n2\n1 0\n3 10\n"
    assert LeaderEpochCache.from_checkpoint(data).entries() == cache.entries()
    assert LeaderEpochCache.from_checkpoint(b"0\n0\n").entries() == []


@pytest.mark.parametrize(
    "data", [b"", b"1\n0\n", b"0\n2\n1 0\n", b"0\n2\n3 0\n1 10\n", b"0\n1\nx y\n", b"\xff", b"0\n1\n1\n"]
)
def test_corrupt_checkpoint_is_a_typed_error(data: bytes) -> None:
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCache.from_checkpoint(data)
