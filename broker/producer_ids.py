"""Producer ids for idempotent producers, in blocks from the controller.

Kafka's ``RPCProducerIdManager``: the controller hands out disjoint blocks
(AllocateProducerIds, committed in the metadata log, so no id is ever given twice); the
broker serves InitProducerId from its current block and asks for the next when it runs out.
"""
from __future__ import annotations

import asyncio

from broker.controller_channel import ControllerChannel
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode

__all__ = ["ProducerIdManager"]


class ProducerIdManager:
    def __init__(self, broker_id: int, controller: ControllerChannel) -> None:
        self.broker_id = broker_id
        self.controller = controller
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_producer_id(self, broker_epoch: int) -> int | None:
        """A fresh producer id; None when the controller cannot give a block now."""
        async with self._lock:
            if self._next >= self._end:
                req = messages.AllocateProducerIdsRequest(broker_id=self.broker_id, broker_epoch=broker_epoch)
                try:
                    _, resp = await self.controller.request(ApiKey.ALLOCATE_PRODUCER_IDS, (0, 0), req,
                                                            timeout_s=5)
                except ConnectionError:
                    return None
                if resp.error_code != ErrorCode.NONE or resp.producer_id_len <= 0:
                    return None
                self._next, self._end = resp.producer_id_start, resp.producer_id_start + resp.producer_id_len
            producer_id = self._next
            self._next += 1
            return producer_id
