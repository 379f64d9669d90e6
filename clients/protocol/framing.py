"""Sans-I/O Kafka connections: bytes in, events out; messages in, bytes out.

Like h11's ``Connection``: the shell feeds whatever the socket gave to ``receive_data`` and
pulls complete events with ``next_event`` until it returns ``NEED_DATA``. Nothing here
touches a socket, so any chunking of the input gives the same events (tested byte by byte).

Every frame is an int32 length followed by that many bytes. A length above
``frame_bytes_max`` (the broker's ``socket.request.max.bytes``) is refused as soon as the
four length bytes arrive, before any of the body is buffered. Any protocol violation moves
the connection to ``ERROR`` and raises ``CorruptFrameError``; the shell then closes this
connection only.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

from clients.frozen import fast_init
from clients.protocol import _headers
from clients.protocol.types import INT32, CorruptFrameError

DEFAULT_FRAME_BYTES_MAX = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA = _Sentinel.NEED_DATA


class ConnectionState(enum.Enum):
    OPEN = "OPEN"
    ERROR = "ERROR"


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class RequestReceived:
    header: _headers.RequestHeader
    body: Any
    size_in_bytes: int        # the frame's payload length


@dataclasses.dataclass(frozen=True, slots=True)
class UnsupportedRequest:
    """A request naming an API key or version Ketch's schemas do not know."""
    api_key: int
    api_version: int
    correlation_id: int


@fast_init
@dataclasses.dataclass(frozen=True, slots=True)
class ResponseReceived:
    header: _headers.ResponseHeader
    body: Any
    api_key: int
    api_version: int


def frame(payload: bytes) -> bytes:
    return INT32.pack(len(payload)) + payload


class _FrameReader:
    def __init__(self, frame_bytes_max: int) -> None:
        assert frame_bytes_max > 0
        self.frame_bytes_max = frame_bytes_max
        self._buf = bytearray()
        self.state = ConnectionState.OPEN

    def receive_data(self, data: bytes) -> None:
        if self.state is ConnectionState.ERROR:
            raise CorruptFrameError("connection is in ERROR state")
        self._buf += data

    def _next_payload(self) -> bytearray | None:
        if self.state is ConnectionState.ERROR:
            raise CorruptFrameError("connection is in ERROR state")
        if len(self._buf) < 4:
            return None
        size = INT32.unpack_from(self._buf, 0)[0]
        if size < 0 or size > self.frame_bytes_max:
            self.state = ConnectionState.ERROR
            # A TLS record (handshake, TLS 1.x) where a Kafka frame should be.
            hint = " (a TLS handshake on a plaintext listener?)" if self._buf[:2] == b"\x16\x03" else ""
            raise CorruptFrameError(f"frame size {size} outside 0..{self.frame_bytes_max}{hint}")
        if len(self._buf) < 4 + size:
            return None
        payload = self._buf[4:4 + size]   # a new bytearray: records in it can be stamped in place
        del self._buf[:4 + size]
        return payload

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf)


class ServerConnection(_FrameReader):
    """The broker's side: request frames in, response frames out."""

    def __init__(self, frame_bytes_max: int = DEFAULT_FRAME_BYTES_MAX) -> None:
        super().__init__(frame_bytes_max)

    def next_event(self) -> RequestReceived | UnsupportedRequest | _Sentinel:
        payload = self._next_payload()
        if payload is None:
            return NEED_DATA
        try:
            header, body = _headers.decode_request(payload)
        except _headers.UnsupportedVersionError as e:
            # The frame boundary is intact, so the connection can go on after answering.
            return UnsupportedRequest(e.api_key, e.api_version, e.correlation_id)
        except CorruptFrameError:
            self.state = ConnectionState.ERROR
            raise
        return RequestReceived(header, body, len(payload))

    def next_token(self) -> bytes | _Sentinel:
        """The next frame as raw bytes: a SASL token on the legacy path (after SaslHandshake
        v0 the client sends length-prefixed tokens with no request header)."""
        payload = self._next_payload()
        return NEED_DATA if payload is None else bytes(payload)

    def send(self, api_key: int, api_version: int, correlation_id: int, body: Any) -> list[Any]:
        """The response frame as chunks (bytes and zero-copy file regions), length first."""
        return _headers.encode_response_frame(api_key, api_version, correlation_id, body)


class ClientConnection(_FrameReader):
    """The client's side: requests out, responses in, matched by correlation id in order."""

    def __init__(self, client_id: str | None = "ketch", frame_bytes_max: int = DEFAULT_FRAME_BYTES_MAX) -> None:
        super().__init__(frame_bytes_max)
        self.client_id = client_id
        self._next_correlation_id = 0
        self._in_flight: list[tuple[int, int, int]] = []  # (correlation id, api key, version)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def send(self, api_key: int, api_version: int, body: Any, expect_response: bool = True) -> tuple[int, bytes]:
        """Encode a request; returns (correlation id, frame). Produce with acks=0 gets no
        response, so pass expect_response=False for it."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        header = _headers.RequestHeader(api_key, api_version, correlation_id, self.client_id)
        data = frame(_headers.encode_request(header, body))
        if expect_response:
            self._in_flight.append((correlation_id, api_key, api_version))
        return correlation_id, data

    def next_event(self) -> ResponseReceived | _Sentinel:
        payload = self._next_payload()
        if payload is None:
            return NEED_DATA
        if not self._in_flight:
            self.state = ConnectionState.ERROR
            raise CorruptFrameError("response with no request in flight")
        correlation_id, api_key, api_version = self._in_flight[0]
        try:
            header, body = _headers.decode_response(api_key, api_version, payload)
            if header.correlation_id != correlation_id:
                raise CorruptFrameError(
                    f"correlation id {header.correlation_id}, expected {correlation_id}")
        except CorruptFrameError:
            self.state = ConnectionState.ERROR
            raise
        self._in_flight.pop(0)
        return ResponseReceived(header, body, api_key, api_version)
