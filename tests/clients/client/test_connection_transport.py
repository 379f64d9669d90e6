"""KafkaConnection reads its transport itself (it is the transport's protocol): what the
stream's protocol did must still happen — answers reach their callers in order, writing
waits while the peer does not read (flow control), a peer's close fails what waits, and
a frame nobody asked for closes the connection instead of being dropped."""
from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator, Awaitable, Callable

import pytest

from clients.connection import ConnectionClosedError, KafkaConnection, connect
from clients.protocol import ApiKey, messages
from clients.protocol.framing import NEED_DATA, ServerConnection


@contextlib.asynccontextmanager
async def _connected_to(serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
                        ) -> AsyncIterator[KafkaConnection]:
    """A server running ``serve`` per connection, and a KafkaConnection to it."""
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    conn = await connect("127.0.0.1", server.sockets[0].getsockname()[1], client_id="t")
    try:
        yield conn
    finally:
        conn.close()
        server.close()


def _answer(conn: ServerConnection, header, code: int) -> list:
    return conn.send(header.api_key, header.api_version, header.correlation_id,
                     messages.ApiVersionsResponse(error_code=code, api_keys=[]))


def test_pipelined_answers_arrive_in_order_even_split_across_reads() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        frames = []
        while len(frames) < 3 and (data := await reader.read(65536)):
            conn.receive_data(data)
            while (event := conn.next_event()) is not NEED_DATA:
                frames.append(b"".join(_answer(conn, event.header, 100 + len(frames))))
        out = b"".join(frames)
        for i in range(len(out)):          # one byte per write: every frame split
            writer.write(out[i:i + 1])
            await writer.drain()
        await reader.read()
        writer.close()

    async def run() -> None:
        async with _connected_to(serve) as conn:
            answers = await asyncio.gather(*(conn.request(ApiKey.API_VERSIONS, 0, messages.ApiVersionsRequest())
                                             for _ in range(3)))
            assert [a.error_code for a in answers] == [100, 101, 102]
    asyncio.run(run())


def test_writing_waits_while_the_peer_does_not_read_and_goes_on_when_it_does() -> None:
    async def run() -> None:
        release = asyncio.Event()
        received = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal received
            await release.wait()
            while data := await reader.read(1 << 20):
                received += len(data)
            writer.close()

        body = messages.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[messages.ProduceRequest.TopicProduceData(
            name="t", partition_data=[messages.ProduceRequest.TopicProduceData.PartitionProduceData(
                index=0, records=b"x" * (1 << 20))])])
        async with _connected_to(serve) as conn:
            blocked = None
            for _ in range(256):        # far more than the socket buffers hold
                conn.send_without_response(ApiKey.PRODUCE, 3, body)
                drained = asyncio.ensure_future(conn.drain())
                try:
                    await asyncio.wait_for(asyncio.shield(drained), 0.2)
                except asyncio.TimeoutError:
                    blocked = drained   # nobody reads: writing waits
                    break
            assert blocked is not None, "drain never waited"
            release.set()
            await asyncio.wait_for(blocked, 10)
    asyncio.run(run())


def test_a_peer_close_fails_the_waiting_request_and_ends_the_connection() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        writer.close()

    async def run() -> None:
        async with _connected_to(serve) as conn:
            with pytest.raises(ConnectionClosedError):
                await conn.request(ApiKey.API_VERSIONS, 0, messages.ApiVersionsRequest(), timeout_s=5)
            assert conn.closed
            await asyncio.wait_for(conn.wait_closed(), 5)
            with pytest.raises(ConnectionClosedError):
                await conn.request(ApiKey.API_VERSIONS, 0, messages.ApiVersionsRequest(), timeout_s=5)
    asyncio.run(run())


def test_a_frame_nobody_asked_for_closes_the_connection() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        data = await reader.read(65536)
        conn.receive_data(data)
        event = conn.next_event()
        assert event is not NEED_DATA
        for _ in range(2):                 # the answer, then one more nobody asked for
            for part in _answer(conn, event.header, 0):
                writer.write(part)
        await reader.read()
        writer.close()

    async def run() -> None:
        async with _connected_to(serve) as conn:
            answer = await conn.request(ApiKey.API_VERSIONS, 0, messages.ApiVersionsRequest(), timeout_s=5)
            assert answer.error_code == 0
            await asyncio.wait_for(conn.wait_closed(), 5)
            assert conn.closed
    asyncio.run(run())
