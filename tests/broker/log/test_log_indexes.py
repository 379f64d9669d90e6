"""Offset index and time index: lookups against a brute-force scan, truncation, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.log.offset_index import CorruptIndexError, OffsetIndex, OffsetPosition
from broker.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset


@st.composite
def index_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    offsets = sorted(set(draw(st.lists(st.integers(0, 5000), max_size=40))))
    positions = sorted(set(draw(st.lists(st.integers(0, 10**6), min_size=len(offsets),
                                         max_size=len(offsets) * 2 + 1))))[: len(offsets)]
    return list(zip(offsets, positions))[: len(positions)]


@given(entries=index_entries(), target=st.integers(0, 6000), base=st.integers(0, 10**9))
def test_offset_index_lookup_is_the_largest_entry_at_or_below_target(
    entries: list[tuple[int, int]], target: int, base: int
) -> None:
    index = OffsetIndex(base, entries_max=1000)
    for rel, pos in entries:
        index.append(base + rel, pos)
    below = [(rel, pos) for rel, pos in entries if rel <= target]
    expected = OffsetPosition(base + below[-1][0], below[-1][1]) if below else OffsetPosition(base, 0)
    assert index.lookup(base + target) == expected
    by_pos = [(rel, pos) for rel, pos in entries if pos <= target * 100]
    expected_pos = OffsetPosition(base + by_pos[-1][0], by_pos[-1][1]) if by_pos else OffsetPosition(base, 0)
    assert index.lookup_position(target * 100) == expected_pos


@given(entries=index_entries(), cut=st.integers(0, 6000))
def test_offset_index_truncate_drops_entries_at_or_after_the_cut(
    entries: list[tuple[int, int]], cut: int
) -> None:
    index = OffsetIndex(100, entries_max=1000)
    for rel, pos in entries:
        index.append(100 + rel, pos)
    index.mark_persisted()
    index.truncate_to(100 + cut)
    kept = [(rel, pos) for rel, pos in entries if rel < cut]
    assert len(index) == len(kept)
    # The file must be cut back to the kept entries, then nothing is unpersisted.
    assert index.persisted_bytes() == 8 * len(kept)
    assert index.unpersisted() == (8 * len(kept), b"")
    log_size = (entries[-1][1] + 1) if entries else 1
    reloaded = OffsetIndex.from_bytes(100, 1000, index.to_bytes(), log_size)
    assert [reloaded.lookup(100 + rel) for rel, _ in kept] == [
        OffsetPosition(100 + rel, pos) for rel, pos in kept
    ]


def test_offset_index_persists_incrementally_in_kafka_format() -> None:
    index = OffsetIndex(1000, entries_max=4)
    index.append(1003, 0)
    index.append(1010, 4096)
    assert index.unpersisted() == (0, bytes.fromhex("00000003 00000000 0000000a 00001000"))
    index.mark_persisted()
    index.append(1020, 9000)
    assert index.unpersisted() == (16, bytes.fromhex("00000014 00002328"))
    index.append(1021, 9001)
    assert index.is_full


@pytest.mark.parametrize(
    "data, log_size",
    [
        (b"\x00" * 7, 100),  # not whole entries
        (bytes.fromhex("00000005 00000010 00000005 00000020"), 100),  # offsets repeat
        (bytes.fromhex("00000005 00000010 00000006 00000008"), 100),  # positions go back
        (bytes.fromhex("00000005 00000100"), 100),  # past the log end
    ],
)
def test_offset_index_sanity_check_rejects_corrupt_files(data: bytes, log_size: int) -> None:
    with pytest.raises(CorruptIndexError):
        OffsetIndex.from_bytes(0, 100, data, log_size)


@given(
    stamps=st.lists(st.tuples(st.integers(-1, 10_000), st.integers(0, 3)), max_size=40),
    target=st.integers(-5, 11_000),
)
def test_time_index_lookup_bounds_the_first_batch_at_or_after_a_timestamp(
    stamps: list[tuple[int, int]], target: int
) -> None:
    """Simulate batches with (max_timestamp, record count); the entry the lookup returns
    must never lie after the first batch whose timestamp is >= target."""
    base = 50
    index = TimeIndex(base, entries_max=1000)
    offset = base
    batches = []
    for ts, extra in stamps:
        batches.append((offset, ts))
        index.maybe_append(ts, offset)
        offset += 1 + extra
    entry = index.lookup(target)
    first_hit = next((o for o, ts in batches if ts >= target), None)
    if first_hit is not None:
        assert entry.offset <= first_hit
    # Either the "search from the start" sentinel or a real entry at or below the target.
    assert entry == TimestampOffset(NO_TIMESTAMP, base) or 0 <= entry.timestamp <= target
    reloaded = TimeIndex.from_bytes(base, 1000, index.unpersisted()[1], offset)
    assert reloaded.lookup(target) == entry


def test_time_index_truncate_and_only_new_maxima() -> None:
    index = TimeIndex(0, entries_max=10)
    assert index.maybe_append(100, 0)
    assert not index.maybe_append(100, 5)
    assert not index.maybe_append(90, 6)
    assert index.maybe_append(200, 7)
    index.truncate_to(7)
    assert index.last_entry == TimestampOffset(100, 0)
    with pytest.raises(CorruptIndexError):
        TimeIndex.from_bytes(0, 10, index.unpersisted()[1], next_offset=0)
