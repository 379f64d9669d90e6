"""A group consumer process for N7 and L5, killed with SIGKILL by the scenarios.

    python -m chaos.consumer_worker --bootstrap B --group G --topic T --out FILE
        [--auto-commit-ms N] [--process-ms 10] [--batch 20]

confluent-kafka (librdkafka) in a consumer group. Each record is "processed" slowly (a
sleep), then logged; the log file is the processing history the scenario judges:

    R <partition> <offset> <value>   received from poll (before processing)
    P <partition> <offset> <value>   processed
    C                                a synchronous commit of everything processed succeeded
    E <text>                         a commit failed (a rebalance, a coordinator move)

Without ``--auto-commit-ms`` offsets are committed after each processed batch
(at-least-once, N7); with it, librdkafka commits in the background every N ms whatever
was handed to the application (L5's at-most-once hazard). Lines are written unbuffered,
so a SIGKILL loses none that were written. SIGTERM leaves the group cleanly.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--auto-commit-ms", type=int, default=0)
    ap.add_argument("--process-ms", type=float, default=10.0)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--client-properties", help="a secured cluster's client properties file")
    args = ap.parse_args(argv)
    from clients.properties import load_properties
    login = load_properties(args.client_properties) if args.client_properties else {}

    from confluent_kafka import Consumer, KafkaException

    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True
    signal.signal(signal.SIGTERM, on_term)

    auto = args.auto_commit_ms > 0
    consumer = Consumer({
        **login, "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "enable.auto.commit": auto, "auto.commit.interval.ms": max(args.auto_commit_ms, 100),
        "enable.auto.offset.store": True, "auto.offset.reset": "earliest",
        "session.timeout.ms": 3000, "heartbeat.interval.ms": 300, "max.poll.interval.ms": 60000,
        "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000, "log_level": 2,
    })
    consumer.subscribe([args.topic])
    with open(args.out, "a", buffering=1) as out:
        out.write(f"S {os.getpid()}\n")
        while not stop:
            msgs = [m for m in consumer.consume(num_messages=args.batch, timeout=0.3) if m.error() is None]
            if not msgs:
                continue
            for m in msgs:
                out.write(f"R {m.partition()} {m.offset()} {m.value().decode()}\n")
            for m in msgs:
                time.sleep(args.process_ms / 1000)
                out.write(f"P {m.partition()} {m.offset()} {m.value().decode()}\n")
            if not auto:
                try:
                    consumer.commit(asynchronous=False)
                    out.write("C\n")
                except KafkaException as e:
                    out.write(f"E {e}\n")
        consumer.close()
        out.write("X closed\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
