"""KafkaConnection: a request that times out closes the connection, unless the caller
keeps it (the broker's heartbeat channel: its close reads as a dead broker); the late
answer is then skipped and the next request gets its own."""
from __future__ import annotations

import asyncio

import pytest

from clients.connection import connect
from clients.protocol import ApiKey, messages
from clients.protocol.framing import NEED_DATA, ServerConnection


async def slow_first_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request in order; the first after 0.3 s. Each answer names its
    request by the error code: 100 + its position."""
    conn = ServerConnection()
    served = 0
    try:
        while data := await reader.read(65536):
            conn.receive_data(data)
            while (event := conn.next_event()) is not NEED_DATA:
                h = event.header
                if served == 0:
                    await asyncio.sleep(0.3)
                body = messages.ApiVersionsResponse(error_code=100 + served, api_keys=[])
                served += 1
                for part in conn.send(h.api_key, h.api_version, h.correlation_id, body):
                    writer.write(part)
                await writer.drain()
    finally:
        writer.close()


@pytest.mark.parametrize("close_on_timeout", [True, False])
def test_a_timed_out_request_closes_the_connection_unless_kept(close_on_timeout: bool) -> None:
    async def run() -> None:
        server = await asyncio.start_server(slow_first_answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = await connect("127.0.0.1", port, client_id="t")
        body = messages.ApiVersionsRequest()
        try:
            with pytest.raises(asyncio.TimeoutError):
                await conn.request(ApiKey.API_VERSIONS, 0, body, timeout_s=0.05,
                                   close_on_timeout=close_on_timeout)
            assert conn.closed is close_on_timeout
            if not close_on_timeout:
                second = await conn.request(ApiKey.API_VERSIONS, 0, body, timeout_s=5)
                assert second.error_code == 101     # not the first request's late answer
        finally:
            conn.close()
            server.close()
            await server.wait_closed()
    asyncio.run(run())
