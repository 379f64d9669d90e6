"""The partitioner, deterministically: Kafka's murmur2 test vectors, the key -> partition
mapping, and sticky partitioning for keyless records (KIP-480 / KIP-794)."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from clients._core.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java testMurmur2,
# plus short strings whose hashes other ports of Kafka's function agree on.
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"1", -1993445489),
    (b"12", 126087238),
    (b"123", -267702483),
    (b"1234", -1614185708),
    (b"12345", -1188365604),
]


@pytest.mark.parametrize("data,expected", KAFKA_VECTORS, ids=lambda v: repr(v)[:20])
def test_murmur2_matches_kafkas_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_of_every_tail_length_is_a_signed_int32() -> None:
    # 0..3 trailing bytes take different branches; all results stay in int32.
    for n in range(0, 40):
        h = murmur2(bytes(range(n)))
        assert -(1 << 31) <= h < (1 << 31)


def test_to_positive_clears_the_sign_bit_rather_than_negating() -> None:
    assert to_positive(-1) == 0x7FFFFFFF           # abs() would give 1
    assert to_positive(-(1 << 31)) == 0             # abs() would overflow in Java
    assert to_positive(5) == 5


def test_key_partition_is_toPositive_murmur2_mod_count() -> None:
    assert partition_for_key(b"21", 6) == (-973932308 & 0x7FFFFFFF) % 6
    keys = [f"key-{i}".encode() for i in range(1000)]
    counts = Counter(partition_for_key(k, 6) for k in keys)
    assert set(counts) == set(range(6)) and min(counts.values()) > 100  # spread


def test_sticky_partition_holds_until_batch_size_bytes_then_moves() -> None:
    p = StickyPartitioner(random.Random(1), batch_size=1000, adaptive=False)
    first = p.partition("t", (0, 1, 2, 3), 4)
    for _ in range(9):
        assert p.partition("t", (0, 1, 2, 3), 4) == first
        p.on_append("t", first, 100)
    assert p.partition("t", (0, 1, 2, 3), 4) == first   # 900 bytes: still under
    p.on_append("t", first, 100)
    second = p.partition("t", (0, 1, 2, 3), 4)          # 1000 bytes: switch
    assert second != first
    assert p.partition("other", (0, 1, 2, 3), 4) in range(4)  # per topic


def test_sticky_choice_is_among_available_partitions_and_leaves_a_dead_one() -> None:
    p = StickyPartitioner(random.Random(2), batch_size=10, adaptive=False)
    seen = set()
    for _ in range(200):
        part = p.partition("t", (1, 3), 4)
        p.on_append("t", part, 10)
        seen.add(part)
    assert seen == {1, 3}
    current = p.partition("t", (0, 1, 2, 3), 4)
    # Its leader goes away: the next record moves at once, before batch.size is reached.
    survivors = tuple(x for x in range(4) if x != current)
    assert p.partition("t", survivors, 4) in survivors
    # No partition available at all: any partition, the record waits in the accumulator.
    assert p.partition("u", (), 4) in range(4)


def test_adaptive_choice_prefers_short_queues() -> None:
    p = StickyPartitioner(random.Random(3), batch_size=1, adaptive=True)
    picks = Counter()
    for _ in range(2000):
        part = p.partition("t", (0, 1, 2), 3, queue_sizes=lambda _topic, q: [0, 100, 100][q])
        p.on_append("t", part, 1)
        picks[part] += 1
    # Partition 0 is picked whenever it is not the current one (the other two weigh 1).
    assert picks[0] > 900 and picks[1] + picks[2] < 1100
