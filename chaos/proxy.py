"""Fault proxies on loopback: one TCP proxy per link, able to cut, delay and drop.

Theory of operation
-------------------
Every inter-node connection of a chaos cluster (broker -> controller, follower -> leader)
is dialled through ``clients.connection.connect``, which reads ``KETCH_CONNECT_VIA`` and
dials a proxy instead of the real port. The suite gives each *directed* link (node i ->
node j) its own proxy, so a fault names exactly the link it breaks.

A ``Link`` forwards bytes between the client that dialled it and the real destination:

- ``up`` is client -> server (requests), ``down`` is server -> client (responses);
- ``cut("both"|"up"|"down")`` discards the bytes of that direction (the other one keeps
  flowing: one-way loss). A direction that lost bytes mid-stream can never be trusted
  again (the framing is broken), so it stays silent until ``heal()`` closes its
  connection, as a real partition ends in timeouts and resets; connections opened after
  the heal work normally. While both directions are cut the proxy does not even dial the
  destination.
- ``delay_ms`` holds every chunk that long before forwarding it (order is kept).
- ``drop_responses(api_keys, count)`` is Kafka-aware: requests are forwarded (the server
  serves them), and the next ``count`` responses to a request with one of ``api_keys``
  are discarded; the client connection is then closed, so the client sees "connection
  lost, outcome unknown" at once and retries, instead of waiting for its request timeout.

Frames are found by ``FrameSplitter``, a pure state machine over the Kafka framing
(int32 length, then the request header api_key/api_version/correlation_id, or the
response header correlation_id). Responses are matched to requests by correlation id.

The proxies of one process share one asyncio loop in a daemon thread (``ProxyHub``);
the scenario code, which is blocking, calls into it with ``ProxyHub.call``.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)

__all__ = ["FrameSplitter", "Link", "LinkStats", "ProxyHub", "REQUEST_HEAD_BYTES",
           "RESPONSE_HEAD_BYTES"]

REQUEST_HEAD_BYTES = 12    # int32 length, int16 api_key, int16 api_version, int32 correlation_id
RESPONSE_HEAD_BYTES = 8    # int32 length, int32 correlation_id
_READ_BYTES = 256 * 1024

_HEAD = "head"
_BODY = "body"
_END = "end"


class FrameSplitter:
    """Splits a Kafka byte stream into frames without buffering their bodies.

    ``feed(data)`` returns events in stream order: ``("head", head_bytes, frame_length)``
    once the first ``head_bytes`` bytes of a frame are known, ``("body", chunk)`` for the
    rest of it, and ``("end",)`` when the frame is complete. Concatenating the head and
    body bytes gives back the input exactly."""

    def __init__(self, head_bytes: int) -> None:
        assert head_bytes >= 4
        self.head_bytes = head_bytes
        self._head = bytearray()
        self._remaining = 0   # Invariant: > 0 only between a head and its end

    def feed(self, data: bytes) -> list[tuple]:
        out: list[tuple] = []
        i, n = 0, len(data)
        while i < n:
            if self._remaining > 0:
                take = min(self._remaining, n - i)
                out.append((_BODY, data[i:i + take]))
                self._remaining -= take
                i += take
                if self._remaining == 0:
                    out.append((_END,))
                continue
            take = min(self.head_bytes - len(self._head), n - i)
            self._head += data[i:i + take]
            i += take
            if len(self._head) == self.head_bytes:
                (length,) = struct.unpack_from(">i", self._head)
                head = bytes(self._head)
                self._head.clear()
                out.append((_HEAD, head, length))
                # A frame shorter than its header is garbage; the peer will fail on it.
                self._remaining = max(0, length + 4 - self.head_bytes)
                if self._remaining == 0:
                    out.append((_END,))
        return out


@dataclass
class LinkStats:
    connections: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    requests: int = 0
    responses_dropped: int = 0
    bytes_discarded: int = 0


@dataclass
class _DropRule:
    api_keys: frozenset[int]
    remaining: int
    close: bool


@dataclass(eq=False)
class _Conn:
    link: "Link"
    client_reader: asyncio.StreamReader
    client_writer: asyncio.StreamWriter
    server_reader: asyncio.StreamReader | None = None
    server_writer: asyncio.StreamWriter | None = None
    lost_up: bool = False      # bytes of this direction were discarded mid-stream
    lost_down: bool = False
    closed: bool = False
    pending: dict[int, int] = field(default_factory=dict)   # correlation id -> api key
    tasks: list[asyncio.Task] = field(default_factory=list)

    def lost(self, up: bool) -> bool:
        return self.lost_up if up else self.lost_down

    def set_lost(self, up: bool) -> None:
        if up:
            self.lost_up = True
        else:
            self.lost_down = True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for w in (self.client_writer, self.server_writer):
            if w is not None:
                with contextlib.suppress(Exception):
                    w.close()
        current = asyncio.current_task()
        for t in self.tasks:
            if t is not current:
                t.cancel()
        self.link.forget(self)


class Link:
    """One directed link's proxy: listens on ``listen_port`` and forwards to ``target``.
    All methods run on the hub's loop (use ``ProxyHub.call`` from other threads)."""

    def __init__(self, name: str, listen_port: int, target: tuple[str, int]) -> None:
        self.name = name
        self.listen_port = listen_port
        self.target = target
        self.cut_up = False
        self.cut_down = False
        self.delay_ms = 0
        # Only frames of these APIs are delayed (None: every byte). A connection carries
        # requests in order, so delaying one frame holds the ones behind it too.
        self.delay_api_keys: frozenset[int] | None = None
        self.stats = LinkStats()
        self._drop: _DropRule | None = None
        self._conns: set[_Conn] = set()
        self._server: asyncio.AbstractServer | None = None
        self._sock: socket.socket | None = None

    def __repr__(self) -> str:
        state = "cut both" if self.cut_up and self.cut_down else "cut up" if self.cut_up else \
            "cut down" if self.cut_down else "open"
        return f"Link({self.name} :{self.listen_port} -> {self.target[1]}, {state})"

    # ------------------------------------------------------------ control

    def cut(self, direction: str = "both") -> None:
        assert direction in ("both", "up", "down"), direction
        self.cut_up = self.cut_up or direction in ("both", "up")
        self.cut_down = self.cut_down or direction in ("both", "down")

    def heal(self) -> None:
        self.cut_up = self.cut_down = False
        for c in [c for c in self._conns if c.lost_up or c.lost_down]:
            c.close()

    def drop_responses(self, api_keys: Iterable[int], count: int, close: bool = True) -> None:
        self._drop = _DropRule(frozenset(api_keys), count, close) if count > 0 else None

    @property
    def drops_pending(self) -> int:
        return self._drop.remaining if self._drop is not None else 0

    def forget(self, conn: "_Conn") -> None:
        """A connection through this link closed."""
        self._conns.discard(conn)

    # ------------------------------------------------------------ serving

    async def start(self, sock: socket.socket | None = None) -> None:
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self.listen_port))
        sock.listen(128)
        sock.setblocking(False)
        self._sock = sock
        self.listen_port = sock.getsockname()[1]
        self._server = await asyncio.start_server(self._accept, sock=sock)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        for c in list(self._conns):
            c.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(self, reader, writer)
        self._conns.add(conn)
        self.stats.connections += 1
        if self.cut_up and self.cut_down:
            conn.lost_up = conn.lost_down = True    # never dialled: closed at heal
        else:
            try:
                conn.server_reader, conn.server_writer = await asyncio.wait_for(
                    asyncio.open_connection(*self.target), 5)
            except (OSError, asyncio.TimeoutError):
                conn.close()    # as the real destination would refuse
                return
        loop = asyncio.get_running_loop()
        conn.tasks = [loop.create_task(self._pump(conn, up=True)),
                      loop.create_task(self._pump(conn, up=False))]

    async def _pump(self, conn: _Conn, up: bool) -> None:
        reader = conn.client_reader if up else conn.server_reader
        splitter = FrameSplitter(REQUEST_HEAD_BYTES if up else RESPONSE_HEAD_BYTES)
        out: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        writer_task = loop.create_task(self._deliver(conn, out, up))
        conn.tasks.append(writer_task)
        dropping = close_after = False    # the current response frame is discarded
        frame_delayed = False             # the current frame is one of delay_api_keys
        try:
            if reader is None:      # accepted while both directions were cut
                while await conn.client_reader.read(_READ_BYTES):
                    pass
                return
            while True:
                data = await reader.read(_READ_BYTES)
                if not data:
                    break
                if (self.cut_up if up else self.cut_down) or conn.lost(up):
                    # Once bytes are lost mid-stream this direction stays silent: heal()
                    # closes the connection.
                    conn.set_lost(up)
                    self.stats.bytes_discarded += len(data)
                    continue
                chunks: list[bytes] = []
                delayed = frame_delayed
                for event in splitter.feed(data):
                    kind = event[0]
                    if kind == _HEAD:
                        dropping, close_after, api_key = self._on_head(conn, event[1], up)
                        frame_delayed = self.delay_api_keys is None or api_key in self.delay_api_keys
                        delayed = delayed or frame_delayed
                        if not dropping:
                            chunks.append(event[1])
                    elif kind == _BODY:
                        if not dropping:
                            chunks.append(event[1])
                    elif dropping:       # the end of a dropped response
                        dropping = False
                        if close_after:
                            if chunks:
                                out.put_nowait((loop.time() + self._delay_s(delayed), b"".join(chunks)))
                            # Responses before the dropped one still reach the client.
                            out.put_nowait(None)
                            with contextlib.suppress(Exception):
                                await asyncio.wait_for(asyncio.shield(writer_task), 5)
                            conn.close()
                            return
                if chunks:
                    payload = b"".join(chunks)
                    if up:
                        self.stats.bytes_up += len(payload)
                    else:
                        self.stats.bytes_down += len(payload)
                    out.put_nowait((loop.time() + self._delay_s(delayed), payload))
        except (OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            return
        # EOF from one side: let queued bytes go, then close both sides.
        out.put_nowait(None)
        with contextlib.suppress(Exception):
            await writer_task
        conn.close()

    def _delay_s(self, delayed: bool) -> float:
        return self.delay_ms / 1000 if delayed else 0.0

    def _on_head(self, conn: _Conn, head: bytes, up: bool) -> tuple[bool, bool, int | None]:
        """(drop this frame, close the client connection after it, its API key)."""
        if up:
            api_key, _, correlation_id = struct.unpack_from(">hhi", head, 4)
            conn.pending[correlation_id] = api_key
            self.stats.requests += 1
            return False, False, api_key
        (correlation_id,) = struct.unpack_from(">i", head, 4)
        api_key = conn.pending.pop(correlation_id, None)
        rule = self._drop
        if rule is not None and api_key in rule.api_keys and rule.remaining > 0:
            rule.remaining -= 1
            self.stats.responses_dropped += 1
            if rule.remaining == 0:
                self._drop = None
            return True, rule.close, api_key
        return False, False, api_key

    async def _deliver(self, conn: _Conn, out: asyncio.Queue, up: bool) -> None:
        writer = conn.server_writer if up else conn.client_writer
        loop = asyncio.get_running_loop()
        try:
            while True:
                item = await out.get()
                if item is None:
                    return
                due, payload = item
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if writer is None or conn.lost(up):
                    continue
                writer.write(payload)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            return


class ProxyHub:
    """Owns the event loop thread that runs every ``Link`` of one harness process."""

    def __init__(self) -> None:
        self.links: dict[str, Link] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="chaos-proxies", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def call(self, fn: Callable[[], Any], timeout_s: float = 30.0) -> Any:
        """Run ``fn`` (a plain function or a coroutine factory) on the proxies' loop."""
        async def run() -> Any:
            result = fn()
            if asyncio.iscoroutine(result):
                result = await result
            return result
        future: concurrent.futures.Future = asyncio.run_coroutine_threadsafe(run(), self._loop)
        return future.result(timeout_s)

    def add(self, name: str, target: tuple[str, int], listen_port: int = 0,
            sock: socket.socket | None = None) -> Link:
        """A new proxy to ``target``; port 0 (and no ``sock``) picks a free one."""
        assert name not in self.links, name
        link = Link(name, listen_port, target)
        self.call(lambda: link.start(sock))
        self.links[name] = link
        return link

    def cut(self, name: str, direction: str = "both") -> None:
        link = self.links[name]
        self.call(lambda: link.cut(direction))

    def heal(self, name: str | None = None) -> None:
        names = [name] if name is not None else list(self.links)
        self.call(lambda: [self.links[n].heal() for n in names])

    def set_delay(self, name: str, delay_ms: int, api_keys: Iterable[int] | None = None) -> None:
        """Delay the link's bytes (only the frames of ``api_keys``, when given)."""
        link = self.links[name]
        keys = None if api_keys is None else frozenset(api_keys)

        def apply() -> None:
            link.delay_ms = delay_ms
            link.delay_api_keys = keys
        self.call(apply)

    def drop_responses(self, name: str, api_keys: Iterable[int], count: int, close: bool = True) -> None:
        link = self.links[name]
        keys = list(api_keys)
        self.call(lambda: link.drop_responses(keys, count, close))

    def stats(self, name: str) -> LinkStats:
        link = self.links[name]
        return self.call(lambda: LinkStats(**vars(link.stats)))

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        async def shutdown() -> None:
            await asyncio.gather(*(link.stop() for link in self.links.values()), return_exceptions=True)
            # Anything else on this loop (test servers, pumps) ends here too.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            self.call(shutdown, timeout_s=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> "ProxyHub":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
