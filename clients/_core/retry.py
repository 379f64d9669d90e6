"""Retry topics and dead letters (issue 18): where a record goes when its handler fails.

Theory of operation
-------------------
Non-blocking retries, as Spring Kafka's retry topics and Uber's retry queues do them: a
record whose handler fails is not retried in place (which would stall its partition);
it is written to the next *retry topic* with a delivery time, and the main topic moves
on. For a topic ``orders`` and a policy of backoffs ``[1 s, 10 s]``:

    orders --fail--> orders.retry.1 (due 1 s later) --fail--> orders.retry.2 (due 10 s
    later) --fail--> orders.dlq (the dead-letter topic: kept, never consumed by the app)

Each forwarded record keeps its key, value and the application's headers, and carries
Ketch's (the ``ketch.`` prefix is reserved):

- ``ketch.deliver.at``: when it is due, ms since the epoch (the delayed-delivery header;
  a consumer of a retry topic does not hand the record to the handler before then);
- ``ketch.retry.attempt``: how many times the handler has failed on it so far;
- ``ketch.retry.error``: the last failure, ``ExceptionClass: message`` (at most 1,000 chars);
- ``ketch.retry.original.topic`` / ``.partition`` / ``.offset`` / ``.timestamp``: where it
  was first consumed (set once, at the first failure, and carried along).

Ordering: records of one partition of a retry topic are due in the order they were
written (one backoff per retry topic), so waiting on the first due one never holds a
later one back needlessly; across topics there is no order: a failed record is handled
again after later records of its original partition. Applications that need per-key
order must not use retry topics (Spring's rule too).

Everything here is pure: names, headers and routing decisions. The asyncio shell is
``clients.aio.retry.RetryingConsumer``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from clients._core.delayed import DELIVER_AT   # re-exported: the header's home is there

__all__ = [
    "ATTEMPT", "DELIVER_AT", "ERROR", "ORIGINAL_OFFSET", "ORIGINAL_PARTITION", "ORIGINAL_TIMESTAMP",
    "ORIGINAL_TOPIC", "Forward", "RetryPolicy", "dlq_topic", "due_at_ms", "header_int", "header_text",
    "replay_headers", "retry_topic", "route_failure",
]

ATTEMPT = "ketch.retry.attempt"
ERROR = "ketch.retry.error"
ORIGINAL_TOPIC = "ketch.retry.original.topic"
ORIGINAL_PARTITION = "ketch.retry.original.partition"
ORIGINAL_OFFSET = "ketch.retry.original.offset"
ORIGINAL_TIMESTAMP = "ketch.retry.original.timestamp"
_KETCH_RETRY_HEADERS = frozenset({DELIVER_AT, ATTEMPT, ERROR, ORIGINAL_TOPIC, ORIGINAL_PARTITION,
                                  ORIGINAL_OFFSET, ORIGINAL_TIMESTAMP})
ERROR_MAX_CHARS = 1000
RETRY_INFIX = ".retry."
DLQ_SUFFIX = ".dlq"

Headers = Sequence[tuple[str, bytes | None]]


def retry_topic(topic: str, n: int) -> str:
    """The n-th retry topic (1-based) of a main topic."""
    return f"{topic}{RETRY_INFIX}{n}"


def dlq_topic(topic: str) -> str:
    return f"{topic}{DLQ_SUFFIX}"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``backoffs_ms[i]``: how long a record waits in retry topic i + 1. No backoffs: a
    failed record goes straight to the dead-letter topic."""
    backoffs_ms: tuple[int, ...] = (1000, 10_000, 60_000)

    def __post_init__(self) -> None:
        if any(b < 0 for b in self.backoffs_ms):
            raise ValueError(f"backoffs must be >= 0 ms, got {list(self.backoffs_ms)}")

    @classmethod
    def exponential(cls, retries: int, initial_ms: int, multiplier: float = 2.0,
                    max_ms: int = 3_600_000) -> "RetryPolicy":
        if retries < 0 or initial_ms < 0 or multiplier < 1:
            raise ValueError("retries and initial_ms must be >= 0 and multiplier >= 1")
        return cls(tuple(min(max_ms, int(initial_ms * multiplier ** i)) for i in range(retries)))

    @property
    def retries(self) -> int:
        return len(self.backoffs_ms)

    def topics(self, topic: str) -> list[str]:
        """Every topic a consumer of ``topic`` under this policy reads (main and retries)."""
        return [topic] + [retry_topic(topic, n) for n in range(1, self.retries + 1)]


def header_text(headers: Headers, key: str) -> str | None:
    """The last value of ``key`` as text (the last wins, as Kafka's Headers.lastHeader)."""
    for k, v in reversed(headers):
        if k == key:
            return None if v is None else v.decode("utf-8", "replace")
    return None


def header_int(headers: Headers, key: str) -> int | None:
    text = header_text(headers, key)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def due_at_ms(headers: Headers) -> int | None:
    """When a record may be handled; None: at once."""
    return header_int(headers, DELIVER_AT)


@dataclass(frozen=True, slots=True)
class Forward:
    """Write the failed record to ``topic`` with ``headers`` (key and value unchanged)."""
    topic: str
    headers: tuple[tuple[str, bytes | None], ...]
    attempt: int
    dead: bool              # the dead-letter topic: no more attempts


def _origin(topic: str, partition: int, offset: int, timestamp_ms: int,
            headers: Headers) -> list[tuple[str, bytes | None]]:
    """The record's first coordinates: carried along once set, else these."""
    if header_text(headers, ORIGINAL_TOPIC) is not None:
        return [(k, v) for k, v in headers if k in (ORIGINAL_TOPIC, ORIGINAL_PARTITION,
                                                    ORIGINAL_OFFSET, ORIGINAL_TIMESTAMP)]
    return [(ORIGINAL_TOPIC, topic.encode()), (ORIGINAL_PARTITION, str(partition).encode()),
            (ORIGINAL_OFFSET, str(offset).encode()), (ORIGINAL_TIMESTAMP, str(timestamp_ms).encode())]


def route_failure(topic: str, partition: int, offset: int, timestamp_ms: int, headers: Headers,
                  error: BaseException | str, policy: RetryPolicy, now_ms: int) -> Forward:
    """Where a record consumed from ``topic`` goes after its handler raised ``error``."""
    attempt = (header_int(headers, ATTEMPT) or 0) + 1
    origin = _origin(topic, partition, offset, timestamp_ms, headers)
    main = header_text(origin, ORIGINAL_TOPIC) or topic
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    own = [(k, v) for k, v in headers if k not in _KETCH_RETRY_HEADERS]
    ketch = origin + [(ATTEMPT, str(attempt).encode()), (ERROR, text[:ERROR_MAX_CHARS].encode())]
    if attempt > policy.retries:
        return Forward(dlq_topic(main), tuple(own + ketch), attempt, dead=True)
    due = now_ms + policy.backoffs_ms[attempt - 1]
    return Forward(retry_topic(main, attempt), tuple(own + ketch + [(DELIVER_AT, str(due).encode())]),
                   attempt, dead=False)


def replay_headers(headers: Iterable[tuple[str, bytes | None]]) -> tuple[tuple[str, bytes | None], ...]:
    """A dead letter's headers for re-driving it into its main topic: the application's
    own, without Ketch's retry bookkeeping (the record starts over)."""
    return tuple((k, v) for k, v in headers if k not in _KETCH_RETRY_HEADERS)
