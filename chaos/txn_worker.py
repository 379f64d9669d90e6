"""A transactional consume-transform-produce process for N12, SIGKILLed by the scenario.

    python -m chaos.txn_worker --bootstrap B --group G --input T --output T2
        --transactional-id ID --out FILE [--batch 20] [--process-ms 5]

confluent-kafka (librdkafka) as Kafka's exactly-once recipe has it: a consumer in a group
reading with read_committed and not committing by itself, and a transactional producer
that writes each input record to the output topic (same partition, key and value) and
commits the consumed offsets in the same transaction (``send_offsets_to_transaction``).
A restarted worker uses the same transactional id, so its ``init_transactions`` fences
the killed one and aborts whatever that one left open.

The log file is the story the scenario reads (lines unbuffered, so SIGKILL loses none):

    S <pid>                    started, after init_transactions
    B <n> <records>            transaction n began (its records are about to be produced)
    W <n>                      transaction n: its first half is written to the output log (flushed)
    E <n>                      transaction n: about to call commit_transaction
    C <n>                      transaction n committed
    A <n> <error>              transaction n aborted (the consumer rewound to the committed offsets)
    H <n> <call>               a transactional call outlived its own timeout by 30 s: the worker
                               exits (librdkafka #5456/#5511: send_offsets_to_transaction can
                               block for ever once the group coordinator's broker is gone), as a
                               supervisor's liveness check would end it; the scenario restarts it
    X                          closed cleanly (SIGTERM)
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--process-ms", type=float, default=5.0)
    ap.add_argument("--client-properties", help="a secured cluster's client properties file")
    args = ap.parse_args(argv)
    from clients.properties import load_properties
    login = load_properties(args.client_properties) if args.client_properties else {}

    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True
    signal.signal(signal.SIGTERM, on_term)

    consumer = Consumer({
        **login, "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
        "max.poll.interval.ms": 60000, "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000, "log_level": 2,
    })
    producer = Producer({
        **login, "bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
        "transaction.timeout.ms": 20000, "linger.ms": 5, "log_level": 2,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    producer.init_transactions(60)

    def rewind() -> None:
        """Back to the group's committed offsets: an aborted transaction's records are read again."""
        assigned = consumer.assignment()
        if assigned:
            for tp in consumer.committed(assigned, timeout=30):
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    consumer.subscribe([args.input])
    n = 0
    with open(args.out, "a", buffering=1) as out:

        def watched(call: str, fn, *fn_args):  # type: ignore[no-untyped-def]
            """``fn`` (given a 60 s timeout), or the process ends 30 s after that."""
            def hung() -> None:
                out.write(f"H {n} {call}\n")
                os._exit(4)
            dog = threading.Timer(90, hung)
            dog.daemon = True
            dog.start()
            try:
                return fn(*fn_args)
            finally:
                dog.cancel()

        out.write(f"S {os.getpid()}\n")
        while not stop:
            msgs = [m for m in consumer.consume(num_messages=args.batch, timeout=0.3) if m.error() is None]
            if not msgs:
                continue
            n += 1
            producer.begin_transaction()
            out.write(f"B {n} {len(msgs)}\n")
            ends: dict[int, int] = {}
            for i, m in enumerate(msgs):
                time.sleep(args.process_ms / 1000)
                producer.produce(args.output, value=m.value(), key=m.key(), partition=m.partition())
                ends[m.partition()] = m.offset() + 1
                if i == len(msgs) // 2:
                    # In the log, inside the open transaction: what a kill now leaves behind
                    # must be aborted (and seen by read_uncommitted readers only).
                    producer.flush(60)
                    out.write(f"W {n}\n")
            offsets = [TopicPartition(args.input, p, o) for p, o in sorted(ends.items())]
            try:
                watched("send_offsets_to_transaction", producer.send_offsets_to_transaction,
                        offsets, consumer.consumer_group_metadata(), 60)
                out.write(f"E {n}\n")
                while True:
                    try:
                        watched("commit_transaction", producer.commit_transaction, 60)
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable():
                            raise
                out.write(f"C {n}\n")
            except KafkaException as e:
                err = e.args[0]
                if err.fatal():
                    out.write(f"F {n} {err}\n")
                    return 3
                # Abortable (a rebalance took the group's generation, a coordinator moved):
                # abort and read the same input again.
                watched("abort_transaction", producer.abort_transaction, 60)
                rewind()
                out.write(f"A {n} {err.name()}\n")
        consumer.close()
        out.write("X\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
