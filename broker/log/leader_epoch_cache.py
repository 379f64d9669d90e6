"""The leader epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

Theory of operation
-------------------
Every batch carries the epoch of the leader that appended it (`partition_leader_epoch`).
The cache keeps one entry per epoch, `(epoch, start_offset)`: the first offset written
in that epoch. Both columns are strictly increasing. It answers OffsetForLeaderEpoch
(`end_offset_for`), which followers use after a leader change to find where their log
diverges from the leader's and truncate there instead of to the high watermark (KIP-101;
the high watermark alone loses or diverges records, see KIP-101's two scenarios).

Transitions, mirroring Kafka's `LeaderEpochFileCache`:

* `assign(epoch, start_offset)` on append when a batch's epoch is not the latest. An entry
  whose epoch or start offset is >= the new one is removed first, so the columns stay
  monotonic even after a restart re-appends (Kafka: `maybeTruncateNonMonotonicEntries`).
  Re-assigning the latest epoch with a larger start offset is a no-op.
* `truncate_from_end(end_offset)` when the log is truncated to `end_offset`: entries that
  start at or after it go.
* `truncate_from_start(start_offset)` when the log start offset advances: entries wholly
  before it go, and the last of them is kept with its start moved up to `start_offset`
  (the epoch still covers the log's first offset).

The checkpoint file is Kafka's text format (`CheckpointFile`): a version line `0`, a
count line, then one `epoch start_offset` line per entry. Persisting it is the caller's
job (`PartitionLog` writes it atomically through the storage port after every change).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import cast

__all__ = [
    "EpochEntry",
    "EpochEndOffset",
    "LeaderEpochCache",
    "CorruptCheckpointError",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
]

UNDEFINED_EPOCH = -1  # Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH / UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1
_CHECKPOINT_VERSION = 0


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not parse; the caller logs it and starts empty."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """The answer to OffsetForLeaderEpoch for one partition (KIP-279)."""

    leader_epoch: int  # the largest epoch <= the requested one, or UNDEFINED_EPOCH
    end_offset: int  # first offset after that epoch, or UNDEFINED_EPOCH_OFFSET


# A shared, read-only stand-in for an empty cache's lists: a replica that never had an
# epoch here (a new follower, most of them at 100k) holds no lists of its own (2 x 56 B).
_EMPTY = cast("list[int]", ())


class LeaderEpochCache:
    __slots__ = ("_epochs", "_starts")

    def __init__(self, entries: list[EpochEntry] | None = None) -> None:
        # Invariant: epochs strictly increasing, start offsets strictly increasing.
        self._epochs: list[int] = _EMPTY
        self._starts: list[int] = _EMPTY
        for entry in entries or []:
            self.assign(entry.epoch, entry.start_offset)

    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts)]

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed."""
        assert epoch >= 0 and start_offset >= 0, (epoch, start_offset)
        if self._epochs and not (
            epoch != self._epochs[-1] or start_offset < self._starts[-1]
        ):
            return False
        if self._epochs is _EMPTY:
            self._epochs, self._starts = [], []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds `offset`, or UNDEFINED_EPOCH before the first entry."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def previous_epoch(self) -> int:
        return self._epochs[-2] if len(self._epochs) >= 2 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """KIP-279: (the largest epoch <= requested_epoch, the end offset of that epoch).

        The end offset of an epoch is the start offset of the next larger epoch in the
        cache, or the log end offset for the latest epoch. A requested epoch older than
        every entry answers (requested_epoch, start of the first entry); one newer than
        every entry answers UNDEFINED (Kafka: `LeaderEpochFileCache.endOffsetFor`).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == self._epochs[-1]:
            return EpochEndOffset(requested_epoch, log_end_offset)
        higher = bisect_right(self._epochs, requested_epoch)  # first epoch > requested
        if higher == len(self._epochs):
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if higher == 0:
            return EpochEndOffset(requested_epoch, self._starts[0])
        return EpochEndOffset(self._epochs[higher - 1], self._starts[higher])

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove entries starting at or after `end_offset` (the log was truncated there)."""
        keep = bisect_left(self._starts, end_offset)
        if keep == len(self._starts):
            return False
        del self._epochs[keep:]
        del self._starts[keep:]
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Remove entries wholly before `start_offset`, moving the last such one up to it."""
        covered = bisect_right(self._starts, start_offset)  # entries starting <= start_offset
        if covered == 0:
            return False
        last_epoch = self._epochs[covered - 1]
        if covered == 1 and self._starts[0] == start_offset:
            return False
        del self._epochs[:covered]
        del self._starts[:covered]
        self._epochs.insert(0, last_epoch)
        self._starts.insert(0, start_offset)
        return True

    def clear(self) -> None:
        self._epochs, self._starts = _EMPTY, _EMPTY

    # --- checkpoint file ---------------------------------------------------------------

    def to_checkpoint(self) -> bytes:
        lines = [str(_CHECKPOINT_VERSION), str(len(self._epochs))]
        lines += [f"{e} {s}" for e, s in zip(self._epochs, self._starts)]
        return ("\n".join(lines) + "\n").encode("ascii")

    @classmethod
    def from_checkpoint(cls, data: bytes) -> LeaderEpochCache:
        try:
            lines = data.decode("ascii").splitlines()
            if len(lines) < 2 or int(lines[0]) != _CHECKPOINT_VERSION:
                raise CorruptCheckpointError("missing or unknown checkpoint version")
            count = int(lines[1])
            if count != len(lines) - 2:
                raise CorruptCheckpointError(f"checkpoint says {count} entries, has {len(lines) - 2}")
            entries = []
            for line in lines[2:]:
                epoch_text, start_text = line.split()
                entries.append(EpochEntry(int(epoch_text), int(start_text)))
        except (UnicodeDecodeError, ValueError) as e:
            if isinstance(e, CorruptCheckpointError):
                raise
            raise CorruptCheckpointError(str(e)) from None
        for a, b in zip(entries, entries[1:]):
            if not (a.epoch < b.epoch and a.start_offset < b.start_offset):
                raise CorruptCheckpointError("checkpoint entries are not increasing")
        if any(e.epoch < 0 or e.start_offset < 0 for e in entries):
            raise CorruptCheckpointError("negative checkpoint entry")
        return cls(entries)
