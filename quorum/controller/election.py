"""Leader election and ISR edits for one partition (Kafka's PartitionChangeBuilder).

Theory of operation
-------------------
Every change the controller makes to a partition goes through ``build_partition_change``:
given the partition as it is, a target ISR and a kind of election, it returns the one
``PartitionChangeRecord`` that gets there, or None when nothing would change (which is what
makes repeated decisions harmless: a second fencing of the same broker writes nothing).

Who may lead is decided by ``is_active(broker_id)``: registered, unfenced and not in
controlled shutdown, *as the batch being built will leave it* (a broker being fenced in the
same batch is already inactive here).

Elections, in Kafka's order (KRaft ``PartitionChangeBuilder.electLeader``):

- PREFERRED: replicas[0] if it is in the target ISR and active; else as ONLINE.
- ONLINE: keep the current leader if it is in the target ISR and active; else the first
  replica, in replica order, that is in the target ISR and active; else NO_LEADER.
- UNCLEAN: as ONLINE, but when no ISR member can lead, the first active replica outside the
  ISR leads. That may lose committed records, so it happens only where
  ``unclean.leader.election.enable`` allows, and it is recorded as such: the ISR becomes
  [new leader] and leader_recovery_state RECOVERING (KIP-704) until that leader reports
  that it has recovered (AlterPartition).

ISR removal (``remove_from_isr``) never empties the ISR: when the last member is fenced it
stays in the ISR and the partition goes leaderless (NO_LEADER), as in KRaft, so that the
partition comes back cleanly when that broker returns instead of needing an unclean
election.

Epochs: the record's Leader field is set only when the leader changes, and replay then
bumps the leader epoch; replay bumps the partition epoch for every record.
"""
from __future__ import annotations

import uuid
from enum import Enum
from typing import Callable, Iterable

from clients.protocol import messages
from metadata_log.image import (
    LEADER_UNCHANGED, NO_LEADER, LeaderRecoveryState, PartitionRegistration,
)

__all__ = ["Election", "build_partition_change", "elect_leader", "remove_from_isr"]


class Election(Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


def remove_from_isr(isr: tuple[int, ...], brokers: Iterable[int]) -> tuple[int, ...]:
    """``isr`` without ``brokers``, removed one at a time, never removing the last member."""
    for b in brokers:
        if b in isr and len(isr) > 1:
            isr = tuple(r for r in isr if r != b)
    return isr


def elect_leader(p: PartitionRegistration, target_isr: tuple[int, ...],
                 is_active: Callable[[int], bool], election: Election) -> tuple[int, bool]:
    """(new leader or NO_LEADER, whether the election was unclean)."""
    def valid(r: int) -> bool:
        return r in target_isr and is_active(r)

    if election is Election.PREFERRED and valid(p.replicas[0]):
        return p.replicas[0], False
    if p.leader != NO_LEADER and valid(p.leader):
        return p.leader, False
    for r in p.replicas:
        if valid(r):
            return r, False
    if election is Election.UNCLEAN:
        for r in p.replicas:
            if is_active(r):
                return r, True
    return NO_LEADER, False


def build_partition_change(
    topic_id: uuid.UUID, partition_index: int, p: PartitionRegistration, *,
    is_active: Callable[[int], bool],
    target_isr: tuple[int, ...] | None = None,
    election: Election = Election.ONLINE,
    target_leader_recovery_state: LeaderRecoveryState | None = None,
) -> messages.PartitionChangeRecord | None:
    isr = p.isr if target_isr is None else target_isr
    assert isr, "an ISR is never empty"
    leader, unclean = elect_leader(p, isr, is_active, election)
    lrs = p.leader_recovery_state if target_leader_recovery_state is None \
        else target_leader_recovery_state
    if unclean:
        isr = (leader,)
        lrs = LeaderRecoveryState.RECOVERING
    if isr == p.isr and leader == p.leader and lrs == p.leader_recovery_state:
        return None
    # Built once; a field left at the schema's default means "unchanged" on replay.
    return messages.PartitionChangeRecord(
        partition_id=partition_index, topic_id=topic_id,
        isr=list(isr) if isr != p.isr else None,
        leader=leader if leader != p.leader else LEADER_UNCHANGED,
        leader_recovery_state=int(lrs) if lrs != p.leader_recovery_state else -1)
