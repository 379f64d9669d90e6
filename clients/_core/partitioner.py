"""Partition choice: Kafka's murmur2 for keyed records, sticky batches for keyless ones.

Theory of operation
-------------------
Keyed records: partition = toPositive(murmur2(key_bytes)) % partition_count, where
murmur2 is the 32-bit MurmurHash2 variant Kafka's Java client uses (seed 0x9747b28c,
`Utils.murmur2`) and toPositive clears the sign bit (`n & 0x7fffffff`, not abs()).
librdkafka's `murmur2_random` partitioner computes the same thing, so a key lands on the
same partition whichever of the three clients wrote it. All partitions count, whether or
not their leader is available: the mapping must not change while a broker is down.

Keyless records (KIP-480, refined by KIP-794 in Kafka 3.3 as the BuiltInPartitioner):
stick to one partition until `batch.size` bytes have been produced to it, then pick a new
one. Sticking fills batches (fewer, larger requests at a low linger.ms); switching by
bytes produced rather than by "batch sent" (KIP-480's first rule) keeps slow brokers from
attracting more records. The new partition is drawn among partitions with a live leader;
with adaptive partitioning (`partitioner.adaptive.partitioning.enable`) the draw is
weighted towards partitions with shorter queues (weight = longest queue + 1 - queue, a
queue counted in batches), as the Java client's `BuiltInPartitioner.updatePartitionLoadStats`
does. Batches, not bytes: a count is O(1) per partition, where summing the queued batches'
bytes at every switch cost a producer ahead of its sender (thousands of queued batches)
~12% of its send path.

Pure: randomness is the `random.Random` passed in.
"""
from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence

__all__ = ["murmur2", "to_positive", "partition_for_key", "StickyPartitioner"]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    # int.from_bytes on 4-byte slices: Java reads little-endian words the same way.
    for i in range(0, n4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's Utils.toPositive: clear the sign bit (so -1 becomes 0x7fffffff, not 1)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, partition_count: int) -> int:
    assert partition_count > 0, partition_count
    return to_positive(murmur2(key)) % partition_count


class StickyPartitioner:
    """The keyless half of the built-in partitioner, per topic (KIP-480 / KIP-794)."""

    def __init__(self, rng: random.Random, batch_size: int, adaptive: bool = True) -> None:
        self._rng = rng
        self._batch_size = max(1, batch_size)
        self._adaptive = adaptive
        # topic -> [current partition, bytes produced to it since it was chosen]
        self._sticky: dict[str, list[int]] = {}

    def partition(self, topic: str, available: Sequence[int], partition_count: int,
                  queue_sizes: Callable[[str, int], int] | None = None) -> int:
        """The partition for the next keyless record of `topic`.

        `available`: partitions with a live leader (all of them may be down: then any
        partition is chosen and the record waits in the accumulator). `queue_sizes`, if
        given, tells the batches queued for a partition of a topic (adaptive weighting); it
        is asked only when the sticky partition changes, about once per batch.size bytes."""
        assert partition_count > 0, partition_count
        state = self._sticky.get(topic)
        if state is not None and state[0] < partition_count and (
                state[1] < self._batch_size) and (not available or state[0] in available):
            return state[0]
        chosen = self._choose(topic, available, partition_count, queue_sizes,
                              None if state is None else state[0])
        self._sticky[topic] = [chosen, 0]
        return chosen

    def on_append(self, topic: str, partition: int, size_in_bytes: int) -> None:
        """Count bytes produced to the sticky partition; past batch.size it switches."""
        state = self._sticky.get(topic)
        if state is not None and state[0] == partition:
            state[1] += size_in_bytes

    def _choose(self, topic: str, available: Sequence[int], partition_count: int,
                queue_sizes: Callable[[str, int], int] | None, previous: int | None) -> int:
        candidates = list(available) if available else list(range(partition_count))
        if len(candidates) > 1 and previous in candidates:
            candidates.remove(previous)  # a switch that picks the same one is no switch
        if self._adaptive and queue_sizes is not None and len(candidates) > 1:
            sizes = [queue_sizes(topic, p) for p in candidates]
            top = max(sizes) + 1
            cumulative, total = [], 0
            for s in sizes:
                total += top - s
                cumulative.append(total)
            return candidates[bisect.bisect_right(cumulative, self._rng.randrange(total))]
        return candidates[self._rng.randrange(len(candidates))]
