"""N17 (SCENARIOS.md): delayed delivery while the delay store's leader is SIGKILLed.

An unmodified producer (confluent-kafka, idempotent, acks=all) writes records whose
``ketch.deliver.at`` is spread over ``SPREAD_S`` seconds to a 3-partition topic; a
read_committed consumer notes when each arrives. The delay store has one partition here,
so one broker delivers everything: it is SIGKILLed when half the records are delivered,
and later restarted. Every record must arrive exactly once and none before its time; the
lateness (arrival - due) p50/p99/max and the time without deliveries are reported. The
target topic is then read back and its replicas compared (the holes and empty batches
the parked records leave must be the same on every replica).
"""
from __future__ import annotations

import threading
import time

from chaos.cluster import wait_until
from chaos.faults import Kill, Restart
from chaos.scenarios.base import Context, Scenario
from chaos.checker import Expect

__all__ = ["DELAYED_SCENARIOS"]

STORE = "__ketch_delayed_delivery"
SPREAD_S = 20.0


def _now_ms() -> int:
    return int(time.time() * 1000)


def _pct(xs: list[int], q: int) -> int:
    return xs[min(len(xs) - 1, len(xs) * q // 100)] if xs else -1


def n17(ctx: Context) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP
    records = ctx.profile.records * 20          # full: 4,000; ci: 1,000
    c = ctx.cluster(broker_props={"ketch.delayed.delivery.topic.partitions": "1"})
    topic = "n17"
    c.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
    bootstrap = c.bootstrap_servers
    arrived: dict[bytes, list[int]] = {}
    stop = threading.Event()

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "n17", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 50, "isolation.level": "read_committed"})
        consumer.assign([CTP(topic, p, 0) for p in range(3)])
        while not stop.is_set():
            for m in consumer.consume(500, 0.1):
                if m.error() is None:
                    arrived.setdefault(m.value(), []).append(_now_ms())
        consumer.close()
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    ctx.closing(stop.set)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    errors: list[str] = []
    due: dict[bytes, int] = {}
    t0 = _now_ms() + 3000
    for i in range(records):
        when = t0 + int(i * SPREAD_S * 1000 / records)
        value = f"n17-{i}".encode()
        due[value] = when
        producer.produce(topic, value=value, key=value, headers=[("ketch.deliver.at", str(when).encode())],
                         on_delivery=lambda err, msg: err is not None and errors.append(str(err)))
        producer.poll(0)
    producer.flush(120)
    ctx.note(f"{records} delayed records produced by t0{_now_ms() - t0:+d} ms; errors: {errors[:3]}")
    ctx.check("every delayed record was acknowledged", not errors, f"{len(errors)} errors")

    wait_until(lambda: _now_ms() >= t0 + SPREAD_S * 500 and len(arrived) >= records // 2, SPREAD_S + 120,
               "half the records delivered")
    victim = c.leader_of(STORE, 0)
    pending = records - len(arrived)
    killed_at = _now_ms()
    ctx.inject(c, Kill(victim))
    wait_until(lambda: len(arrived) >= records, SPREAD_S + 180, f"all {records} delivered")
    time.sleep(2.0)                               # a duplicate would arrive within this
    ctx.inject(c, Restart(victim))
    stop.set()
    reader.join(10)

    dupes = sum(len(ts) - 1 for ts in arrived.values())
    early = sum(1 for v, ts in arrived.items() if ts[0] < due[v])
    missing = sum(1 for v in due if v not in arrived)
    late = sorted(ts[0] - due[v] for v, ts in arrived.items())
    late_after = sorted(ts[0] - due[v] for v, ts in arrived.items() if due[v] >= killed_at)
    # The longest pause in deliveries after the kill: the failover as consumers see it.
    times = sorted(ts[0] for ts in arrived.values() if ts[0] >= killed_at)
    gap_s = round(max((b - a for a, b in zip([killed_at] + times, times)), default=0) / 1000, 2)
    ctx.extra.update(delayed_records=records, pending_at_kill=pending, store_leader_killed=victim,
                     longest_pause_after_kill_s=gap_s, lateness_ms_p50=_pct(late, 50),
                     lateness_ms_p99=_pct(late, 99), lateness_ms_max=late[-1] if late else -1,
                     lateness_after_kill_ms_p99=_pct(late_after, 99), duplicates=dupes, early=early,
                     missing=missing)
    ctx.note(f"store leader {victim} SIGKILLed with {pending} pending; longest pause in deliveries after it "
             f"{gap_s} s; "
             f"lateness p50 {_pct(late, 50)} ms, p99 {_pct(late, 99)} ms, max {late[-1] if late else -1} ms")
    ctx.check("exactly once: every delayed record delivered", missing == 0, f"{missing} missing")
    ctx.check("exactly once: none delivered twice", dupes == 0, f"{dupes} duplicates")
    ctx.check("none delivered before its time", early == 0, f"{early} early")
    ctx.read_back(c, topic, [0, 1, 2])


DELAYED_SCENARIOS = [
    Scenario("N17", "delayed delivery: SIGKILL the delay store's leader while records are pending",
             # phantom: the records are written by the scenario's own producer, not through
             # the History; its checks above count them instead.
             Expect(phantom_zero=False), n17),
]
