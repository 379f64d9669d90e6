"""Kafka's primitive wire types: readers and writers.

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; writers append to a bytearray.
The schema codec (``_codec.py``) generates its own code for the common cases and calls these
for the rest (multi-byte varints, tag sections).

Two varint families exist and must not be confused (kafka-protocol/README.md):
- unsigned LEB128 varints: compact lengths, array counts and tagged-field headers of the
  flexible (KIP-482) encoding;
- zig-zag signed varints / varlongs: inside v2 records (``clients.records``).

Every reader fails with ``CorruptFrameError`` on short or malformed input, never with an
``IndexError`` or a silent short slice, and never allocates more than the input holds.
"""
from __future__ import annotations

import base64
import struct
import uuid

__all__ = [
    "CorruptFrameError", "ZERO_UUID", "uuid_text", "parse_uuid_text",
    "read_uvarint", "write_uvarint", "read_varint", "write_varint", "read_varlong", "write_varlong",
    "size_of_uvarint", "zigzag_encode", "zigzag_decode",
]


class CorruptFrameError(ValueError):
    """The peer sent bytes that are not a valid Kafka frame: truncated, oversized or garbage.

    The one typed decode error of the protocol layer. A server that sees it closes that
    connection only (STYLE.md, "The peer broke the protocol")."""


ZERO_UUID = uuid.UUID(int=0)


def uuid_text(value: uuid.UUID) -> str:
    """Kafka's text form of a Uuid (``Uuid.toString``: url-safe base64, no padding), as
    meta.properties and the tools print it."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def random_uuid() -> uuid.UUID:
    """``Uuid.randomUuid``: a random id outside the range Kafka reserves (ids whose first
    8 bytes are zero: UNASSIGNED, LOST, MIGRATING, ...), e.g. for a directory id."""
    while True:
        value = uuid.uuid4()
        if value.bytes[:8] != bytes(8):
            return value


def parse_uuid_text(text: str) -> uuid.UUID:
    """``Uuid.fromString``; ValueError if ``text`` is not one."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a Kafka Uuid: {text!r}") from e
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    return uuid.UUID(bytes=raw)

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")


def read_uvarint(buf: bytes | bytearray, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned LEB128; at most ``max_bytes`` bytes (5 for 32-bit, 10 for 64-bit values)."""
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptFrameError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise CorruptFrameError("varint longer than %d bytes" % max_bytes)


def write_uvarint(out: bytearray, value: int) -> None:
    assert value >= 0, value
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def size_of_uvarint(value: int) -> int:
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


def zigzag_encode(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def read_varint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos, 5)
    if raw > 0xFFFFFFFF:
        raise CorruptFrameError("varint out of 32-bit range")
    return zigzag_decode(raw), pos


def write_varint(out: bytearray, value: int) -> None:
    assert -(1 << 31) <= value < (1 << 31), value
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def read_varlong(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise CorruptFrameError("varlong out of 64-bit range")
    return zigzag_decode(raw), pos


def write_varlong(out: bytearray, value: int) -> None:
    assert -(1 << 63) <= value < (1 << 63), value
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
