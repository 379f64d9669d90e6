"""Delayed delivery's headers (issue 18), the one home of their names and rules.

A record carrying ``ketch.deliver.at`` (ms since the epoch) or ``ketch.deliver.after``
(ms from its arrival at the partition's leader), in ASCII decimal, is appended to its
partition by the broker only when due (``broker.delayed``; docs/delayed_delivery.md).
Any Kafka producer can set them; Ketch's ``send(..., deliver_at=, deliver_after=)`` does.
"""
from __future__ import annotations

from typing import Sequence

__all__ = ["DELIVER_AFTER", "DELIVER_AT", "with_delivery_time"]

DELIVER_AT = "ketch.deliver.at"
DELIVER_AFTER = "ketch.deliver.after"

Headers = Sequence[tuple[str, "bytes | None"]]


def with_delivery_time(headers: Headers | None, deliver_at: int | None,
                       deliver_after: int | None) -> Headers | None:
    """``headers`` plus the delivery header asked for (at most one of the two)."""
    if deliver_at is None and deliver_after is None:
        return headers
    if deliver_at is not None and deliver_after is not None:
        raise ValueError("give deliver_at or deliver_after, not both")
    name, ms = (DELIVER_AT, deliver_at) if deliver_at is not None else (DELIVER_AFTER, deliver_after)
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
        raise ValueError(f"{name} must be a non-negative int of ms, got {ms!r}")
    return [*(headers or ()), (name, str(ms).encode())]
