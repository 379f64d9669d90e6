"""Log regions leave with os.sendfile under both event loops a node can run
(``ketch.event.loop``: uvloop, the default, and asyncio's own): quorum/network.py's
``send_file_region`` over real loopback sockets. Regions far larger than the socket
buffers, so the send meets a full socket and waits for it; bytes queued in the transport before a
region leave first; a region the file no longer holds closes the connection."""
from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from typing import Any, Awaitable, Callable

import pytest
import uvloop

from clients.connection import connect
from clients.protocol import ApiKey, messages
from quorum.network import SENDFILE_MIN_BYTES, ClientInfo, FileRegion, KafkaServer, send_file_region

LOOPS: dict[str, Callable[[Awaitable[Any]], Any]] = {"asyncio": asyncio.run, "uvloop": uvloop.run}
REGION_BYTES = 4 << 20
SOCKET_BUFFER_BYTES = 64 << 10
F = messages.FetchResponse


@pytest.fixture
def log_file():
    with tempfile.TemporaryFile() as f:
        data = os.urandom(REGION_BYTES + 4096)
        f.write(data)
        f.flush()
        yield f.fileno(), data


async def _served(serve: Callable[[asyncio.StreamWriter], Awaitable[None]],
                  hang_up_after: int | None = None) -> tuple[bytes, BaseException | None]:
    """A connection whose server side runs ``serve``; everything the client received
    (to EOF, or until it hangs up after ``hang_up_after`` bytes), and what ``serve`` raised."""
    finished = asyncio.Event()
    outcome: list[BaseException | None] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Small socket buffers at both ends (no autotuning): a region of a few MiB must
        # meet a full socket many times.
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER_BYTES)
        try:
            await serve(writer)
            outcome.append(None)
        except (ConnectionError, OSError) as e:
            outcome.append(e)
        finally:
            writer.close()
            finished.set()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
        if hang_up_after is None:
            received = await reader.read()      # to EOF
        else:
            received = await reader.readexactly(hang_up_after)
        writer.close()                          # unread bytes left: the server gets a reset
        await finished.wait()
        return received, outcome[0]
    finally:
        server.close()


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_region_follows_the_bytes_queued_before_it_and_survives_a_full_socket(loop: str, log_file) -> None:
    fd, data = log_file
    prefix = b"p" * (2 << 20)
    queued: list[int] = []

    async def serve(writer: asyncio.StreamWriter) -> None:
        writer.write(prefix)
        queued.append(writer.transport.get_write_buffer_size())
        await send_file_region(writer, FileRegion(fd, 4096, REGION_BYTES, lambda: None))
        writer.write(b"suffix")
        await writer.drain()

    received, error = LOOPS[loop](_served(serve))
    assert error is None
    assert queued[0] > 0, "the prefix must still be queued in the transport when the region starts"
    assert received == prefix + data[4096:] + b"suffix"


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_region_past_the_end_of_its_file_closes_the_connection(loop: str, log_file) -> None:
    fd, data = log_file

    async def serve(writer: asyncio.StreamWriter) -> None:
        await send_file_region(writer, FileRegion(fd, 0, len(data) + 1, lambda: None))

    received, error = LOOPS[loop](_served(serve))
    assert isinstance(error, ConnectionError) and "shrank" in str(error)
    assert received == data                     # all the file had; then the close


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_client_hanging_up_mid_region_ends_the_send_with_a_connection_error(loop: str, log_file) -> None:
    fd, data = log_file

    async def serve(writer: asyncio.StreamWriter) -> None:
        await send_file_region(writer, FileRegion(fd, 0, REGION_BYTES, lambda: None))

    received, error = LOOPS[loop](_served(serve, hang_up_after=1 << 20))
    assert received == data[:1 << 20]
    assert isinstance(error, ConnectionError), error


class RegionHandler:
    """Answers every Fetch with one partition whose records are a region of the file."""

    def __init__(self, fd: int, length: int) -> None:
        self.fd = fd
        self.length = length
        self.released = 0

    def release(self) -> None:
        self.released += 1

    async def handle(self, request: Any, client: ClientInfo) -> tuple[int, Any]:
        assert request.header.api_key == ApiKey.FETCH
        region = FileRegion(self.fd, 0, self.length, self.release)
        return request.header.api_version, F(error_code=0, session_id=0, responses=[F.FetchableTopicResponse(
            topic="t", partitions=[F.PartitionData(partition_index=0, high_watermark=1, records=region)])])

    def handle_unsupported(self, request: Any) -> None:
        return None


async def _fetch_twice(handler: RegionHandler) -> list[bytes]:
    server = KafkaServer(handler, "127.0.0.1", 0)
    await server.start()
    try:
        conn = await connect("127.0.0.1", server.port)
        req = messages.FetchRequest
        body = req(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 30, isolation_level=0,
                   topics=[req.FetchTopic(topic="t", partitions=[req.FetchPartition(
                       partition=0, fetch_offset=0, partition_max_bytes=1 << 30)])])
        # Pipelined: the second response's header is queued behind the first's region.
        answers = await asyncio.gather(conn.request(ApiKey.FETCH, 11, body), conn.request(ApiKey.FETCH, 11, body))
        conn.close()
        return [bytes(a.responses[0].partitions[0].records) for a in answers]
    finally:
        await server.stop()


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_fetch_response_carries_a_log_region_and_releases_it(loop: str, log_file) -> None:
    fd, data = log_file
    assert REGION_BYTES >= SENDFILE_MIN_BYTES
    handler = RegionHandler(fd, REGION_BYTES)
    answers = LOOPS[loop](_fetch_twice(handler))
    assert answers == [data[:REGION_BYTES]] * 2
    assert handler.released == 2
