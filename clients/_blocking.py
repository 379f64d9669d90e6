"""LoopThread: one asyncio event loop in a daemon thread, shared by the blocking facades.

`clients.Producer`, `clients.Consumer` and `clients.Admin` are thin wrappers over the
asyncio clients in `clients.aio`. Each blocking call hands a coroutine to this loop with
`run(coro, timeout_s)` and waits for its result in the caller's thread, so scripts and
Spark executors get the asyncio core's batching and pipelining without an event loop of
their own. All facades of a process share one loop (`LoopThread.shared()`), so a hundred
producers cost one thread, as librdkafka's clients each cost a few.

Rules: never call `run` from the loop thread itself (it would wait on itself; an assertion
says so); a timed-out `run` cancels the coroutine and raises KafkaTimeoutError.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Coroutine
from typing import Any, Callable, TypeVar

from clients.errors import KafkaTimeoutError

__all__ = ["LoopThread", "wait_until"]

T = TypeVar("T")


def wait_until(condition: threading.Condition, ready: Callable[[], bool],
               deadline: float | None = None,
               timed_out: Callable[[], BaseException] | None = None) -> None:
    """Wait on ``condition`` (its lock held) until ``ready()``; with a ``time.monotonic()``
    deadline, raise ``timed_out()`` there. In slices of at most 50 ms, which bound the cost
    of a notification missed (one sent before the waiter looked, or never sent at close)."""
    while not ready():
        if deadline is None:
            condition.wait(0.05)
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise timed_out() if timed_out is not None else TimeoutError()
        condition.wait(min(remaining, 0.05))


class LoopThread:
    _shared: "LoopThread | None" = None
    _shared_lock = threading.Lock()

    def __init__(self, name: str = "ketch-client-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        self._started.wait()

    @classmethod
    def shared(cls) -> "LoopThread":
        """The process's one client loop, started on first use."""
        with cls._shared_lock:
            if cls._shared is None or not cls._shared.thread.is_alive():
                cls._shared = cls()
            return cls._shared

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self.thread.ident

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coro` on the loop; a concurrent future of its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run `coro` on the loop and wait for it here, at most `timeout_s` seconds."""
        assert not self.in_loop_thread(), "LoopThread.run called from its own loop thread"
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            if future.done() and not future.cancelled():
                # The coroutine itself raised a TimeoutError (KafkaTimeoutError is one, and
                # since 3.11 concurrent.futures.TimeoutError is the builtin), or finished
                # just now: its own outcome, not ours.
                return future.result()
            future.cancel()
            raise KafkaTimeoutError(f"no result within {timeout_s} s") from None

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a plain function on the loop (thread-safe, returns at once)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        """Stop a private loop (the shared one lives as long as the process)."""
        assert self is not LoopThread._shared, "the shared loop is never stopped"
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()
