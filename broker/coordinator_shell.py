"""What the group and transaction coordinators' asyncio shells share.

Both coordinators are a pure core fed requests and timer ticks, whose state lives in a
compacted internal topic (``__consumer_offsets``, ``__transaction_state``); their shells
differ in what else they do (markers, producer ids, verification), not in this:

- a request becomes a core input under a fresh token, and the core's ``Completion`` for
  that token resolves it, now or later (``call`` / ``complete``);
- the core's appends go to ``<topic>-<partition>`` through the replica manager with acks=all,
  and their outcomes are reported back in append order per partition, which the cores
  require (a success is never reported before an earlier append's);
- a timer calls the core's ``poll`` when its next deadline is due, or sooner when
  anything was carried out (``poll_forever`` / ``wake``);
- a partition this broker comes to lead is loaded by replaying its log from the log start
  to the log end offset (``replay_log``).

Kafka's ``CoordinatorRuntime`` plays this part for its new group coordinator.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Callable, Hashable

from broker.replica_driver import ReplicaDriver
from clients.protocol.errors import ErrorCode
from clients.records import RecordError
from clients.types import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["CoordinatorShell"]

REPLAY_READ_BYTES = 8 * 1024 * 1024


class CoordinatorShell:
    def __init__(self, topic: str, replicas: ReplicaDriver, request_timeout_ms: int,
                 coordinator_appends: bool = False) -> None:
        """``coordinator_appends``: appends are the coordinator's own batches (no client
        sequence checks; ReplicaManager.append's ``from_coordinator``)."""
        self.topic = topic
        self.replicas = replicas
        self.request_timeout_ms = request_timeout_ms
        self.coordinator_appends = coordinator_appends
        self.stopped = False
        self._tokens = itertools.count(1)
        self._waiting: dict[Hashable, asyncio.Future] = {}
        self._append_chains: dict[int, asyncio.Future] = {}
        self._wakeup = asyncio.Event()

    # ------------------------------------------------------------ requests

    async def call(self, submit: Callable[[Hashable], None]) -> Any:
        """``submit(token)`` hands the request to the core and carries out its effects;
        the response is what the core's Completion for ``token`` carries."""
        token = next(self._tokens)
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[token] = waiter
        submit(token)
        return await waiter

    def complete(self, token: Hashable, response: Any) -> None:
        waiter = self._waiting.pop(token, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    # ------------------------------------------------------------ appends

    def append(self, partition: int, batch: bytes, on_result: Callable[[int], None]) -> None:
        """Append ``batch`` to ``<topic>-<partition>`` with acks=all; ``on_result(error_code)``
        once it is replicated or failed, a success never before an earlier append's."""
        tp = TopicPartition(self.topic, partition)
        replicas = self.replicas
        result = replicas.append(tp, bytearray(batch), -1, from_coordinator=self.coordinator_appends)
        required = result.required_offset
        previous = self._append_chains.get(partition)
        done = asyncio.get_running_loop().create_future()
        self._append_chains[partition] = done

        async def report() -> None:
            code = result.error_code
            if code == ErrorCode.NONE and required is not None:
                code = await replicas.await_replication(tp, required, self.request_timeout_ms)
            if previous is not None and code == ErrorCode.NONE:
                await previous          # successes are reported in append order
            on_result(code)
            done.set_result(None)
        asyncio.get_running_loop().create_task(report())

    # ------------------------------------------------------------ the poll timer

    def wake(self) -> None:
        """Something was carried out: poll again now (the core's deadlines may have moved)."""
        self._wakeup.set()

    async def poll_forever(self, poll: Callable[[], tuple[list, float]],
                           carry_out: Callable[[list], None]) -> None:
        """``poll()``: the core's effects due now and the milliseconds to its next deadline
        (waited at most 1 s, at least 10 ms), until ``stopped``."""
        while not self.stopped:
            effects, wait_ms = poll()
            self._wakeup.clear()
            carry_out(effects)
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), max(0.01, min(wait_ms, 1000) / 1000))
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------ loading

    def replay_log(self, partition: int, replay_batches: Callable[[Any], Any]) -> bool:
        """Feed ``replay_batches`` the records bytes of ``<topic>-<partition>`` from its log
        start to its log end offset (what a new leader holds becomes committed as its
        followers catch up). A batch that cannot be read ends the replay there, logged.
        False: the partition is not hosted here."""
        tp = TopicPartition(self.topic, partition)
        plog = self.replicas.local_log(tp)
        if plog is None:
            return False
        offset = plog.log_start_offset
        try:
            while offset < plog.log_end_offset:
                result = plog.read(offset, REPLAY_READ_BYTES, plog.log_end_offset)
                if result.error_code != ErrorCode.NONE or result.records.is_empty:
                    break
                replay_batches(plog.read_records_bytes(result.records))
                offset = result.records.last_offset + 1
        except (RecordError, ValueError) as e:
            log.error("%s: loading failed at offset %d: %s", tp, offset, e)
        return True
