"""KIP-890 part 1: a leader verifies a transactional write with the coordinator first (pure).

Theory of operation
-------------------
A hanging transaction is a transactional batch appended after its transaction ended (a
late retry, a zombie): nothing will ever write its marker, and the last stable offset
stops there. So before a partition leader appends the first transactional batch of a
(partition, producer id, epoch), it asks the transactional id's coordinator whether the
partition is in the ongoing transaction (AddPartitionsToTxn v4+, ``verify_only``), and
appends only on yes. Later batches of the same transaction go straight through.

The answer takes a round trip, during which the transaction may end and its marker be
appended here. Kafka's ``VerificationGuard``: ``start`` records a guard for the
(partition, producer id) before asking; a marker for that producer on that partition
(``on_marker``, called synchronously when the marker is appended: contract point 2) or a
leadership change drops it; ``complete`` after a positive answer accepts only if the guard
it started with is still there. The append that follows is synchronous on the event loop,
so no marker can come between the check and the append.

Verified entries live until the producer's next marker on the partition or a leadership
change, as Kafka's ongoing-transaction check in the producer state would say.

**Asking ahead** (Ketch's, not Kafka's). A client sends one Produce per partition (librdkafka
does), and a connection's next request is read only once the previous one has appended, so
a broker leading two partitions of a transaction would ask the coordinator twice in a row
on the transaction's critical path. The leader therefore also asks, in the same question,
about the other partitions of the same topics it leads (``start_ahead`` /
``complete_ahead``): a yes verifies them for when their batches come, a no is forgotten. A
guard is a guard whoever asked: a marker in between still voids the answer. An ahead
question never disturbs one asked for a batch: it starts only where nothing is recorded,
and a no leaves an entry alone once a batch's question shares its guard.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from clients.types import TopicPartition

__all__ = ["VerificationState"]


@dataclass(slots=True)
class _Entry:
    producer_epoch: int
    guard: int
    verified: bool
    ahead: bool = False     # asked ahead only: no batch waits on this guard


class VerificationState:
    def __init__(self) -> None:
        self._entries: dict[tuple[TopicPartition, int], _Entry] = {}
        self._guards = itertools.count(1)

    def is_verified(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> bool:
        entry = self._entries.get((tp, producer_id))
        return entry is not None and entry.verified and entry.producer_epoch == producer_epoch

    def start(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> int:
        """A guard for a verification about to be asked; a newer one replaces an older."""
        entry = self._entries.get((tp, producer_id))
        if entry is not None and entry.producer_epoch == producer_epoch and not entry.verified:
            entry.ahead = False     # a batch now waits on it too
            return entry.guard      # a verification already in flight: share its guard
        guard = next(self._guards)
        self._entries[(tp, producer_id)] = _Entry(producer_epoch, guard, False)
        return guard

    def complete(self, tp: TopicPartition, producer_id: int, guard: int, ok: bool) -> bool:
        """The coordinator answered; True if the batch may be appended now."""
        entry = self._entries.get((tp, producer_id))
        if entry is None or entry.guard != guard:
            return False            # a marker or a leadership change came in between
        if not ok:
            del self._entries[(tp, producer_id)]
            return False
        entry.verified = True
        return True

    def start_ahead(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> int | None:
        """A guard for asking about ``tp`` ahead of its first batch; None when something
        is recorded for it already (verified, asked, or an entry of another epoch)."""
        if (tp, producer_id) in self._entries:
            return None
        guard = next(self._guards)
        self._entries[(tp, producer_id)] = _Entry(producer_epoch, guard, False, ahead=True)
        return guard

    def complete_ahead(self, tp: TopicPartition, producer_id: int, guard: int, ok: bool) -> None:
        """The coordinator answered a question asked ahead: a yes verifies ``tp`` if no
        marker came in between; a no drops the entry unless a batch's question shares it
        (that one's own answer decides)."""
        entry = self._entries.get((tp, producer_id))
        if entry is None or entry.guard != guard:
            return
        if ok:
            entry.verified = True
        elif entry.ahead:
            del self._entries[(tp, producer_id)]

    def on_marker(self, tp: TopicPartition, producer_id: int) -> None:
        self._entries.pop((tp, producer_id), None)

    def on_leadership(self, tp: TopicPartition) -> None:
        for key in [k for k in self._entries if k[0] == tp]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
