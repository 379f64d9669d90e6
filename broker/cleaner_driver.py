"""The broker's log cleaner: compacted topics are compacted while the broker runs.

Kafka's LogCleaner with one cleaner thread: every ``log.cleaner.backoff.ms`` the dirtiest
compacted log whose dirty ratio reached its ``min.cleanable.dirty.ratio`` is cleaned
(``broker.log.cleaner`` has the theory). ``prepare`` and ``commit`` run on the event loop,
which owns the logs; ``build``, the part that reads and writes whole segments, runs in a
worker thread so produce and fetch go on meanwhile. A log truncated or trimmed by
retention during ``build`` makes ``commit`` discard the pass (the layout version changed);
nothing is lost and the next pass starts over.

Settings come from the broker's config layers and change live (``reconfigure``):
``log.cleaner.enable``, ``log.cleaner.backoff.ms`` and ``log.cleaner.dedupe.buffer.size``
(Kafka sizes its key map from it: 24 bytes an entry, a 16-byte key digest and an 8-byte
offset, filled to 90%).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable, Mapping

from broker.log import LastRecord, LogCleaner, LogManager, logs_to_clean
from broker.log.storage import Storage

log = logging.getLogger(__name__)

__all__ = ["CleanerDriver", "CleanerSettings"]

_KEY_MAP_ENTRY_BYTES = 24
_KEY_MAP_LOAD_FACTOR = 0.9


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    enable: bool = True                            # log.cleaner.enable
    backoff_ms: int = 15_000                       # log.cleaner.backoff.ms
    dedupe_buffer_size: int = 128 * 1024 * 1024    # log.cleaner.dedupe.buffer.size

    @property
    def key_map_entries_max(self) -> int:
        return max(1, int(self.dedupe_buffer_size / _KEY_MAP_ENTRY_BYTES * _KEY_MAP_LOAD_FACTOR))


class CleanerDriver:
    def __init__(self, logs: LogManager, storage: Storage,
                 high_watermark_of: Callable[[str, int], int], now_ms: Callable[[], int],
                 settings: CleanerSettings = CleanerSettings(),
                 last_records_of: Callable[[str, int], Mapping[int, LastRecord]] = lambda t, p: {}
                 ) -> None:
        """``high_watermark_of``: the bound of cleaning (the broker passes the last stable
        offset); ``last_records_of``: the partition's producer state, whose producers'
        last batches the cleaner keeps (``broker.log.cleaner``)."""
        self.logs = logs
        self.cleaner = LogCleaner(storage)
        self.high_watermark_of = high_watermark_of
        self.last_records_of = last_records_of
        self.now_ms = now_ms
        self.settings = settings
        self._wake = asyncio.Event()
        self._stopped = False
        self.passes = 0                 # committed passes, for metrics and tests

    def reconfigure(self, settings: CleanerSettings) -> None:
        if settings != self.settings:
            self.settings = settings
            self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    async def run(self) -> None:
        while not self._stopped:
            cleaned = False
            if self.settings.enable:
                try:
                    cleaned = await self.clean_one()
                except Exception:
                    # A bug in one pass must not stop compaction for good, nor the broker.
                    log.exception("log cleaner pass failed")
            if cleaned:
                continue            # more may be dirty: no backoff between useful passes
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.settings.backoff_ms / 1000)
            except asyncio.TimeoutError:
                pass

    async def clean_one(self) -> bool:
        """Clean the dirtiest eligible log; True if a pass was committed."""
        now = self.now_ms()
        hw_of = lambda key: self.high_watermark_of(*key)
        for key, partition_log, _ratio in logs_to_clean(self.logs.logs(), now, hw_of):
            plan = self.cleaner.prepare(partition_log, hw_of(key), now, self.last_records_of(*key))
            if plan is None:
                continue
            config = partition_log.config
            built = await asyncio.to_thread(
                self.cleaner.build, plan, config.delete_retention_ms,
                self.settings.key_map_entries_max, config.segment_bytes)
            if built is None:
                return False
            groups, map_end, stats = built
            result = self.cleaner.commit(partition_log, plan, groups, map_end, stats, self.now_ms())
            if result.committed:
                self.passes += 1
                log.info("%s-%d: cleaned %d segments, %d records kept, %d removed "
                         "(%d tombstones)", key[0], key[1], result.segments_replaced,
                         result.records_kept, result.records_removed, result.tombstones_removed)
            return result.committed
        return False
