"""Record tags and the broker-side tag filter (issue 18).

A record carries its tags in ``ketch.tag`` headers (one tag per header; a record may
carry several). A reader that wants only some tags gets, from a Ketch broker, batches in
which the other records are dropped (``filter_batches``); from any other broker it gets
everything and drops them itself (``record_matches``, the same rule).

The rule: a record matches when one of its ``ketch.tag`` values is among the wanted
tags; a record without tags never matches. Control batches (transaction markers) are
always kept, since read_committed readers need them. A batch whose records all match is
passed on as its original bytes (no re-encoding); one with some matching is rebuilt
with only those (``filtered_batch``: same offsets, so a reader's position moves past
the dropped records); one with none becomes an empty batch (61 bytes) for the same
reason. A partial batch at the end of ``raw`` (cut by a fetch's byte limit) is kept as
it came: the reader leaves it for its next fetch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from clients.records.batch import decode_batch, filtered_batch, iter_batches

__all__ = ["TAG_HEADER", "FilteredRecords", "filter_batches", "record_matches", "tag_headers"]

TAG_HEADER = "ketch.tag"


def tag_headers(tags: Iterable[str]) -> list[tuple[str, bytes]]:
    """The headers that tag a record (for producers)."""
    return [(TAG_HEADER, t.encode()) for t in tags]


def record_matches(headers: Sequence[tuple[str, bytes | None]], tags: frozenset[bytes]) -> bool:
    for k, v in headers:
        if k == TAG_HEADER and v in tags:
            return True
    return False


@dataclass(frozen=True, slots=True)
class FilteredRecords:
    data: bytes
    records_kept: int
    records_dropped: int
    batches_rebuilt: int


def filter_batches(raw: bytes | memoryview, tags: frozenset[bytes]) -> FilteredRecords:
    view = memoryview(raw)
    out: list[bytes | memoryview] = []
    kept = dropped = rebuilt = 0
    end = 0
    for pos, header in iter_batches(view, partial_tail_ok=True):
        end = pos + header.size_in_bytes
        if header.is_control:
            out.append(view[pos:end])
            continue
        records = decode_batch(view, pos).records
        matching = [r for r in records if record_matches(r.headers, tags)]
        kept += len(matching)
        dropped += len(records) - len(matching)
        if len(matching) == len(records):
            out.append(view[pos:end])
        else:
            out.append(filtered_batch(header, matching))
            rebuilt += 1
    if end < len(view):
        out.append(view[end:])          # a partial batch: the reader fetches it again
    return FilteredRecords(b"".join(out), kept, dropped, rebuilt)
