"""``MirrorLogPort`` over the data-plane core: the mirror core's appends and truncations
go to ``ReplicaManager.mirror_*`` through ``run`` (the shell's ``ReplicaDriver.run``, which
carries out the effects each input causes; a test passes ``lambda step: step(core)``)."""
from __future__ import annotations

from typing import Any, Callable

from broker.mirror._core import MirrorLogState
from broker.replica_manager import ReplicaManager
from clients.types import TopicPartition

__all__ = ["ReplicaManagerPort"]


class ReplicaManagerPort:
    def __init__(self, run: Callable[[Callable[[ReplicaManager], Any]], Any]) -> None:
        self.run = run

    def log_state(self, tp: TopicPartition, leader_epoch: int) -> MirrorLogState | None:
        return self.run(lambda core: core.mirror_log_state(tp, leader_epoch))

    def end_offset_for_epoch(self, tp: TopicPartition, leader_epoch: int, epoch: int) -> tuple[int, int]:
        return self.run(lambda core: core.mirror_end_offset_for_epoch(tp, leader_epoch, epoch))

    def truncate_to(self, tp: TopicPartition, leader_epoch: int, offset: int, now_ms: int) -> bool:
        return self.run(lambda core: core.mirror_truncate_to(tp, leader_epoch, offset, now_ms))

    def restart_at(self, tp: TopicPartition, leader_epoch: int, offset: int, now_ms: int) -> bool:
        return self.run(lambda core: core.mirror_restart_at(tp, leader_epoch, offset, now_ms))

    def append(self, tp: TopicPartition, leader_epoch: int, records: bytes | memoryview,
               source_log_start_offset: int, now_ms: int) -> int:
        return self.run(lambda core: core.mirror_append(
            tp, leader_epoch, records, source_log_start_offset, now_ms)).error_code
