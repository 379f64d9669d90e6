"""The asyncio Kafka-protocol listener: socket bytes <-> ServerConnection <-> API handlers.

Shared by controllers and brokers; what each serves is its ``ApiHandler``. It lives in
``quorum`` because KRaft brokers are the quorum's observers and already depend on it (as
Kafka's broker depends on its raft module); ``broker`` may import this module and nothing
else from ``quorum`` (tests/test_layering.py).

Each connection is served one request at a time, in arrival order, as Kafka's network
layer does (it mutes a channel until the response to its current request is sent): that
keeps responses in request order with no bookkeeping, while clients still pipeline
requests into the socket. Produce with acks=0 gets no response.

A malformed frame (CorruptFrameError) closes that connection only. A request whose API
key or version Ketch does not know is answered where Kafka answers it (ApiVersions: error
35 and a v0 body listing what is supported, KIP-511) and otherwise closes the connection.

Responses whose ``records`` are log file regions go out with ``os.sendfile`` through
``loop.sendfile`` (zero-copy) on plain TCP; other parts with ``transport.write``.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any, Callable, Protocol

from clients.protocol import (
    NEED_DATA, CorruptFrameError, RequestReceived, ServerConnection, UnsupportedRequest,
)
from clients.protocol.acls import ANONYMOUS, KafkaPrincipal

log = logging.getLogger(__name__)

__all__ = ["ApiHandler", "FileRegion", "KafkaServer"]

READ_CHUNK_BYTES = 256 * 1024
# Below this, a log region is read into the response buffer rather than sent with
# sendfile: asyncio's sendfile flushes the transport and registers the socket with the
# selector each time, which costs more than copying a small batch (most follower and
# consumer fetches at the tail of a log carry a few KB).
SENDFILE_MIN_BYTES = 64 * 1024


class ApiHandler(Protocol):
    async def handle(self, request: RequestReceived, client: "ClientInfo") -> tuple[int, Any] | None:
        """(response api version, response body), or None for no response (acks=0)."""

    def handle_unsupported(self, request: UnsupportedRequest) -> tuple[int, Any] | None:
        """A response for an unknown version (ApiVersions), or None to close."""


class ClientInfo:
    __slots__ = ("host", "port", "connection_id", "client_id", "client_software_name",
                 "client_software_version", "principal")

    def __init__(self, host: str, port: int, connection_id: int) -> None:
        self.host = host
        self.port = port
        self.connection_id = connection_id
        self.client_id: str | None = None   # of the request being handled
        # What the client said in ApiVersions v3+ (KIP-511); None until then.
        self.client_software_name: str | None = None
        self.client_software_version: str | None = None
        # Who the listener authenticated (issue 16); ANONYMOUS on a plaintext listener.
        self.principal: KafkaPrincipal = ANONYMOUS


class FileRegion:
    """A byte range of a log file whose descriptor the log has pinned for this response;
    sent with os.sendfile, then ``release()``d. Pinning at read time means a later
    compaction swap or deletion cannot change what is sent (the pinned descriptor keeps
    reading the old file); a truncation in place that makes the send come up short closes
    the connection, and the client fetches again."""
    __slots__ = ("fd", "position", "length", "release")

    def __init__(self, fd: int, position: int, length: int, release: Any) -> None:
        self.fd = fd
        self.position = position
        self.length = length
        self.release = release

    def __len__(self) -> int:
        return self.length


class _FdFile:
    """The minimal file object loop.sendfile needs around a pinned descriptor."""
    mode = "rb"

    def __init__(self, fd: int, position: int) -> None:
        self._fd = fd
        self._pos = position

    def fileno(self) -> int:
        return self._fd

    def seek(self, pos: int, whence: int = 0) -> int:
        assert whence == 0
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buf: bytearray | memoryview) -> int:
        n = os.preadv(self._fd, [buf], self._pos)
        self._pos += n
        return n


class KafkaServer:
    def __init__(self, handler: ApiHandler, host: str, port: int,
                 frame_bytes_max: int = 100 * 1024 * 1024, use_sendfile: bool = True,
                 on_connection_closed: Callable[[ClientInfo], None] | None = None) -> None:
        self.handler = handler
        # Told when a client's connection ends, however it ended (the controller fences a
        # broker whose heartbeat connection closed: its process died).
        self.on_connection_closed = on_connection_closed
        self.host = host
        self.port = port
        self.frame_bytes_max = frame_bytes_max
        self.use_sendfile = use_sendfile
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._next_connection_id = 0
        self.connections_closed_for_protocol_errors = 0

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                  reuse_address=True, limit=READ_CHUNK_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername") or ("?", 0)
        self._next_connection_id += 1
        client = ClientInfo(peer[0], peer[1], self._next_connection_id)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        conn = ServerConnection(frame_bytes_max=self.frame_bytes_max)
        try:
            while True:
                data = await reader.read(READ_CHUNK_BYTES)
                if not data:
                    return
                conn.receive_data(data)
                while (event := conn.next_event()) is not NEED_DATA:
                    if isinstance(event, UnsupportedRequest):
                        answer = self.handler.handle_unsupported(event)
                        if answer is None:
                            log.info("closing %s:%s: unsupported API %s v%s", client.host,
                                     client.port, event.api_key, event.api_version)
                            return
                        api_key, correlation_id = event.api_key, event.correlation_id
                    else:
                        client.client_id = event.header.client_id
                        answer = await self.handler.handle(event, client)
                        if answer is None:
                            continue
                        api_key, correlation_id = event.header.api_key, event.header.correlation_id
                    version, body = answer
                    await self._write(writer, conn.send(api_key, version, correlation_id, body))
                    throttle_ms = getattr(body, "throttle_time_ms", 0)
                    if throttle_ms > 0:
                        # KIP-219: the response went out at once; the connection reads
                        # nothing more until the throttle time has passed.
                        await asyncio.sleep(throttle_ms / 1000)
        except CorruptFrameError as e:
            self.connections_closed_for_protocol_errors += 1
            log.warning("closing %s:%s: %s", client.host, client.port, e)
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            # A bug in a handler: close this connection, keep the broker serving others.
            log.exception("internal error serving %s:%s; closing the connection", client.host, client.port)
        finally:
            self._connections.discard(task)
            writer.close()
            if self.on_connection_closed is not None:
                self.on_connection_closed(client)

    async def _write(self, writer: asyncio.StreamWriter, parts: list[Any]) -> None:
        """One response: its bytes gathered into as few socket writes as possible (a
        write is a send() syscall), log regions below SENDFILE_MIN_BYTES read into the
        same buffer, larger ones sent with sendfile (zero copy)."""
        loop = asyncio.get_running_loop()
        pending: list[Any] = []
        try:
            for part in parts:
                if isinstance(part, (bytes, bytearray, memoryview)):
                    pending.append(part)
                    continue
                assert isinstance(part, FileRegion), type(part)
                if part.length == 0:
                    continue
                if not self.use_sendfile or part.length < SENDFILE_MIN_BYTES:
                    data = os.pread(part.fd, part.length, part.position)
                    if len(data) != part.length:
                        raise ConnectionError("log file shrank under a response: closing")
                    pending.append(data)
                    continue
                if pending:
                    writer.write(b"".join(pending))
                    pending = []
                await writer.drain()
                sent = await loop.sendfile(writer.transport, _FdFile(part.fd, part.position),
                                           part.position, part.length)
                if sent != part.length:
                    raise ConnectionError("log file shrank under a response: closing")
            if pending:
                writer.write(pending[0] if len(pending) == 1 else b"".join(pending))
            await writer.drain()
        finally:
            for part in parts:
                if isinstance(part, FileRegion):
                    part.release()
