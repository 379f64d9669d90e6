"""A follower's fetch positions for one leader, handed out round after round.

Each round of follower work (``ReplicaManager.follower_work``) hands its fetcher the
positions it asks for, fixed for that round: the fetcher matches the leader's answer to
them after the next round may have moved some. A tuple of them all per round cost
O(partitions followed) per round; while 100k partitions were created a broker ran ~300
rounds a second, and that copy was the part of its CPU that grew most with the cluster.
``PositionsByTopic`` keeps them by topic, with a tuple per topic made again only when
that topic's positions changed, and a round's ``RoundPositions`` is a tuple of those
tuples: its cost follows the topics that changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Generic, TypeVar, overload

from clients.types import TopicPartition

__all__ = ["PositionsByTopic", "RoundPositions"]

V = TypeVar("V")


class RoundPositions(Sequence[V], Generic[V]):
    """One round's positions, in topic order; immutable. Compares equal to any sequence
    of the same positions (a tuple, in tests)."""

    __slots__ = ("_topics", "_len")

    def __init__(self, topics: tuple[tuple[V, ...], ...]) -> None:
        self._topics = topics
        self._len = sum(len(t) for t in topics)

    @property
    def topics(self) -> tuple[tuple[V, ...], ...]:
        """A tuple of positions per topic: a topic unchanged since the last round is the
        same tuple as in that round."""
        return self._topics

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[V]:
        return chain.from_iterable(self._topics)

    @overload
    def __getitem__(self, index: int) -> V: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[V]: ...

    def __getitem__(self, index: int | slice) -> V | Sequence[V]:
        return tuple(self)[index]           # O(n): for tests and logs, not the fetch path

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None                         # type: ignore[assignment]  # equal to tuples

    def __repr__(self) -> str:
        return f"RoundPositions({tuple(self)!r})"


class PositionsByTopic(Mapping[TopicPartition, V], Generic[V]):
    """Positions by partition, grouped by topic; ``round_positions`` fixes them."""

    __slots__ = ("_by_topic", "_tuples", "_stale", "_len")

    def __init__(self, items: Iterable[tuple[TopicPartition, V]] = ()) -> None:
        self._by_topic: dict[str, dict[TopicPartition, V]] = {}
        self._tuples: dict[str, tuple[V, ...]] = {}     # as of the last round_positions
        self._stale: set[str] = set()                   # topics changed since
        self._len = 0
        for tp, value in items:
            self[tp] = value

    def __getitem__(self, tp: TopicPartition) -> V:
        return self._by_topic[tp.topic][tp]

    def get(self, tp: TopicPartition, default: Any = None) -> Any:
        topic = self._by_topic.get(tp.topic)
        return default if topic is None else topic.get(tp, default)

    def __contains__(self, tp: object) -> bool:
        return isinstance(tp, TopicPartition) and tp in self._by_topic.get(tp.topic, ())

    def __iter__(self) -> Iterator[TopicPartition]:
        return chain.from_iterable(self._by_topic.values())

    def __len__(self) -> int:
        return self._len

    def __setitem__(self, tp: TopicPartition, value: V) -> None:
        topic = self._by_topic.get(tp.topic)
        if topic is None:
            topic = self._by_topic[tp.topic] = {}
        if tp not in topic:
            self._len += 1
        topic[tp] = value
        self._stale.add(tp.topic)

    def pop(self, tp: TopicPartition, default: Any = None) -> Any:
        topic = self._by_topic.get(tp.topic)
        if topic is None or tp not in topic:
            return default
        value = topic.pop(tp)
        self._len -= 1
        self._stale.add(tp.topic)
        if not topic:
            del self._by_topic[tp.topic]
        return value

    def round_positions(self) -> RoundPositions[V]:
        """Every position now, fixed: later changes here do not reach it."""
        for name in self._stale:
            topic = self._by_topic.get(name)
            if topic:
                self._tuples[name] = tuple(topic.values())
            else:
                self._tuples.pop(name, None)
        self._stale.clear()
        # In the topics' order here (first positioned first): a round is the same
        # whatever order the topics changed in (the simulation replays by seed).
        tuples = self._tuples
        return RoundPositions(tuple(tuples[name] for name in self._by_topic))
