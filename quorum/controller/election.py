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

ISR removal (``remove_from_isr``) never empties the ISR without eligible leader replicas:
when the last member is fenced it stays in the ISR and the partition goes leaderless
(NO_LEADER), as in KRaft before KIP-966, so that the partition comes back cleanly when that
broker returns instead of needing an unclean election.

Eligible leader replicas (KIP-966, ``Elr``: on when the cluster's
``eligible.leader.replicas.version`` feature is 1; Kafka's PartitionChangeBuilder with its
balanced unclean recovery, the default). The leaders' high watermark advances only while
the ISR holds at least the effective ``min.insync.replicas`` (min(config, replicas)), so a
replica that leaves the ISR while it is below that bound holds every committed record:

- while the target ISR is below min ISR, the members it loses join the ELR (less those that
  shut down uncleanly, which may have lost unflushed records: the controller learns that
  from a registration whose previous broker epoch is not the last one it gave), and the ISR
  may become empty; at or above min ISR the ELR and last known ELR are cleared;
- the last known ELR holds the leader the partition had when its ISR emptied;
- a leader is chosen from the ISR, or, when the ISR is empty, from the active ELR members
  (it then becomes the ISR, alone); when ISR and ELR are both empty (every eligible
  replica came back from an unclean stop), the last known leader, if it is back, leads as
  after an unclean election (RECOVERING): it has the longest log the partition is known to
  have had, and this keeps a crashed single-replica partition from staying offline for
  good; only then, if allowed, any replica uncleanly;
- an unclean election clears the ELR.

Epochs: the record's Leader field is set only when the leader changes, and replay then
bumps the leader epoch; replay bumps the partition epoch for every record.
"""
from __future__ import annotations

import uuid
from enum import Enum
from typing import Callable, Iterable

from dataclasses import dataclass

from clients.protocol import messages
from metadata_log.image import (
    LEADER_UNCHANGED, NO_LEADER, LeaderRecoveryState, PartitionRegistration,
)

__all__ = ["Election", "Elr", "build_partition_change", "elect_leader", "remove_from_isr"]


class Election(Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class Elr:
    """Eligible leader replicas are on for this change: the topic's min.insync.replicas
    (capped by the replica count where used), and the brokers known to have shut down
    uncleanly (never eligible)."""
    min_isr: int
    unclean_shutdown: frozenset[int] = frozenset()


def remove_from_isr(isr: tuple[int, ...], brokers: Iterable[int],
                    allow_empty: bool = False) -> tuple[int, ...]:
    """``isr`` without ``brokers``, removed one at a time, never removing the last member
    unless ``allow_empty`` (with eligible leader replicas)."""
    for b in brokers:
        if b in isr and (len(isr) > 1 or allow_empty):
            isr = tuple(r for r in isr if r != b)
    return isr


def target_elr(p: PartitionRegistration, target_isr: tuple[int, ...],
               elr: Elr) -> tuple[int, ...]:
    """The ELR for ``target_isr`` (Kafka's maybePopulateTargetElr)."""
    if len(target_isr) >= min(elr.min_isr, len(p.replicas)):
        return ()
    in_isr = set(target_isr)
    candidates = set(p.eligible_leader_replicas or ()) | set(p.isr)
    return tuple(sorted(r for r in candidates
                        if r not in in_isr and r not in elr.unclean_shutdown))


def elect_leader(p: PartitionRegistration, target_isr: tuple[int, ...],
                 is_active: Callable[[int], bool], election: Election,
                 eligible: tuple[int, ...] = (),
                 last_known_leader: int | None = None) -> tuple[int, bool]:
    """(new leader or NO_LEADER, whether the election was unclean). ``eligible``: the
    ELR, whose members may lead when the ISR is empty; ``last_known_leader``: the leader
    the partition had when its ISR emptied, tried (as an unclean election, so the leader
    recovers) when ISR and ELR are both empty."""
    def valid(r: int) -> bool:
        return (r in target_isr or (not target_isr and r in eligible)) and is_active(r)

    if election is Election.PREFERRED and valid(p.replicas[0]):
        return p.replicas[0], False
    if p.leader != NO_LEADER and valid(p.leader):
        return p.leader, False
    for r in p.replicas:
        if valid(r):
            return r, False
    if (last_known_leader is not None and not target_isr and not eligible
            and is_active(last_known_leader)):
        return last_known_leader, True
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
    elr: Elr | None = None,
) -> messages.PartitionChangeRecord | None:
    """The one record taking ``p`` to ``target_isr`` with a leader chosen by ``election``,
    or None. ``elr``: eligible leader replicas are on (None: off; the ISR is then never
    emptied by the callers, and what an earlier ELR left is cleared or used to recover)."""
    isr = p.isr if target_isr is None else target_isr
    eligible = p.eligible_leader_replicas or ()
    last_known = p.last_known_elr or ()
    if elr is not None:
        eligible = target_elr(p, isr, elr)
    # Kafka's balanced recovery: the last known ELR holds just the last leader.
    last_leader = last_known[0] if len(last_known) == 1 else None
    leader, unclean = elect_leader(p, isr, is_active, election, eligible, last_leader)
    lrs = p.leader_recovery_state if target_leader_recovery_state is None \
        else target_leader_recovery_state
    if unclean:
        isr = (leader,)
        lrs = LeaderRecoveryState.RECOVERING
        eligible = ()
    elif leader != NO_LEADER and leader in eligible:
        # Elected from the ELR: it holds every committed record; it is the ISR now.
        isr = (leader,)
        eligible = tuple(r for r in eligible if r != leader)
    if elr is not None:
        # Kafka's maybeUpdateLastKnownLeader: remember the leader the partition had when
        # its ISR emptied; forget it once the partition has a leader again.
        if not isr and p.isr and p.leader != NO_LEADER:
            last_known = (p.leader,)
        elif leader != NO_LEADER:
            last_known = ()
    elif isr:
        # ELR switched off (UpdateFeatures to 0): a partition with an ISR sheds its ELR
        # fields; one still without an ISR keeps them until an eligible replica leads.
        eligible, last_known = (), ()
    elr_changed = (eligible != (p.eligible_leader_replicas or ())
                   or last_known != (p.last_known_elr or ()))
    if isr == p.isr and leader == p.leader and lrs == p.leader_recovery_state \
            and not elr_changed:
        return None
    # Built once; a field left at the schema's default means "unchanged" on replay.
    return messages.PartitionChangeRecord(
        partition_id=partition_index, topic_id=topic_id,
        isr=list(isr) if isr != p.isr else None,
        leader=leader if leader != p.leader else LEADER_UNCHANGED,
        leader_recovery_state=int(lrs) if lrs != p.leader_recovery_state else -1,
        eligible_leader_replicas=(list(eligible) if eligible != (p.eligible_leader_replicas or ())
                                  else None),
        last_known_elr=list(last_known) if last_known != (p.last_known_elr or ()) else None)
