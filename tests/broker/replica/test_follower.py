"""Leader-epoch truncation (KIP-101, KIP-279) instead of truncating to a stale HW."""
from __future__ import annotations

from broker.log.leader_epoch_cache import EpochEntry, LeaderEpochCache
from broker.replica.follower import TruncationDecision, truncation_decision


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache()
    for epoch, start in entries:
        c.assign(epoch, start)
    return c


def lookup(c: LeaderEpochCache, leo: int):
    def f(epoch: int) -> tuple[int, int]:
        r = c.end_offset_for(epoch, leo)
        return r.leader_epoch, r.end_offset
    return f


def test_kip101_scenario1_restarted_follower_keeps_what_the_leader_has() -> None:
    # Leader A and follower B both hold offsets 0..1 in epoch 0; B's HW is still 1 when it
    # restarts. Truncating to the HW would drop offset 1, which A may already have acked.
    b = cache((0, 0))
    leader_answer = (0, 2)  # A: epoch 0 ends at its LEO 2
    d = truncation_decision(*leader_answer, log_end_offset=2, high_watermark=1,
                            local_end_offset_for=lookup(b, 2))
    assert d == TruncationDecision(2, done=True)


def test_kip101_scenario2_divergent_suffix_is_cut() -> None:
    # A had offsets 0..1 in epoch 0 (offset 1 never replicated). B became leader in
    # epoch 1 with only offset 0 and wrote a different record at offset 1.
    a = cache((0, 0))
    leader_answer = (0, 1)  # B: epoch 0 ends where epoch 1 starts, offset 1
    d = truncation_decision(*leader_answer, log_end_offset=2, high_watermark=0,
                            local_end_offset_for=lookup(a, 2))
    assert d == TruncationDecision(1, done=True)


def test_kip279_iterates_when_the_follower_lacks_the_leaders_epoch() -> None:
    # Follower: epochs 1 (from 0) and 3 (from 5), LEO 9. Leader: epochs 1, 2 (from 4).
    f = cache((1, 0), (3, 5))
    # Ask about epoch 3; the leader's largest epoch <= 3 is 2, ending at its LEO 7.
    d = truncation_decision(2, 7, log_end_offset=9, high_watermark=0,
                            local_end_offset_for=lookup(f, 9))
    # The follower has no epoch 2: cut to the end of its epoch 1 (offset 5) and ask about 1.
    assert d == TruncationDecision(5, done=False, next_epoch=1)
    f.truncate_from_end(5)
    d = truncation_decision(1, 4, log_end_offset=5, high_watermark=0,
                            local_end_offset_for=lookup(f, 5))
    assert d == TruncationDecision(4, done=True)


def test_leader_without_an_answer_falls_back_to_the_high_watermark() -> None:
    d = truncation_decision(-1, -1, log_end_offset=9, high_watermark=6,
                            local_end_offset_for=lambda e: (-1, -1))
    assert d == TruncationDecision(6, done=True)


def test_leader_older_than_every_local_epoch() -> None:
    f = cache((4, 10))
    d = truncation_decision(2, 8, log_end_offset=15, high_watermark=0,
                            local_end_offset_for=lookup(f, 15))
    # Nothing local at or below epoch 2 -> keep only what the leader has.
    assert d == TruncationDecision(8, done=True)
