"""The history checker on synthetic histories: every planted fault is caught and counted,
and a clean history passes."""
from __future__ import annotations

import random

from hypothesis import given, strategies as st

from chaos.checker import Check, Expect, check, compare_replicas, judge, unavailability
from chaos.workload import ACKED, FAILED, UNKNOWN, Attempt, ReplicaBatch, make_value

TOPIC = "t"


def attempt(producer: str, seq: int, partition: int, outcome: str = ACKED, offset: int = -1,
            t: float = 0.0) -> Attempt:
    return Attempt(producer, seq, TOPIC, partition, t_send=t, outcome=outcome, offset=offset,
                   t_done=t + 0.01)


def clean_history(records_per_partition: int = 20, partitions: int = 2):
    """Two producers alternating over each partition; everything acked at its offset."""
    attempts, logs = [], {}
    seq = {"a": 0, "b": 0}
    for p in range(partitions):
        log = []
        for offset in range(records_per_partition):
            producer = "ab"[offset % 2]
            a = attempt(producer, seq[producer], p, ACKED, offset, t=offset * 0.1)
            seq[producer] += 1
            attempts.append(a)
            log.append((offset, a.value))
        logs[(TOPIC, p)] = log
    return attempts, logs


def test_a_clean_history_passes() -> None:
    attempts, logs = clean_history()
    figures = check(attempts, logs)
    assert (figures.acked, figures.lost, figures.duplicated, figures.reordered, figures.phantom,
            figures.wrong_offset) == (40, 0, 0, 0, 0, 0)
    assert judge(figures, Expect(duplicated_zero=True, reordered_zero=True)).passed


def test_planted_losses_are_counted() -> None:
    attempts, logs = clean_history()
    log = logs[(TOPIC, 1)]
    del log[5], log[10]                    # two acknowledged records vanish
    figures = check(attempts, logs)
    assert figures.lost == 2
    verdict = judge(figures, Expect())
    assert not verdict.passed and "lost=2, expected 0" in verdict.reasons
    # The same history demonstrates an L hazard of exactly two records.
    assert judge(figures, Expect(lost="=2")).passed
    assert judge(figures, Expect(lost=">0")).passed
    assert not judge(check(*clean_history()), Expect(lost=">0")).passed


def test_unacknowledged_records_may_be_missing_or_present() -> None:
    attempts, logs = clean_history()
    attempts.append(attempt("a", 100, 0, UNKNOWN))         # never written
    attempts.append(attempt("b", 100, 0, UNKNOWN))         # written after all
    logs[(TOPIC, 0)].append((20, make_value("b", 100)))
    figures = check(attempts, logs)
    assert (figures.lost, figures.phantom, figures.unknown) == (0, 0, 2)


def test_planted_duplicates_are_counted() -> None:
    attempts, logs = clean_history()
    log = logs[(TOPIC, 0)]
    log.append((20, log[3][1]))
    log.append((21, log[3][1]))
    log.append((22, log[4][1]))
    figures = check(attempts, logs)
    assert figures.duplicated == 3 and figures.lost == 0
    assert not judge(figures, Expect(duplicated_zero=True)).passed
    assert judge(figures, Expect()).passed        # duplicates allowed unless promised


def test_planted_reordering_is_counted_per_producer() -> None:
    attempts, logs = clean_history()
    log = logs[(TOPIC, 0)]
    # Swap two records of producer "a" (offsets 2 and 6): one record is out of order.
    (o2, v2), (o6, v6) = log[2], log[6]
    log[2], log[6] = (o2, v6), (o6, v2)
    figures = check(attempts, logs)
    assert figures.reordered >= 1
    assert not judge(figures, Expect(reordered_zero=True)).passed
    # The swap also moved two acknowledged records off their offsets.
    assert figures.wrong_offset == 2


def test_phantoms_and_refused_records_found_in_the_log() -> None:
    attempts, logs = clean_history()
    attempts.append(attempt("a", 500, 1, FAILED))          # the broker said "not written"
    logs[(TOPIC, 1)] += [(20, b"never-sent"), (21, make_value("zz", 1)), (22, make_value("a", 500))]
    figures = check(attempts, logs)
    assert figures.phantom == 3
    assert not judge(figures, Expect()).passed


def test_a_record_in_the_wrong_partition_is_a_phantom_and_lost() -> None:
    attempts, logs = clean_history()
    moved = logs[(TOPIC, 0)].pop()
    logs[(TOPIC, 1)].append((20, moved[1]))
    figures = check(attempts, logs)
    assert figures.lost == 1 and figures.phantom == 1


def batches(spec: list[tuple[int, int, bytes]]) -> list[ReplicaBatch]:
    return [ReplicaBatch(base, last, 0, raw) for base, last, raw in spec]


def test_divergent_replicas_are_caught_below_the_high_watermark_only() -> None:
    leader = batches([(0, 4, b"A"), (5, 9, b"B"), (10, 14, b"C")])
    same = batches([(0, 4, b"A"), (5, 9, b"B")])                    # behind, but HW is 10
    differs = batches([(0, 4, b"A"), (5, 9, b"X")])                 # a different batch
    extra_above = batches([(0, 4, b"A"), (5, 9, b"B"), (10, 12, b"Z")])   # above the HW: fine
    d = compare_replicas({1: leader, 2: same, 3: differs, 4: extra_above}, high_watermark=10, reference=1)
    assert d.divergent == (3,) and d.lagging == ()
    lagging = batches([(0, 4, b"A")])
    d = compare_replicas({1: leader, 2: lagging}, high_watermark=10, reference=1)
    assert d.divergent == () and d.lagging == (2,)
    attempts, logs = clean_history()
    figures = check(attempts, logs, divergence=[compare_replicas({1: leader, 3: differs}, 10, 1)])
    assert figures.divergent == 1
    assert not judge(figures, Expect()).passed


def test_unavailability_is_the_longest_gap_between_acks() -> None:
    gaps = unavailability({"p0": [1.0, 1.5, 4.0, 4.2], "p1": []}, start=0.5, end=5.0)
    assert gaps == {"p0": 2.5, "p1": 4.5}
    attempts = [attempt("a", i, 0, ACKED, i, t=t) for i, t in enumerate([0.0, 0.1, 3.1, 3.2])]
    logs = {(TOPIC, 0): [(a.offset, a.value) for a in attempts]}
    figures = check(attempts, logs)
    assert abs(figures.unavailable_s - 3.0) < 0.02
    assert not judge(figures, Expect(unavailable_max_s=2.0)).passed
    assert judge(figures, Expect(unavailable_max_s=4.0)).passed


def test_failed_scenario_checks_fail_the_verdict() -> None:
    attempts, logs = clean_history()
    verdict = judge(check(attempts, logs), Expect(), [Check("new leader elected", False, "none after 30s"),
                                                      Check("isr shrank", True)])
    assert verdict.reasons == ("new leader elected: none after 30s",)


@given(rng=st.randoms(use_true_random=False), losses=st.integers(0, 5), dups=st.integers(0, 5))
def test_planted_faults_are_counted_exactly(rng: random.Random, losses: int, dups: int) -> None:
    attempts, logs = clean_history(records_per_partition=30, partitions=1)
    log = logs[(TOPIC, 0)]
    victims = rng.sample(range(len(log)), losses)
    kept = [r for i, r in enumerate(log) if i not in victims]
    copies = [rng.choice(kept) for _ in range(dups)] if kept else []
    end = len(log)
    kept += [(end + i, v) for i, (_, v) in enumerate(copies)]
    figures = check(attempts, {(TOPIC, 0): kept})
    assert figures.lost == losses
    assert figures.duplicated == len(copies)
    assert figures.phantom == 0


def test_acked_after_counts_acks_to_requests_sent_inside_the_window() -> None:
    """N11's judgment: an ack to a request that left after ``sent_after`` and came before
    ``acked_before`` is counted; an answer already on its way is not; a retried try is
    judged by when it left; producers without try times are judged by the first send."""
    from chaos.checker import acked_after

    def a(seq: int, t_send: float, t_done: float | None, outcome: str = ACKED,
          t_try: float | None = None) -> Attempt:
        return Attempt("p", seq, TOPIC, 0, t_send=t_send, outcome=outcome, offset=seq,
                       t_done=t_done, t_try=t_try)

    in_flight = a(0, t_send=0.5, t_done=1.2, t_try=0.9)      # left before the change at 1.0
    retried_inside = a(1, t_send=0.5, t_done=1.5, t_try=1.1)  # its last try left after it
    first_send_inside = a(2, t_send=1.3, t_done=1.6)          # librdkafka: no try times
    refused = a(3, t_send=1.4, t_done=1.7, outcome=FAILED)
    after_heal = a(4, t_send=1.4, t_done=2.5, t_try=2.1)      # acked once the window closed
    late = acked_after([in_flight, retried_inside, first_send_inside, refused, after_heal],
                       sent_after=1.0, acked_before=2.0)
    assert [x.seq for x in late] == [1, 2]
