"""The fault proxy on loopback: pass-through, cuts (both ways, one way), delay, and
dropping a Kafka response after the server has served the request."""
from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from hypothesis import given, strategies as st

from chaos.proxy import REQUEST_HEAD_BYTES, FrameSplitter, ProxyHub
from clients.protocol import NEED_DATA, ApiKey, ClientConnection, ServerConnection, messages


# ---------------------------------------------------------------- the pure splitter


@given(payloads=st.lists(st.binary(min_size=8, max_size=40), min_size=1, max_size=6),
       cuts=st.lists(st.integers(min_value=1, max_value=30), max_size=20))
def test_frame_splitter_finds_every_frame_under_any_chunking(payloads, cuts) -> None:
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    splitter = FrameSplitter(REQUEST_HEAD_BYTES)
    events = []
    pos = 0
    for size in cuts + [len(stream)]:
        events += splitter.feed(stream[pos:pos + size])
        pos += size
    assert b"".join(e[1] for e in events if e[0] in ("head", "body")) == stream
    heads = [e for e in events if e[0] == "head"]
    assert [h[2] for h in heads] == [len(p) for p in payloads]
    assert [h[1][4:] for h in heads] == [p[:REQUEST_HEAD_BYTES - 4] for p in payloads]
    assert sum(1 for e in events if e[0] == "end") == len(payloads)
    # Every frame's events are head, body..., end, in order.
    kinds = "".join(e[0][0] for e in events)
    assert kinds.replace("b", "") == "he" * len(payloads)


# ---------------------------------------------------------------- live proxies


class Recorder:
    """A loopback server that records what it receives; ``echo`` sends it back."""

    def __init__(self, hub: ProxyHub, echo: bool = True) -> None:
        self.received = bytearray()
        self.echo = echo
        self.server = hub.call(lambda: asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                self.received += data
                if self.echo:
                    writer.write(data)
                    await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()


class FakeBroker:
    """Answers every request with a well-formed response and counts what it served."""

    def __init__(self, hub: ProxyHub) -> None:
        self.served: list[int] = []
        self.server = hub.call(lambda: asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        try:
            while data := await reader.read(65536):
                conn.receive_data(data)
                while (event := conn.next_event()) is not NEED_DATA:
                    h = event.header
                    self.served.append(h.api_key)
                    if h.api_key == ApiKey.PRODUCE:
                        body = messages.ProduceResponse(responses=[])
                    else:
                        body = messages.ApiVersionsResponse(error_code=0, api_keys=[])
                    for part in conn.send(h.api_key, h.api_version, h.correlation_id, body):
                        writer.write(part)
                    await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()


@pytest.fixture
def hub():
    h = ProxyHub()
    try:
        yield h
    finally:
        h.close()


def kframe(text: bytes) -> bytes:
    """A Kafka-shaped frame (the proxy reads frame heads, so tests speak in frames)."""
    payload = text.ljust(8, b".")
    return struct.pack(">i", len(payload)) + payload


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def _silent(s: socket.socket, for_s: float = 0.3) -> bool:
    """Nothing arrives (and the connection is not closed) within ``for_s``."""
    s.settimeout(for_s)
    try:
        s.recv(1)
    except socket.timeout:
        return True
    finally:
        s.settimeout(5)
    return False


def _wait(probe, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return True
        time.sleep(0.02)
    return probe()


def test_bytes_pass_through_both_ways(hub) -> None:
    server = Recorder(hub)
    link = hub.add("a->b", ("127.0.0.1", server.port))
    with _connect(link.listen_port) as s:
        payload = b"".join(kframe(bytes([i % 256]) * i) for i in range(1, 400))
        s.sendall(payload)
        assert _recv_exactly(s, len(payload)) == payload
    assert bytes(server.received) == payload
    assert hub.stats("a->b").connections == 1


def test_cut_both_ways_silences_the_link_and_heal_restores_new_connections(hub) -> None:
    server = Recorder(hub)
    link = hub.add("a->b", ("127.0.0.1", server.port))
    old = _connect(link.listen_port)
    old.sendall(kframe(b"before"))
    assert _recv_exactly(old, 12) == kframe(b"before")
    hub.cut("a->b")
    old.sendall(kframe(b"during"))
    fresh = _connect(link.listen_port)       # accepted, but leads nowhere
    fresh.sendall(kframe(b"fresh"))
    assert _silent(old) and _silent(fresh)
    assert bytes(server.received) == kframe(b"before")
    hub.heal()
    # Connections that lost bytes are closed at the heal; new ones work.
    assert old.recv(10) == b"" and fresh.recv(10) == b""
    with _connect(link.listen_port) as s:
        s.sendall(kframe(b"after"))
        assert _recv_exactly(s, 12) == kframe(b"after")
    assert bytes(server.received) == kframe(b"before") + kframe(b"after")
    old.close()
    fresh.close()


def test_one_way_cuts(hub) -> None:
    server = Recorder(hub)
    link = hub.add("a->b", ("127.0.0.1", server.port))
    hub.cut("a->b", "down")             # requests arrive, answers are lost
    with _connect(link.listen_port) as s:
        s.sendall(kframe(b"ping"))
        assert _wait(lambda: bytes(server.received) == kframe(b"ping"))
        assert _silent(s)
    hub.heal()
    server.received.clear()
    hub.cut("a->b", "up")               # requests are lost: the server sees nothing
    with _connect(link.listen_port) as s:
        s.sendall(kframe(b"lost"))
        assert _silent(s)
    assert bytes(server.received) == b""
    hub.heal()


def test_delay_holds_bytes_and_keeps_their_order(hub) -> None:
    server = Recorder(hub)
    link = hub.add("a->b", ("127.0.0.1", server.port))
    hub.set_delay("a->b", 1500)
    with _connect(link.listen_port) as s:
        sent = b"".join(kframe(b"%d" % i) for i in range(5))
        for i in range(5):
            s.sendall(kframe(b"%d" % i))
        assert _silent(s, 0.3)
        s.settimeout(30)
        assert _recv_exactly(s, len(sent)) == sent


def _request(s: socket.socket, conn: ClientConnection, api_key: int, body) -> object:
    _, data = conn.send(api_key, 3 if api_key == ApiKey.PRODUCE else 0, body)
    s.sendall(data)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        conn.receive_data(chunk)
        event = conn.next_event()
        if event is not NEED_DATA:
            return event.body


def test_drop_responses_serves_the_request_but_loses_its_answer(hub) -> None:
    broker = FakeBroker(hub)
    link = hub.add("client->broker", ("127.0.0.1", broker.port))
    hub.drop_responses("client->broker", [ApiKey.PRODUCE], count=1)
    produce = messages.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[])
    with _connect(link.listen_port) as s:
        conn = ClientConnection()
        # Other APIs are untouched.
        assert _request(s, conn, ApiKey.API_VERSIONS, messages.ApiVersionsRequest()).error_code == 0
        with pytest.raises(ConnectionError):
            _request(s, conn, ApiKey.PRODUCE, produce)
    assert broker.served == [ApiKey.API_VERSIONS, ApiKey.PRODUCE]   # it was served
    assert hub.stats("client->broker").responses_dropped == 1
    with _connect(link.listen_port) as s:        # the budget is spent: the retry gets through
        assert _request(s, ClientConnection(), ApiKey.PRODUCE, produce).responses == []
    assert broker.served == [ApiKey.API_VERSIONS, ApiKey.PRODUCE, ApiKey.PRODUCE]
