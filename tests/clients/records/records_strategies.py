"""Hypothesis strategies for records and batches, shared by the records tests."""
from __future__ import annotations

from hypothesis import strategies as st

from clients.records import CompressionType, Record

# Kafka timestamps are ms since the epoch (or -1); deltas inside a batch are varlongs, so
# keep timestamps where base + delta cannot overflow int64.
timestamps = st.integers(min_value=-1, max_value=1 << 50)
maybe_bytes = st.none() | st.binary(max_size=64)
header_lists = st.lists(
    st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=16)), max_size=4
).map(tuple)
codecs = st.sampled_from(list(CompressionType))


@st.composite
def record_lists(draw, min_size: int = 1, max_size: int = 20, base_offset: int = 0,
                 timestamps: st.SearchStrategy[int] = timestamps) -> list[Record]:
    """Records with increasing offsets (gaps allowed, as compaction leaves them)."""
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    offset = base_offset + draw(st.integers(min_value=0, max_value=3))
    records = []
    for _ in range(n):
        records.append(
            Record(
                offset=offset,
                timestamp=draw(timestamps),
                key=draw(maybe_bytes),
                value=draw(maybe_bytes),
                headers=draw(header_lists),
            )
        )
        offset += draw(st.sampled_from([1, 1, 1, 2, 1000]))
    return records
