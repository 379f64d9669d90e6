"""Request and response headers, and whole request/response payloads.

A *payload* is a frame without its int32 length prefix (framing.py adds and strips it).

Header versions follow the API's flexible versions (kafka-protocol/README.md): request
header v2 for flexible versions and v1 otherwise (v0 only for ControlledShutdown v0);
response header v1 for flexible versions and v0 otherwise, except that ApiVersions
responses always use header v0 so a client can read them before it knows what the broker
supports (KIP-511). The header's client_id keeps its int16 length even in header v2.
"""
from __future__ import annotations

import dataclasses
import struct
from typing import Any

from clients.frozen import fast_init
from clients.protocol import _codec
from clients.protocol.api_keys import REQUEST_NAMES, RESPONSE_NAMES, ApiKey
from clients.protocol.types import INT16, INT32, CorruptFrameError, read_uvarint, write_uvarint

API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7


class UnsupportedVersionError(CorruptFrameError):
    """A request for an API key or version that does not exist.

    Raised with the fields of the fixed header start, so a server can still answer
    (ApiVersions: error 35 and a v0 body, KIP-511) or close the connection."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported API key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    unknown_tagged_fields: tuple = dataclasses.field(default=(), repr=False)


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int
    unknown_tagged_fields: tuple = dataclasses.field(default=(), repr=False)


def request_spec(api_key: int) -> _codec.MessageSpec:
    return _codec.spec_for(REQUEST_NAMES[api_key])


def response_spec(api_key: int) -> _codec.MessageSpec:
    return _codec.spec_for(RESPONSE_NAMES[api_key])


def request_header_version(api_key: int, api_version: int) -> int:
    if request_spec(api_key).is_flexible(api_version):
        return 2
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    return 1 if response_spec(api_key).is_flexible(api_version) else 0


def _read_tagged_section(buf: _codec.Frame, pos: int) -> tuple[tuple, int]:
    count, pos = read_uvarint(buf, pos)
    fields = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise CorruptFrameError("header tagged field past the end of the frame")
        fields.append((tag, bytes(buf[pos:pos + size])))
        pos += size
    return tuple(fields), pos


def _write_tagged_section(out: bytearray, fields: tuple) -> None:
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


# What a request or response with a given (api key, version) needs, found once: its body's
# spec and its header version (the fast path of every decode and encode). Keyed by
# api_key * 65536 + api_version: unique for two int16 values, and cheaper than a tuple.
_REQUEST_ROUTES: dict[int, tuple[_codec.MessageSpec, int]] = {}
_RESPONSE_ROUTES: dict[int, tuple[_codec.MessageSpec, int]] = {}
_FIXED_HEADER = struct.Struct(">hhi")   # api_key, api_version, correlation_id


def _request_route(api_key: int, api_version: int) -> tuple[_codec.MessageSpec, int] | None:
    """The body spec and header version of a request; None if the key or version is unknown."""
    route = _REQUEST_ROUTES.get(api_key * 65536 + api_version)
    if route is None:
        name = REQUEST_NAMES.get(api_key)
        if name is None:
            return None
        spec = _codec.spec_for(name)
        if not spec.min_version <= api_version <= spec.max_version:
            return None
        route = _REQUEST_ROUTES[api_key * 65536 + api_version] = (
            spec, request_header_version(api_key, api_version))
    return route


def _response_route(api_key: int, api_version: int) -> tuple[_codec.MessageSpec, int]:
    """The body spec and header version of a response; the version is not checked."""
    route = _RESPONSE_ROUTES.get(api_key * 65536 + api_version)
    if route is None:
        route = _RESPONSE_ROUTES[api_key * 65536 + api_version] = (
            response_spec(api_key), response_header_version(api_key, api_version))
    return route


def decode_request_header(payload: _codec.Frame) -> tuple[RequestHeader, int]:
    """Read the header; return it and where the body starts."""
    header, pos, _ = _decode_request_header(payload)
    return header, pos


def _decode_request_header(payload: _codec.Frame) -> tuple[RequestHeader, int, _codec.MessageSpec]:
    if len(payload) < 8:
        raise CorruptFrameError("request shorter than its fixed header")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(payload, 0)
    route = _request_route(api_key, api_version)
    if route is None:
        raise UnsupportedVersionError(api_key, api_version, correlation_id)
    spec, version = route
    pos = 8
    client_id = None
    tagged: tuple = ()
    if version >= 1:
        if pos + 2 > len(payload):
            raise CorruptFrameError("truncated client id")
        n = INT16.unpack_from(payload, pos)[0]
        pos += 2
        if n >= 0:
            if pos + n > len(payload):
                raise CorruptFrameError("client id runs past the end of the frame")
            try:
                client_id = str(payload[pos:pos + n], "utf-8")
            except UnicodeDecodeError:
                raise CorruptFrameError("client id is not UTF-8") from None
            pos += n
        elif n != -1:
            raise CorruptFrameError("negative client id length")
    if version >= 2:
        if pos < len(payload) and payload[pos] == 0:  # no tagged fields: nearly always
            pos += 1
        else:
            tagged, pos = _read_tagged_section(payload, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, tagged), pos, spec


def encode_request_header(out: bytearray, header: RequestHeader) -> None:
    version = request_header_version(header.api_key, header.api_version)
    _write_request_header(out, header, version)


def _write_request_header(out: bytearray, header: RequestHeader, version: int) -> None:
    out += _FIXED_HEADER.pack(header.api_key, header.api_version, header.correlation_id)
    if version >= 1:
        if header.client_id is None:
            out += INT16.pack(-1)
        else:
            data = header.client_id.encode("utf-8")
            out += INT16.pack(len(data))
            out += data
    if version >= 2:
        _write_tagged_section(out, header.unknown_tagged_fields)


def decode_request(payload: _codec.Frame) -> tuple[RequestHeader, Any]:
    """Decode a request payload into (header, body). Malformed -> CorruptFrameError."""
    if not isinstance(payload, (bytes, bytearray)):
        payload = bytes(payload)
    header, pos, spec = _decode_request_header(payload)
    # Trailing bytes after a complete body are ignored, as Kafka's brokers ignore them:
    # librdkafka's all-topics Metadata v12 carries 3 (a 4-byte placeholder where a 1-byte
    # compact count belongs), and Kafka reads the fields it knows.
    body, _ = _codec.decode_body(spec, header.api_version, payload, pos, exact=False)
    return header, body


def encode_request(header: RequestHeader, body: Any) -> bytes:
    route = _request_route(header.api_key, header.api_version)
    if route is None:  # the ValueError naming the valid versions
        request_spec(header.api_key).check_version(header.api_version)
    assert route is not None
    spec, version = route
    assert type(body) is spec.cls, (type(body), spec.name)
    out = bytearray()
    _write_request_header(out, header, version)
    spec.writer(header.api_version)(out, body)
    return bytes(out)


def decode_response(api_key: int, api_version: int, payload: _codec.Frame) -> tuple[ResponseHeader, Any]:
    if not isinstance(payload, (bytes, bytearray)):
        payload = bytes(payload)
    spec, header_version = _response_route(api_key, api_version)
    if not spec.min_version <= api_version <= spec.max_version:
        raise CorruptFrameError(f"{spec.name} has no version {api_version}")
    if len(payload) < 4:
        raise CorruptFrameError("response shorter than its header")
    correlation_id = INT32.unpack_from(payload, 0)[0]
    pos = 4
    tagged: tuple = ()
    if header_version >= 1:
        if len(payload) > 4 and payload[4] == 0:  # no tagged fields: nearly always
            pos = 5
        else:
            tagged, pos = _read_tagged_section(payload, pos)
    body, _ = _codec.decode_body(spec, api_version, payload, pos)
    return ResponseHeader(correlation_id, tagged), body


def _encode_response(api_key: int, api_version: int, correlation_id: int, body: Any,
                     framed: bool) -> _codec._Out:
    """The response payload, after a 4-byte placeholder for the frame length if ``framed``."""
    spec, header_version = _response_route(api_key, api_version)
    assert type(body) is spec.cls, (type(body), spec.name)
    spec.check_version(api_version)
    out = _codec._Out()
    if framed:
        out += _NO_LENGTH
    out += INT32.pack(correlation_id)
    if header_version >= 1:
        out.append(0)  # no tagged fields in response headers we send
    spec.writer(api_version)(out, body)
    return out


_NO_LENGTH = bytes(4)


def _split_regions(out: _codec._Out, start: int) -> list[Any]:
    parts: list[Any] = []
    for offset, region in out.regions:
        parts.append(bytes(out[start:offset]))
        parts.append(region)
        start = offset
    parts.append(bytes(out[start:]))
    return parts


def encode_response_parts(api_key: int, api_version: int, correlation_id: int,
                          body: Any) -> list[Any]:
    """The response payload as chunks: bytes, and any non-bytes ``records`` values (file
    regions) in place, for zero-copy sends. Lengths add up to the payload size."""
    out = _encode_response(api_key, api_version, correlation_id, body, framed=False)
    if not out.regions:
        return [bytes(out)]
    return _split_regions(out, 0)


def encode_response_frame(api_key: int, api_version: int, correlation_id: int,
                          body: Any) -> list[Any]:
    """``encode_response_parts`` with the frame's length first, encoded into the same
    buffer (the payload is not copied again to put the length before it). Without file
    regions the frame is one bytearray, handed out as it is."""
    out = _encode_response(api_key, api_version, correlation_id, body, framed=True)
    size = len(out) - 4
    if not out.regions:
        INT32.pack_into(out, 0, size)
        return [out]
    INT32.pack_into(out, 0, size + sum(len(region) for _, region in out.regions))
    return _split_regions(out, 0)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    parts = encode_response_parts(api_key, api_version, correlation_id, body)
    assert len(parts) == 1, "file regions in a response: use encode_response_parts"
    return parts[0]


__all__ = [
    "ApiKey", "RequestHeader", "ResponseHeader", "UnsupportedVersionError",
    "decode_request", "decode_request_header", "encode_request", "decode_response",
    "encode_response", "encode_response_frame", "encode_response_parts", "request_header_version",
    "response_header_version",
]
