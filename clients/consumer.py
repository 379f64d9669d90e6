"""The blocking consumer: ``clients.aio.Consumer`` on the shared client loop thread.

    from clients import Consumer
    with Consumer({"bootstrap.servers": "...", "group.id": "g"}) as consumer:
        consumer.subscribe(["orders"])
        for record in consumer:            # or: consumer.poll(timeout_ms=1000)
            ...

Every call hands a coroutine to the loop thread (``clients._blocking.LoopThread``) and waits
for it. Rebalance listener methods run in *the caller's thread*, inside ``poll()`` (and
``close()`` / ``unsubscribe()``), as in the Java client, so a listener may call this
consumer's blocking methods, ``commit()`` included: while a listener runs, the loop thread
waits for it without being blocked. Listener methods receive this blocking consumer.
``commit_async`` callbacks run on the loop thread and must not block.
"""
from __future__ import annotations

import asyncio
import queue
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable

from clients._blocking import LoopThread
from clients.aio.consumer import Consumer as AioConsumer
from clients.aio.consumer import ConsumerRebalanceListener
from clients.errors import ClientClosedError
from clients.types import (
    ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition,
)

__all__ = ["Consumer", "ConsumerRebalanceListener"]


class _CallerThreadListener:
    """The aio consumer's listener: each call is handed to the thread waiting in a
    blocking call, which runs the user's listener and reports back."""

    def __init__(self, owner: "Consumer", user: Any, calls: "queue.Queue[tuple | None]") -> None:
        self.owner, self.user, self.calls = owner, user, calls

    async def _call(self, name: str, partitions: set[TopicPartition]) -> None:
        fn = getattr(self.user, name, None)
        if fn is None:
            return
        done = asyncio.get_running_loop().create_future()
        self.calls.put((fn, (self.owner, partitions), done))
        await done

    async def on_partitions_revoked(self, _consumer: Any, partitions: set[TopicPartition]) -> None:
        await self._call("on_partitions_revoked", partitions)

    async def on_partitions_assigned(self, _consumer: Any, partitions: set[TopicPartition]) -> None:
        await self._call("on_partitions_assigned", partitions)

    async def on_partitions_lost(self, _consumer: Any, partitions: set[TopicPartition]) -> None:
        # Kafka's default on_partitions_lost treats them as revoked
        name = "on_partitions_lost" if hasattr(self.user, "on_partitions_lost") else "on_partitions_revoked"
        await self._call(name, partitions)


class Consumer:
    def __init__(self, config: Mapping[str, Any] | None = None, **props: Any) -> None:
        self._loop = LoopThread.shared()
        self._aio = AioConsumer(config, **props)
        self._calls: "queue.Queue[tuple]" = queue.Queue()
        self._closed = False
        self._run_with_listeners(self._aio.start())

    # -- the bridge ---------------------------------------------------------

    def _run(self, coro: Any, timeout_s: float | None = None) -> Any:
        return self._loop.run(coro, timeout_s)

    def _do(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A plain method of the aio consumer, run on the loop thread (its state lives there)."""
        async def call() -> Any:
            return fn(*args)
        return self._loop.run(call())

    def _wake_caller(self, _future: Any) -> None:
        """On the loop thread: the caller may go on. Give up the GIL at once, or the caller
        waits for the interpreter's switch interval (5 ms) while the loop decodes the
        next prefetched fetch response: that wait, per poll, was most of the facade's cost."""
        self._calls.put(None)
        time.sleep(0)

    def _run_with_listeners(self, coro: Any) -> Any:
        """Run ``coro`` on the loop; meanwhile run listener calls it hands over, here."""
        future = self._loop.submit(coro)
        future.add_done_callback(self._wake_caller)
        while True:
            item = self._calls.get()
            if item is None:
                if future.done():
                    return future.result()
                continue
            fn, args, done = item
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 -- handed to the waiting coroutine
                self._loop.call_soon(lambda e=e: done.done() or done.set_exception(e))
            else:
                self._loop.call_soon(lambda: done.done() or done.set_result(None))

    # -- subscriptions --------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str | re.Pattern, listener: Any = None) -> None:
        wrapped = _CallerThreadListener(self, listener, self._calls) if listener is not None else None
        self._do(self._aio.subscribe, topics, wrapped)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._do(self._aio.assign, list(partitions))

    def unsubscribe(self) -> None:
        self._run_with_listeners(self._aio.unsubscribe())

    def assignment(self) -> set[TopicPartition]:
        return self._do(self._aio.assignment)

    def subscription(self) -> set[str]:
        return self._do(self._aio.subscription)

    @property
    def member_id(self) -> str | None:
        return self._aio.member_id

    @property
    def generation_id(self) -> int:
        return self._aio.generation_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For ``Producer.send_offsets_to_transaction`` (KIP-447)."""
        return self._aio.group_metadata()

    # -- records ---------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        self._check_open()
        return self._run_with_listeners(self._aio.poll(timeout_ms, max_records))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self._closed:
            yield from self.poll(timeout_ms=1000)

    # -- positions --------------------------------------------------------------

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        return self._run(self._aio.position(tp, timeout_ms))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._do(self._aio.seek, tp, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._do(self._aio.seek_to_beginning, None if partitions is None else list(partitions))

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._do(self._aio.seek_to_end, None if partitions is None else list(partitions))

    def set_tag_filter(self, topic: str, tags: Iterable[str] | None) -> None:
        """See ``clients.aio.Consumer.set_tag_filter``."""
        self._do(self._aio.set_tag_filter, topic, None if tags is None else list(tags))

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self._do(self._aio.pause, list(partitions))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._do(self._aio.resume, list(partitions))

    def paused(self) -> set[TopicPartition]:
        return self._do(self._aio.paused)

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int],
                          timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._aio.offsets_for_times(dict(timestamps), timeout_ms))

    def beginning_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None) -> dict:
        return self._run(self._aio.beginning_offsets(list(partitions), timeout_ms))

    def end_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None) -> dict:
        return self._run(self._aio.end_offsets(list(partitions), timeout_ms))

    # -- commits -------------------------------------------------------------------

    def committed(self, partitions: Iterable[TopicPartition],
                  timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._run(self._aio.committed(list(partitions), timeout_ms))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
               timeout_ms: int | None = None) -> None:
        self._run(self._aio.commit(None if offsets is None else dict(offsets), timeout_ms))

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[dict, BaseException | None], Any] | None = None) -> None:
        self._do(self._aio.commit_async, None if offsets is None else dict(offsets), callback)

    # -- lifecycle ---------------------------------------------------------------

    def close(self, timeout_ms: int | None = None) -> None:
        """Final commit (with auto-commit on), revocation, LeaveGroup, connections closed."""
        if self._closed:
            return
        self._closed = True
        self._run_with_listeners(self._aio.close(timeout_ms))

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")
