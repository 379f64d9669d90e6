"""The tag filter a Ketch consumer sends in a Fetch request (issue 18): a Ketch extension
carried as a tagged field of the request's top level, so it exists only in flexible
versions (Fetch v12+). A Kafka broker skips tagged fields it does not know and answers
with every record; Ketch's consumer then filters by itself
(``clients.records.tags.record_matches``), so the result is the same either way, only
the bytes moved differ.

Field ``FETCH_TAG_FILTER`` (tag number chosen far above Kafka's: Fetch uses 0 and 1):
a compact array of (topic: compact string, tags: compact array of compact bytes).
A topic absent from it is read unfiltered.
"""
from __future__ import annotations

from typing import Mapping

from clients.protocol.types import CorruptFrameError, read_uvarint, write_uvarint

__all__ = ["FETCH_TAG_FILTER", "decode_tag_filter", "encode_tag_filter", "tag_filter_of"]

FETCH_TAG_FILTER = 0x4B54        # "KT"


def encode_tag_filter(filters: Mapping[str, frozenset[bytes]]) -> bytes:
    out = bytearray()
    write_uvarint(out, len(filters) + 1)
    for topic, tags in sorted(filters.items()):
        name = topic.encode()
        write_uvarint(out, len(name) + 1)
        out += name
        write_uvarint(out, len(tags) + 1)
        for tag in sorted(tags):
            write_uvarint(out, len(tag) + 1)
            out += tag
    return bytes(out)


def decode_tag_filter(data: bytes) -> dict[str, frozenset[bytes]]:
    """The filter, or CorruptFrameError for bytes that are not one."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise CorruptFrameError("tag filter: length beyond its field")
        piece = data[pos:pos + n]
        pos += n
        return piece

    def length() -> int:
        nonlocal pos
        n, pos = read_uvarint(data, pos)
        return n - 1
    try:
        out: dict[str, frozenset[bytes]] = {}
        for _ in range(length()):
            topic = take(length()).decode()
            out[topic] = frozenset(take(length()) for _ in range(length()))
    except (IndexError, UnicodeDecodeError) as e:
        raise CorruptFrameError(f"tag filter: {e}") from None
    if pos != len(data):
        raise CorruptFrameError("tag filter: bytes left over")
    return out


def tag_filter_of(unknown_tagged_fields: tuple[tuple[int, bytes], ...]) -> dict[str, frozenset[bytes]]:
    """The filter a request carries (empty: none)."""
    for tag, data in unknown_tagged_fields:
        if tag == FETCH_TAG_FILTER:
            return decode_tag_filter(data)
    return {}
