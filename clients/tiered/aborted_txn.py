"""One entry of a segment's aborted transaction index (`<base offset>.txnindex`, Kafka's
AbortedTxn): the codec, shared by the broker's log (``broker.log.transaction_index``, which
writes and reads the files) and the archive's readers (a remote segment's uploaded
transaction index, read by the broker and by the Spark source's executors).

    version int16 (0) | producer id int64 | first offset int64 | last offset int64
    | last stable offset int64
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["AbortedTxn", "CorruptTxnIndexError", "ENTRY_SIZE"]

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size        # 34, Kafka's AbortedTxn.TOTAL_SIZE
_VERSION = 0


class CorruptTxnIndexError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int            # the ABORT marker's offset
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes | memoryview, pos: int = 0) -> AbortedTxn:
        version, producer_id, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != _VERSION:
            raise CorruptTxnIndexError(f"aborted transaction entry version {version}")
        return cls(producer_id, first, last, lso)
