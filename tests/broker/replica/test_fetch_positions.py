"""A follower's positions per round (broker/replica/positions.py): fixed per round, made
again only for the topics that changed."""
from __future__ import annotations

from broker.replica.positions import PositionsByTopic, RoundPositions
from clients.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_a_round_keeps_its_positions_while_later_rounds_change_them() -> None:
    positions = PositionsByTopic([(A0, "a0@0"), (A1, "a1@0"), (B0, "b0@0")])
    first = positions.round_positions()
    assert first == ("a0@0", "a1@0", "b0@0") and len(first) == 3 and first[2] == "b0@0"
    positions[B0] = "b0@5"
    assert positions.pop(A1) == "a1@0" and positions.pop(A1, "gone") == "gone"
    second = positions.round_positions()
    assert first == ["a0@0", "a1@0", "b0@0"]                # unchanged
    assert second == ("a0@0", "b0@5") and len(positions) == 2
    assert positions.get(A1) is None and positions[A0] == "a0@0" and B0 in positions
    assert list(positions) == [A0, B0] and dict(positions.items()) == {A0: "a0@0", B0: "b0@5"}
    positions.pop(A0)
    assert positions.round_positions() == ("b0@5",) and positions.round_positions() != ("b0@0",)
    assert PositionsByTopic().round_positions() == () and not PositionsByTopic().round_positions()


def test_a_round_copies_only_the_topics_that_changed() -> None:
    # A tuple of every position per round cost a follower O(partitions) per round:
    # ~9% of a broker's CPU while 100k partitions were created.
    positions = PositionsByTopic([(TopicPartition("big", i), i) for i in range(1000)])
    positions[A0] = -1
    before = positions.round_positions()
    positions[A0] = -2
    after = positions.round_positions()
    assert isinstance(after, RoundPositions) and after.topics[0] is before.topics[0]
    assert before.topics[1] == (-1,) and after.topics[1] == (-2,)
