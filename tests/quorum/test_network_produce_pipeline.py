"""The network layer's Produce pipelining (quorum/network.py, issue 22) over a real socket:
a Produce that says it only waits lets the connection's next Produce start, responses
still leave in request order, and any other request waits for all of them."""
from __future__ import annotations

import asyncio
from typing import Any

from clients.connection import connect
from clients.protocol import ApiKey, messages
from quorum.network import ClientInfo, KafkaServer

PRODUCE_VERSION = 9


class Handler:
    """Produce: logs its start, lets the next request go when ``pipelines``, then waits
    for its gate (named by the request's topic); Metadata: logged and answered."""

    def __init__(self, pipelines: bool) -> None:
        self.pipelines = pipelines
        self.log: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.changed = asyncio.Event()

    def _note(self, entry: str) -> None:
        self.log.append(entry)
        self.changed.set()

    async def until(self, entry: str) -> None:
        while entry not in self.log:
            self.changed.clear()
            await self.changed.wait()

    async def handle(self, request: Any, client: ClientInfo) -> tuple[int, Any]:
        header = request.header
        if header.api_key == ApiKey.PRODUCE:
            name = request.body.topic_data[0].name
            self._note(f"start {name}")
            if self.pipelines:
                client.allow_next_request()
            await self.gates.setdefault(name, asyncio.Event()).wait()
            self._note(f"done {name}")
            cls = messages.ProduceResponse
            return header.api_version, cls(responses=[cls.TopicProduceResponse(name=name, partition_responses=[])])
        if header.api_key == ApiKey.API_VERSIONS:
            cls = messages.ApiVersionsResponse
            return 0, cls(error_code=0, api_keys=[
                cls.ApiVersion(api_key=ApiKey.PRODUCE, min_version=0, max_version=PRODUCE_VERSION),
                cls.ApiVersion(api_key=ApiKey.METADATA, min_version=0, max_version=12)])
        self._note("metadata")
        return header.api_version, messages.MetadataResponse(brokers=[], topics=[])

    def handle_unsupported(self, request: Any) -> None:
        return None

    def release(self, name: str) -> None:
        self.gates.setdefault(name, asyncio.Event()).set()


def produce(name: str) -> messages.ProduceRequest:
    cls = messages.ProduceRequest
    return cls(acks=-1, timeout_ms=30_000, topic_data=[cls.TopicProduceData(name=name, partition_data=[])])


async def _pipeline(pipelines: bool) -> tuple[list[str], list[str]]:
    """Produce a, Produce b, Metadata on one connection; b's gate opens before a's.
    The handler's log, and the topic each response names (in response order)."""
    handler = Handler(pipelines)
    server = KafkaServer(handler, "127.0.0.1", 0)
    await server.start()
    try:
        conn = await connect("127.0.0.1", server.port)
        first = asyncio.ensure_future(conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce("a")))
        second = asyncio.ensure_future(conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce("b")))
        metadata = asyncio.ensure_future(conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[])))
        await handler.until("start a")
        if pipelines:
            await handler.until("start b")          # while a still waits
            handler.release("b")
            await handler.until("done b")
            assert not first.done() and not second.done(), "b's answer waits for a's"
            for _ in range(20):                     # let the server run: Metadata must wait
                await asyncio.sleep(0)
            assert "metadata" not in handler.log and not second.done()
        else:
            handler.release("b")
        handler.release("a")
        answers = await asyncio.gather(first, second)
        await metadata
        conn.close()
        return handler.log, [a.responses[0].name for a in answers]
    finally:
        await server.stop()


def test_a_waiting_produce_lets_the_next_produce_start_and_answers_stay_in_order() -> None:
    log, names = asyncio.run(_pipeline(pipelines=True))
    assert log == ["start a", "start b", "done b", "done a", "metadata"]
    assert names == ["a", "b"]


def test_without_the_handlers_word_a_connection_serves_one_produce_at_a_time() -> None:
    log, names = asyncio.run(_pipeline(pipelines=False))
    assert log == ["start a", "done a", "start b", "done b", "metadata"]
    assert names == ["a", "b"]


async def _cancel_then_time_out() -> tuple[Any, bool, bool]:
    """On one connection: a Produce whose caller is cancelled, then Metadata (answered
    after the Produce), then a Produce that outlives its timeout."""
    handler = Handler(pipelines=False)
    server = KafkaServer(handler, "127.0.0.1", 0)
    await server.start()
    try:
        conn = await connect("127.0.0.1", server.port)
        first = asyncio.ensure_future(conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce("a")))
        await handler.until("start a")
        first.cancel()
        metadata = asyncio.ensure_future(conn.request(ApiKey.METADATA, 12, messages.MetadataRequest(topics=[])))
        handler.release("a")
        answer = await metadata         # its own answer, not the cancelled Produce's
        open_before = not conn.closed
        try:
            await conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce("never"), timeout_s=0.05)
        except asyncio.TimeoutError:
            timed_out = True
        else:
            timed_out = False
        closed_after = conn.closed      # its answer may still come: the order is lost
        return answer, open_before and timed_out, closed_after
    finally:
        await server.stop()


def test_a_cancelled_request_leaves_the_next_its_own_answer_and_a_timeout_closes() -> None:
    answer, timed_out, closed = asyncio.run(_cancel_then_time_out())
    assert isinstance(answer, messages.MetadataResponse)
    assert timed_out and closed


class SyncHandler(Handler):
    """Produce to a topic named ``sync-*`` is answered without suspending (as acks=1 is),
    ``boom`` raises in its first step, any other waits for its gate as in ``Handler``."""

    async def handle(self, request: Any, client: ClientInfo) -> tuple[int, Any]:
        header = request.header
        if header.api_key == ApiKey.PRODUCE:
            name = request.body.topic_data[0].name
            if name == "boom":
                self._note("boom")
                raise RuntimeError("a handler bug")
            if name.startswith("sync"):
                self._note(f"answered {name}")
                cls = messages.ProduceResponse
                return header.api_version, cls(responses=[cls.TopicProduceResponse(
                    name=name, partition_responses=[])])
        return await super().handle(request, client)


async def _sync_behind_waiting() -> tuple[list[str], list[str], bool]:
    """sync-1 (nothing before it), a (waits), sync-2 (answered at once, behind a), then
    boom: the three answers in request order, then the connection closed."""
    handler = SyncHandler(pipelines=True)
    server = KafkaServer(handler, "127.0.0.1", 0)
    await server.start()
    try:
        conn = await connect("127.0.0.1", server.port)
        lone = await conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce("sync-1"))
        first = asyncio.ensure_future(conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce("a")))
        second = asyncio.ensure_future(conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce("sync-2")))
        failing = asyncio.ensure_future(conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce("boom")))
        await handler.until("boom")
        for _ in range(20):
            await asyncio.sleep(0)
        assert not second.done(), "sync-2's answer waits for a's"
        handler.release("a")
        answers = await asyncio.gather(first, second)
        try:
            await failing
            closed = False
        except (ConnectionError, asyncio.IncompleteReadError, EOFError, OSError):
            closed = True
        return handler.log, [lone.responses[0].name] + [a.responses[0].name for a in answers], closed
    finally:
        await server.stop()


def test_answers_given_without_suspending_keep_request_order_and_a_failing_one_closes_after_them() -> None:
    log, names, closed = asyncio.run(_sync_behind_waiting())
    assert log == ["answered sync-1", "start a", "answered sync-2", "boom", "done a"]
    assert names == ["sync-1", "a", "sync-2"]
    assert closed
