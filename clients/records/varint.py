"""Zig-zag varints and varlongs as records v2 use them.

Kafka's records encode signed numbers as zig-zag (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...)
followed by unsigned LEB128: "varint" for 32-bit values (at most 5 bytes), "varlong" for
64-bit values (at most 10 bytes) (kafka-protocol/README.md, "Record batch v2"). The
*unsigned* varints of the flexible protocol encoding live in `clients.protocol.types`; these
are kept apart so that a bad record reports CORRUPT_MESSAGE rather than a frame error.

Readers take `(buf, pos)` and return `(value, new_pos)`; they raise CorruptRecordError on a
truncated or over-long varint, never IndexError. The record decoder in `batch.py` inlines
the one-byte case of these readers for speed and calls them for the rest.
"""

from __future__ import annotations

from clients.records.errors import CorruptRecordError

__all__ = [
    "read_varint",
    "read_varlong",
    "write_varint",
    "write_varlong",
    "size_of_varint",
    "size_of_varlong",
]

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _read_unsigned(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint (int32, at most 5 bytes) at `pos`."""
    u, pos = _read_unsigned(buf, pos, 5)
    if u > 0xFFFFFFFF:
        raise CorruptRecordError("varint overflows 32 bits")
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varlong (int64, at most 10 bytes) at `pos`."""
    u, pos = _read_unsigned(buf, pos, 10)
    if u > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError("varlong overflows 64 bits")
    return (u >> 1) ^ -(u & 1), pos


def _write_unsigned(out: bytearray, u: int) -> None:
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def write_varint(out: bytearray, value: int) -> None:
    """Append `value` (an int32) as a zig-zag varint."""
    assert _INT32_MIN <= value <= _INT32_MAX, value
    _write_unsigned(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Append `value` (an int64) as a zig-zag varlong."""
    assert _INT64_MIN <= value <= _INT64_MAX, value
    _write_unsigned(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _size_of_unsigned(u: int) -> int:
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def size_of_varint(value: int) -> int:
    """Bytes that `write_varint(value)` appends."""
    return _size_of_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def size_of_varlong(value: int) -> int:
    """Bytes that `write_varlong(value)` appends."""
    return _size_of_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
