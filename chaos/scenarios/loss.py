"""The documented hazards of SCENARIOS.md, L1-L7: each is arranged so the hazard shows on
every run (pauses with SIGSTOP put the processes where the timing needs them), and the
amount lost is reported. Where the amount is known in advance (the records written in
the window the hazard opens) the scenario expects exactly that many lost.

The arrangements lean on the fast failure detection of chaos.cluster (a silent broker is
fenced after 2.5 s, a silent follower leaves the ISR after 3 s): a follower paused for a
few hundred milliseconds is still in the ISR, one paused until the ISR visibly shrank is
not. Each scenario checks the arrangement it relies on.
"""
from __future__ import annotations

import os
import time

from chaos.checker import Expect
from chaos.cluster import ChaosCluster, wait_until
from chaos.faults import Kill, Pause, Restart, Resume
from chaos.scenarios.base import CI, Context, Scenario, elapsed
from chaos.workload import (
    ACKED, FAILED, ConsumerWorker, KetchProducer, log_end_on_disk, read_isolated, read_partition,
)

__all__ = ["LOSS_SCENARIOS"]

LAG_TIME_MAX_S = 3.0
FETCH_WAIT_MAX_S = 0.2       # FAST_BROKER's replica.fetch.wait.max.ms
SESSION_TIMEOUT_S = 2.5


def hazard_size(ctx: Context) -> int:
    """How many records each L scenario writes into its hazard window."""
    return 30 if ctx.profile is CI else 100


def fully_replicated(ctx: Context, c: ChaosCluster, topic: str, replicas: list[int], end: int) -> None:
    """Until the HW and every replica's log reach ``end`` (so nothing older is at risk)."""
    wait_until(lambda: c.high_watermark(topic, 0) >= end and
               all(log_end_on_disk(c, r, topic, 0) >= end for r in replicas), 30,
               f"{topic}-0 replicated up to {end} everywhere")


def acked_end(attempts) -> int:
    return max(a.offset for a in attempts if a.outcome == ACKED) + 1


def in_window(ctx: Context, attempts) -> int:
    n = sum(1 for a in attempts if a.outcome == ACKED)
    ctx.extra["hazard_window_acked"] = n
    return n


# ---------------------------------------------------------------- L1


def l1(ctx: Context) -> None:
    """acks=0: the leader is paused, N records go into its socket buffer and count as
    sent, then it is SIGKILLed. The producer is never told."""
    c = ctx.cluster()
    topic = "l1"
    c.create_topic(topic, assignment={0: [1, 2, 3]})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=0, records_per_batch=5)
    ctx.closing(producer.close)
    producer.send(0, ctx.profile.records)
    fully_replicated(ctx, c, topic, [1, 2, 3], ctx.profile.records)
    ctx.inject(c, Pause(1))
    window = producer.send(0, hazard_size(ctx))
    n = in_window(ctx, window)
    ctx.inject(c, Kill(1))
    c.wait_partition(topic, 0, lambda s: s.leader not in (-1, 1), 30, "a new leader")
    ctx.inject(c, Restart(1))
    ctx.check(f"{n} acks=0 records were sent to the paused leader and counted as sent", n == hazard_size(ctx))
    ctx.note(f"{n} acks=0 records went to the paused leader and died with it; the producer was never told")
    ctx.read_back(c, topic, [0])
    ctx.expect_lost = n


# ---------------------------------------------------------------- L2


def l2(ctx: Context) -> None:
    """acks=1: followers paused, N records acknowledged by the leader alone, the leader
    SIGKILLed, the followers resumed before the lag timeout: a follower still in the ISR
    becomes leader without them."""
    c = ctx.cluster()
    topic = "l2"
    c.create_topic(topic, assignment={0: [1, 2, 3]})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=1, records_per_batch=5)
    ctx.closing(producer.close)
    end = acked_end(producer.send(0, ctx.profile.records))
    fully_replicated(ctx, c, topic, [1, 2, 3], end)
    t_pause = time.monotonic()
    ctx.inject(c, Pause(2))
    ctx.inject(c, Pause(3))
    # A follower's fetch may be long-polling at the leader when it is paused: data written
    # now would still go into its socket and be appended on SIGCONT. Past
    # replica.fetch.wait.max.ms (200 ms) that fetch has been answered (empty), and a
    # paused follower sends no other: from here on only the leader has the writes.
    time.sleep(FETCH_WAIT_MAX_S * 2.5)
    window = producer.send(0, hazard_size(ctx))
    ctx.inject(c, Kill(1))
    ctx.inject(c, Resume(2))
    ctx.inject(c, Resume(3))
    paused_s = elapsed(t_pause)
    n = in_window(ctx, window)
    ctx.check(f"followers paused {paused_s}s, under the session ({SESSION_TIMEOUT_S}s) and lag "
              f"({LAG_TIME_MAX_S}s) timeouts: they stayed in the ISR", paused_s < SESSION_TIMEOUT_S - 0.5)
    new = c.wait_partition(topic, 0, lambda s: s.leader not in (-1, 1), 30, "a new leader")
    ctx.check(f"follower {new.leader} (in the ISR) became leader", new.leader in (2, 3))
    ctx.inject(c, Restart(1))
    ctx.extra["expected_lost"] = n
    ctx.note(f"{n} records acknowledged by the leader alone (acks=1)")
    ctx.read_back(c, topic, [0])
    ctx.expect_lost = n


# ---------------------------------------------------------------- L3


def l3(ctx: Context) -> None:
    """acks=all, min.insync.replicas=1, unclean election on: followers paused until the
    ISR is the leader alone; N records still acknowledged; the leader dies; a stale
    follower is elected uncleanly (Jepsen 2013)."""
    c = ctx.cluster()
    topic = "l3"
    c.create_topic(topic, assignment={0: [1, 2, 3]},
                   configs={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, records_per_batch=5)
    ctx.closing(producer.close)
    end = acked_end(producer.send(0, ctx.profile.records))
    fully_replicated(ctx, c, topic, [1, 2, 3], end)
    ctx.inject(c, Pause(2))
    ctx.inject(c, Pause(3))
    c.wait_partition(topic, 0, lambda s: s.isr == (1,), 30, "the ISR to shrink to the leader alone")
    window = producer.send(0, hazard_size(ctx))
    n = in_window(ctx, window)
    ctx.check(f"{n} acks=all records acknowledged with the leader alone in the ISR", n == hazard_size(ctx))
    ctx.inject(c, Kill(1))
    ctx.inject(c, Resume(2))
    new = c.wait_partition(topic, 0, lambda s: s.leader == 2, 60, "the stale follower 2 to lead (unclean)")
    ctx.check("the stale follower was elected uncleanly", new.leader == 2, str(new))
    ctx.inject(c, Resume(3))
    ctx.inject(c, Restart(1))
    ctx.extra["expected_lost"] = n
    ctx.note(f"{n} records acknowledged while the ISR was the leader alone; lost to the unclean election of 2")
    ctx.read_back(c, topic, [0])
    ctx.expect_lost = n


# ---------------------------------------------------------------- L4


def l4(ctx: Context) -> None:
    """Unclean election on; every replica down; the stale follower returns first and
    leads; what was written after it fell out of the ISR is lost; the old leader
    truncates its divergent suffix when it returns."""
    c = ctx.cluster()
    topic = "l4"
    stale = 3
    c.create_topic(topic, assignment={0: [1, 2, stale]},
                   configs={"min.insync.replicas": "2", "unclean.leader.election.enable": "true"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, records_per_batch=5)
    ctx.closing(producer.close)
    end = acked_end(producer.send(0, ctx.profile.records))
    fully_replicated(ctx, c, topic, [1, 2, 3], end)
    ctx.inject(c, Pause(stale))
    c.wait_partition(topic, 0, lambda s: stale not in s.isr, 30, f"broker {stale} out of the ISR")
    window = producer.send(0, hazard_size(ctx))
    n = in_window(ctx, window)
    ctx.inject(c, Kill(stale))
    ctx.inject(c, Kill(2))
    ctx.inject(c, Kill(1))
    ctx.inject(c, Restart(stale))
    new = c.wait_partition(topic, 0, lambda s: s.leader == stale, 60, f"broker {stale} to lead (unclean)")
    ctx.check("the stale follower returned first and leads", new.leader == stale, str(new))
    ctx.inject(c, Restart(1))
    ctx.inject(c, Restart(2))
    ctx.extra["expected_lost"] = n
    ctx.note(f"{n} records written after broker {stale} left the ISR; lost when it came back first and led")
    ctx.read_back(c, topic, [0])
    ctx.expect_lost = n


# ---------------------------------------------------------------- L5


def l5(ctx: Context) -> None:
    """A consumer with enable.auto.commit=true (100 ms) crashes after the automatic commit
    but before processing: the records in between are skipped (at-most-once); the log
    itself loses nothing."""
    c = ctx.cluster()
    topic = "l5"
    group = "l5-group"
    c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, idempotent=True, records_per_batch=10)
    ctx.closing(producer.close)
    producer.send(0, ctx.profile.group_records)
    acked = {a.value.decode() for a in ctx.history.snapshot() if a.outcome == ACKED}
    workers: list[ConsumerWorker] = []
    ctx.closing(lambda: [w.kill() for w in workers])
    first = ConsumerWorker(c.bootstrap_servers, topic, group, os.path.join(ctx.workdir, "worker-0.log"),
                           auto_commit_ms=100, process_ms=20, batch=20,
                           client_properties=c.client_properties_file).start()
    workers.append(first)
    committed = _Committed(c.bootstrap_servers, group, topic, c.client_props)
    ctx.closing(committed.close)

    def ahead() -> int:
        processed = first.processed()
        done = processed[-1][1] + 1 if processed else 0
        return committed.offset() - done
    # The crash is arranged where auto-commit ran ahead of processing by 10+ records (a
    # batch of 20 takes 400 ms to process; the commit runs every 100 ms).
    wait_until(lambda: ahead() >= 10, 120, "the automatic commit to run ahead of processing")
    first.kill()
    gap = ahead()
    ctx.event(f"SIGKILL consumer pid {first.pid}: committed offset {committed.offset()}, "
              f"{gap} records committed but not processed")
    ctx.check("crashed after the automatic commit, before processing", gap > 0, f"{gap} records")
    last = max(a.offset for a in ctx.history.snapshot() if a.outcome == ACKED)
    ctx.check("records were left for the next consumer", committed.offset() <= last,
              f"committed {committed.offset()}, last offset {last}")
    second = ConsumerWorker(c.bootstrap_servers, topic, group, os.path.join(ctx.workdir, "worker-1.log"),
                            auto_commit_ms=100, process_ms=1, batch=100,
                            client_properties=c.client_properties_file).start()
    workers.append(second)
    wait_until(lambda: any(o == last for _, o, _ in second.processed()), 120,
               "the new consumer to reach the end of the log")
    second.terminate()
    processed = {v for w in workers for _, _, v in w.processed()}
    skipped = len(acked - processed)
    ctx.extra["skipped_by_processing"] = skipped
    ctx.check(f"records skipped by processing (at-most-once): {skipped}", skipped > 0)
    ctx.note(f"{skipped} records never processed (committed before processing); the log keeps them")
    ctx.read_back(c, topic, [0])


class _Committed:
    """The group's committed offset, asked through confluent-kafka without joining."""

    def __init__(self, bootstrap: str, group: str, topic: str, login: dict[str, str]) -> None:
        from confluent_kafka import Consumer
        self.topic = topic
        self.consumer = Consumer({**login, "bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False})

    def offset(self) -> int:
        from confluent_kafka import TopicPartition
        (tp,) = self.consumer.committed([TopicPartition(self.topic, 0)], timeout=10)
        return tp.offset if tp.offset >= 0 else 0

    def close(self) -> None:
        self.consumer.close()


# ---------------------------------------------------------------- L6


def l6(ctx: Context) -> None:
    """acks=all, min.insync.replicas=2; 2 of 3 brokers killed: not a loss. Writes are
    refused with NOT_ENOUGH_REPLICAS, reads up to the HW still work; after the restart
    writes resume and nothing acknowledged is lost."""
    c = ctx.cluster()
    topic = "l6"
    c.create_topic(topic, assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, records_per_batch=5,
                             delivery_timeout_s=3)
    ctx.closing(producer.close)
    t0 = time.monotonic()
    producer.start([0], interval_s=0.05)
    wait_until(lambda: ctx.history.count(ACKED) >= 100, 60, "100 acknowledged records")
    ctx.inject(c, Kill(1))
    ctx.inject(c, Kill(2))
    c.wait_partition(topic, 0, lambda s: s.leader == 3 and s.isr == (3,), 30,
                     "broker 3 leading alone")
    t_out = time.monotonic()
    wait_until(lambda: ctx.history.errors().get("NOT_ENOUGH_REPLICAS", 0) >= 3, 30,
               "writes refused with NOT_ENOUGH_REPLICAS")
    acked_so_far = [a for a in ctx.history.snapshot() if a.outcome == ACKED]
    read = read_partition(c, topic, 0)
    values = {r.value for r in read.records}
    # KIP-966: with the ISR under min.insync.replicas the HW does not move, so the new
    # leader's HW may stop short of the last records acknowledged before the second kill
    # (its follower HW lagged the old leader's by a fetch). Those lie above the HW and are
    # read after the restart (read_back: lost=0); everything below the HW reads now.
    below = [a for a in acked_so_far if a.offset < read.high_watermark]
    above = len(acked_so_far) - len(below)
    ctx.check(f"reads up to the HW work with 1 of 3 brokers ({len(read.records)} records)",
              bool(read.records) and {a.value for a in below} <= values,
              f"{sum(1 for a in below if a.value not in values)} acked records below the HW not read")
    ctx.note(f"{above} acked records above the HW while broker 3 led alone (KIP-966)")
    t_restart = time.monotonic()
    ctx.inject(c, Restart(1))
    ctx.inject(c, Restart(2))
    c.wait_partition(topic, 0, lambda s: len(s.isr) >= 2, 60, "the ISR back to 2 or more")
    resumed = ctx.history.count(ACKED)
    wait_until(lambda: ctx.history.count(ACKED) >= resumed + 50, 60, "writes to resume")
    producer.stop()
    ctx.window = (t0, time.monotonic())
    outage = [a for a in ctx.history.snapshot() if t_out + 0.1 < a.t_send < t_restart]
    acked_in_outage = sum(1 for a in outage if a.outcome == ACKED and a.t_done < t_restart)
    refused = ctx.history.errors().get("NOT_ENOUGH_REPLICAS", 0)
    ctx.check("no write acknowledged while the ISR was below min.insync.replicas", acked_in_outage == 0,
              f"{acked_in_outage} of {len(outage)}")
    ctx.note(f"{refused} tries refused with NOT_ENOUGH_REPLICAS during {round(t_restart - t_out, 1)} s")
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- L7


def l7(ctx: Context) -> None:
    """Transactions and read_uncommitted: a confluent-kafka transactional producer writes a
    transaction, flushes it (its records are in the log, replicated) and aborts it, then
    commits another. A read_uncommitted consumer sees the aborted records (the documented
    hazard: it reads what was never committed); a read_committed consumer never does."""
    from confluent_kafka import Producer
    c = ctx.cluster()
    topic = "l7"
    c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    n = hazard_size(ctx)
    producer = Producer({**c.client_props, "bootstrap.servers": c.bootstrap_servers,
                         "transactional.id": "l7-producer",
                         "linger.ms": 5, "log_level": 2})
    producer.init_transactions(60)

    def transaction(name: str, commit: bool) -> None:
        producer.begin_transaction()
        for seq in range(n):
            attempt = ctx.history.new(name, seq, topic, 0)

            def report(err, msg, attempt=attempt) -> None:   # type: ignore[no-untyped-def]
                if err is None:
                    ctx.history.finish(attempt, ACKED, msg.offset())
                else:
                    ctx.history.finish(attempt, FAILED, error=err.name())
            producer.produce(topic, value=attempt.value, partition=0, on_delivery=report)
        producer.flush(60)
        if commit:
            producer.commit_transaction(60)
        else:
            # The records are acknowledged by every ISR member before the abort.
            fully_replicated(ctx, c, topic, [1, 2, 3], acked_end(ctx.history.snapshot()))
            producer.abort_transaction(60)
        ctx.event(f"transaction of {n} records {'committed' if commit else 'aborted'}")
    transaction("aborted", commit=False)
    transaction("committed", commit=True)
    login = c.client_props
    uncommitted = read_isolated(c.bootstrap_servers, topic, [0], "read_uncommitted", client_props=login)[0]
    committed = read_isolated(c.bootstrap_servers, topic, [0], "read_committed", client_props=login)[0]
    seen_aborted = sum(1 for v in uncommitted if v is not None and v.startswith(b"aborted:"))
    ctx.extra.update(aborted_seen_read_uncommitted=seen_aborted,
                     aborted_seen_read_committed=sum(1 for v in committed if v.startswith(b"aborted:")))
    ctx.check("read_uncommitted sees every record of the aborted transaction (the hazard)",
              seen_aborted == n, f"{seen_aborted} of {n}")
    ctx.check("read_committed sees exactly the committed transaction",
              committed == [f"committed:{i}".encode() for i in range(n)], f"{len(committed)} records")
    ctx.note(f"{seen_aborted} aborted records visible to read_uncommitted, none to read_committed")
    ctx.read_back(c, topic, [0])


LOSS_SCENARIOS = [
    Scenario("L1", "acks=0; the leader dies while producing", Expect(lost=">0"), l1),
    Scenario("L2", "acks=1; followers paused, leader-only acks, leader SIGKILLed, followers resumed",
             Expect(lost=">0"), l2),
    Scenario("L3", "acks=all, min.insync=1, unclean on; ISR shrinks to the leader; leader dies",
             Expect(lost=">0"), l3),
    Scenario("L4", "unclean on; all replicas down; the stale follower returns first", Expect(lost=">0"), l4),
    Scenario("L5", "consumer auto-commit (100 ms) crashes after the commit, before processing", Expect(), l5),
    Scenario("L6", "acks=all, min.insync=2; kill 2 of 3 brokers", Expect(), l6),
    Scenario("L7", "transactions; an aborted transaction read with read_uncommitted and read_committed",
             Expect(), l7),
]
