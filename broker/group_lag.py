"""Consumer-group lag computed on the broker (the metrics' ``kafka_consumergroup_lag``).

Each broker reports the groups it coordinates, so every group is reported once, by the
broker that holds its committed offsets. Every ``ketch.metrics.group.lag.interval.ms`` the
monitor asks the partitions' leaders for their log start and end offsets (ListOffsets
through Ketch's admin client, as the HTTP API and ``ketch group describe`` do) and
computes lag with ``group_lag``, the one definition the client, CLI and HTTP API share:
log end minus the committed offset (from the log start when the committed offset is below
it).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from clients._core.admin import OffsetSpec, group_lag
from clients.aio.admin import Admin
from clients.errors import KafkaApiError, KafkaTimeoutError
from clients.types import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["GroupLagMonitor"]


class GroupLagMonitor:
    def __init__(self, committed: Callable[[], dict[str, dict[tuple[str, int], int]]],
                 admin: Callable[[], Awaitable[Admin]], interval_ms: int) -> None:
        self.committed = committed
        self.admin = admin
        self.interval_ms = interval_ms
        self.lag: dict[tuple[str, str, int], tuple[int, int]] = {}

    def snapshot(self) -> dict[tuple[str, str, int], tuple[int, int]]:
        return self.lag

    async def run(self) -> None:
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as e:    # a broker down or an election: try again next round
                log.debug("group lag refresh failed: %r", e)
            await asyncio.sleep(self.interval_ms / 1000)

    async def refresh(self) -> None:
        groups = self.committed()
        tps = sorted({TopicPartition(t, p) for offsets in groups.values() for t, p in offsets})
        if not tps:
            self.lag = {}
            return
        admin = await self.admin()
        timeout_ms = max(1000, self.interval_ms)
        starts = await self._offsets(admin, tps, OffsetSpec.earliest(), timeout_ms)
        ends = await self._offsets(admin, tps, OffsetSpec.latest(), timeout_ms)
        out: dict[tuple[str, str, int], tuple[int, int]] = {}
        for group, offsets in groups.items():
            committed = {TopicPartition(t, p): o for (t, p), o in offsets.items()}
            known_ends = {tp: ends[tp] for tp in committed if tp in ends}
            for tp, value in group_lag(committed, starts, known_ends).items():
                out[(group, tp.topic, tp.partition)] = (committed[tp], value.lag)
        self.lag = out

    @staticmethod
    async def _offsets(admin: Admin, tps: list[TopicPartition], spec: OffsetSpec,
                       timeout_ms: int) -> dict[TopicPartition, int]:
        """Offsets of the partitions that answered (a deleted topic's do not)."""
        try:
            found = await admin.list_offsets({tp: spec for tp in tps}, timeout_ms=timeout_ms)
        except (KafkaApiError, KafkaTimeoutError) as e:
            found = getattr(e, "results", None) or {}
        return {tp: r.offset for tp, r in found.items() if not isinstance(r, BaseException)}
