"""Retry-topic routing (clients/_core/retry.py): names, headers and the way to the
dead-letter topic, decided without a cluster."""
from __future__ import annotations

import pytest

from clients._core import retry
from clients._core.retry import RetryPolicy, route_failure


def headers_of(forward) -> dict[str, bytes | None]:
    return dict(forward.headers)


def test_a_record_walks_the_retry_topics_then_lands_in_the_dead_letter_topic() -> None:
    policy = RetryPolicy((100, 2000))
    first = route_failure("orders", 2, 7, 1000, [("trace", b"t1")], ValueError("bad amount"), policy, 5000)
    assert (first.topic, first.attempt, first.dead) == ("orders.retry.1", 1, False)
    h = headers_of(first)
    assert h["trace"] == b"t1"                                     # the application's headers stay
    assert h[retry.DELIVER_AT] == b"5100"                          # now + the first backoff
    assert h[retry.ERROR] == b"ValueError: bad amount"
    assert (h[retry.ORIGINAL_TOPIC], h[retry.ORIGINAL_PARTITION], h[retry.ORIGINAL_OFFSET],
            h[retry.ORIGINAL_TIMESTAMP]) == (b"orders", b"2", b"7", b"1000")

    # Consumed again from the retry topic (another partition and offset there).
    second = route_failure(first.topic, 0, 3, 5100, first.headers, "still bad", policy, 6000)
    assert (second.topic, second.attempt) == ("orders.retry.2", 2)
    h2 = headers_of(second)
    assert h2[retry.DELIVER_AT] == b"8000"
    assert h2[retry.ORIGINAL_PARTITION] == b"2" and h2[retry.ORIGINAL_OFFSET] == b"7"   # the first position
    assert [k for k, _ in second.headers].count(retry.ATTEMPT) == 1                      # replaced, not stacked

    dead = route_failure(second.topic, 1, 9, 8000, second.headers, "gave up", policy, 9000)
    assert (dead.topic, dead.attempt, dead.dead) == ("orders.dlq", 3, True)
    assert retry.DELIVER_AT not in headers_of(dead)
    assert headers_of(dead)[retry.ERROR] == b"gave up"
    assert retry.replay_headers(dead.headers) == (("trace", b"t1"),)


def test_no_backoffs_sends_a_failure_straight_to_the_dead_letter_topic() -> None:
    dead = route_failure("t", 0, 0, 0, [], RuntimeError("x"), RetryPolicy(()), 0)
    assert (dead.topic, dead.attempt, dead.dead) == ("t.dlq", 1, True)


def test_long_errors_are_cut_and_the_policy_names_its_topics() -> None:
    f = route_failure("t", 0, 0, 0, [], "e" * 5000, RetryPolicy((1,)), 0)
    assert len(headers_of(f)[retry.ERROR]) == retry.ERROR_MAX_CHARS
    assert RetryPolicy((1, 2)).topics("pay") == ["pay", "pay.retry.1", "pay.retry.2"]
    assert RetryPolicy.exponential(4, 100, 3, max_ms=1000).backoffs_ms == (100, 300, 900, 1000)
    with pytest.raises(ValueError):
        RetryPolicy((-1,))


def test_headers_read_the_last_value_and_ignore_garbage() -> None:
    hs = [(retry.ATTEMPT, b"1"), (retry.ATTEMPT, b"2"), (retry.DELIVER_AT, b"soon")]
    assert retry.header_int(hs, retry.ATTEMPT) == 2
    assert retry.due_at_ms(hs) is None          # not a number: due at once
    assert retry.header_text(hs, "absent") is None
