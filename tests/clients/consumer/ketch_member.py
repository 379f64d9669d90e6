"""One Ketch group consumer (the blocking ``clients.Consumer``) as a process, for the group
tests. It writes JSON lines in the format of tests/integration_groups/group_consumer.py:

- ``{"ev": "start", "pid": ...}`` once;
- ``{"ev": "assigned"|"revoked"|"lost", "partitions": [...], "generation": g}`` from the
  rebalance listener (which runs in this thread, inside poll());
- ``{"ev": "record", "p": partition, "o": offset, "v": value}`` per record handed out;
- ``{"ev": "committed", "offsets": {p: next}}`` after each synchronous commit;
- ``{"ev": "closed"}`` after ``close()`` when stdin says ``close``.

Every line carries ``t`` (wall time), for reading a failure.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import sys
import time

from clients import Consumer
from clients.errors import CommitFailedError, RebalanceInProgressError


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "group", "topic", "client-id", "out", "assignor"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--instance-id")
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=300)
    ap.add_argument("--max-poll-records", type=int, default=50)
    args = ap.parse_args()
    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def emit(ev: str, **fields) -> None:
        os.write(fd, (json.dumps({"ev": ev, **fields, "t": round(time.time(), 3)}) + "\n").encode())

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.client_id,
        "group.instance.id": args.instance_id, "partition.assignment.strategy": args.assignor,
        "session.timeout.ms": args.session_timeout_ms, "heartbeat.interval.ms": args.heartbeat_interval_ms,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "max.poll.records": args.max_poll_records, "fetch.max.wait.ms": 200,
    })

    class Listener:
        def on_partitions_assigned(self, c, partitions):
            emit("assigned", partitions=sorted(tp.partition for tp in partitions), generation=c.generation_id)

        def on_partitions_revoked(self, c, partitions):
            emit("revoked", partitions=sorted(tp.partition for tp in partitions), generation=c.generation_id)

        def on_partitions_lost(self, c, partitions):
            emit("lost", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([args.topic], listener=Listener())
    emit("start", pid=os.getpid())
    while True:
        if select.select([sys.stdin], [], [], 0)[0] and sys.stdin.readline().strip() == "close":
            consumer.close()
            emit("closed")
            return
        records = consumer.poll(timeout_ms=200)
        for r in records:
            emit("record", p=r.partition, o=r.offset, v=r.value.decode())
        if records:
            offsets = {}
            for r in records:
                offsets[(r.topic, r.partition)] = r.offset + 1
            try:
                consumer.commit(offsets)
                emit("committed", offsets={str(p): o for (_, p), o in offsets.items()})
            except (CommitFailedError, RebalanceInProgressError) as e:
                emit("commit-failed", error=type(e).__name__)


if __name__ == "__main__":
    main()
