"""One group consumer in its own process, driven by the group tests; not a test module.

It runs an unmodified client library (kafka-python, aiokafka or confluent-kafka) as a
member of a consumer group and reports what happens as JSON lines appended to ``--out``,
one ``os.write`` per line so that a SIGKILL loses nothing already reported (the data is
in the kernel's page cache once ``write`` returns):

- ``{"ev": "start", "pid": ...}`` once;
- ``{"ev": "assigned"|"revoked", "partitions": [...]}`` from the library's rebalance
  callbacks (incremental for cooperative-sticky, the whole set for the eager protocols);
- ``{"ev": "record", "p": partition, "o": offset, "v": value}`` when a record is
  *processed*: writing this line is the processing;
- ``{"ev": "committed", "offsets": {p: next_offset}}`` after a successful synchronous
  commit (manual mode, after each processed batch), ``{"ev": "commit-failed", ...}`` when
  the commit was refused (a rebalance under way: the records will come again);
- ``{"ev": "midbatch", ...}`` with ``--pause-at N``: after N processed records, at the first
  point inside a polled batch (records of the batch still unprocessed, processed records
  not yet committed) the consumer reports and stops making progress, keeping its group
  session, so that the test can SIGKILL it mid-batch;
- ``{"ev": "polled", "records": [[p, o, v], ...]}`` and ``{"ev": "autocommitted", ...}``
  with ``--hold-after-autocommit`` (confluent-kafka only): the consumer takes one batch
  from ``consume()``, does *not* process it, waits until the automatic commit has covered
  it (asked of the coordinator with ``committed()``), reports, and waits to be killed;
- ``{"ev": "closed"}`` after ``close()`` (a clean LeaveGroup), when stdin says ``close``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from typing import Any, Callable


class Reporter:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, ev: str, **fields: Any) -> None:
        line = {"ev": ev, **fields, "t": round(time.time(), 3)}     # t: for reading a failure
        os.write(self.fd, (json.dumps(line) + "\n").encode())


def watch_stdin(stop: threading.Event, on_stop: Callable[[], None] = lambda: None) -> None:
    """``close`` on stdin (or stdin closing) asks for a clean close."""
    def run() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        stop.set()
        on_stop()
    threading.Thread(target=run, name="stdin", daemon=True).start()


class Processor:
    """Processing shared by the libraries: report each record, pause mid-batch on request."""

    def __init__(self, report: Reporter, pause_at: int | None) -> None:
        self.report = report
        self.pause_at = pause_at
        self.processed = 0
        self.uncommitted: dict[int, int] = {}    # partition -> next offset, processed since the last commit

    def process_batch(self, records: list[tuple[int, int, str]]) -> bool:
        """True when the consumer must pause here (mid-batch); the caller then blocks."""
        for i, (p, o, v) in enumerate(records):
            self.report("record", p=p, o=o, v=v)
            self.processed += 1
            self.uncommitted[p] = o + 1
            if (self.pause_at is not None and self.processed >= self.pause_at
                    and i < len(records) - 1):
                self.report("midbatch", processed=self.processed,
                            uncommitted={str(k): v for k, v in self.uncommitted.items()},
                            unprocessed=[[q, r] for q, r, _ in records[i + 1:]])
                return True
        return False

    def committed(self) -> None:
        self.report("committed", offsets={str(k): v for k, v in self.uncommitted.items()})
        self.uncommitted.clear()


# ------------------------------------------------------------------ kafka-python


def recover_lost_rejoin(consumer: Any, report: Reporter) -> None:
    """Work around a kafka-python 3.0.12 bug (client side, not the broker's).

    The first JoinGroup goes out before kafka-python has built its metadata snapshot of
    the subscription, so a leader's first assignment records an empty snapshot and the
    next metadata update triggers a rejoin through ``assignment_snapshot !=
    metadata_snapshot`` alone, without setting ``rejoin_needed``. When the leader performs
    the new assignment, the snapshots match again and ``need_rejoin()`` turns False while
    the JoinGroup/SyncGroup task is still in flight; if ``poll()``'s timeout expires right
    then, no later poll awaits that task: the assignment is never applied, heartbeats stay
    disabled, and the session expires while the consumer spins in ``need_rejoin()``. The
    Java client fixed the same hole with KAFKA-9815 (``requestRejoin()`` on a metadata
    change); this does that from outside, only in that state."""
    coordinator = consumer._coordinator
    if getattr(coordinator, "_join_task", None) is not None and not coordinator.need_rejoin():
        report("kafka-python-rejoin-recovered")
        coordinator.request_rejoin()



def run_kafka_python(args: argparse.Namespace, report: Reporter) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import CommitFailedError, KafkaError

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[args.assignor]

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            report("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            report("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap.split(","), group_id=args.group, client_id=args.client_id,
        auto_offset_reset="earliest", enable_auto_commit=args.commit == "auto",
        auto_commit_interval_ms=args.auto_commit_interval_ms,
        session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=args.heartbeat_interval_ms,
        max_poll_records=args.max_poll_records, partition_assignment_strategy=[assignor],
        fetch_max_wait_ms=200)
    consumer.subscribe([args.topic], listener=Listener())
    stop = threading.Event()
    watch_stdin(stop)
    proc = Processor(report, args.pause_at)
    while not stop.is_set():
        polled = consumer.poll(timeout_ms=200)
        recover_lost_rejoin(consumer, report)
        records = [(r.partition, r.offset, r.value.decode()) for rs in polled.values() for r in rs]
        if proc.process_batch(records):
            threading.Event().wait()                # paused mid-batch until SIGKILL
        if records and args.commit == "manual":
            try:
                consumer.commit()
                proc.committed()
            except (CommitFailedError, KafkaError) as e:
                report("commit-failed", error=repr(e))
    consumer.close()
    report("closed")


# ------------------------------------------------------------------ aiokafka


async def run_aiokafka(args: argparse.Namespace, report: Reporter) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import CommitFailedError, KafkaError

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[args.assignor]

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            report("revoked", partitions=sorted(tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned):
            report("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
        auto_offset_reset="earliest", enable_auto_commit=args.commit == "auto",
        auto_commit_interval_ms=args.auto_commit_interval_ms,
        session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=args.heartbeat_interval_ms,
        max_poll_records=args.max_poll_records, partition_assignment_strategy=(assignor,),
        fetch_max_wait_ms=200)
    consumer.subscribe([args.topic], listener=Listener())
    stop = threading.Event()
    watch_stdin(stop)
    await consumer.start()
    proc = Processor(report, args.pause_at)
    while not stop.is_set():
        polled = await consumer.getmany(timeout_ms=200)
        records = [(r.partition, r.offset, r.value.decode()) for rs in polled.values() for r in rs]
        if proc.process_batch(records):
            await asyncio.Event().wait()            # paused; heartbeats go on in this loop
        if records and args.commit == "manual":
            try:
                await consumer.commit()
                proc.committed()
            except (CommitFailedError, KafkaError) as e:
                report("commit-failed", error=repr(e))
    await consumer.stop()
    report("closed")


# ------------------------------------------------------------------ confluent-kafka


def run_confluent(args: argparse.Namespace, report: Reporter) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.client_id,
        "auto.offset.reset": "earliest", "enable.auto.commit": args.commit == "auto",
        "auto.commit.interval.ms": args.auto_commit_interval_ms, "fetch.wait.max.ms": 200,
    }
    if args.group_protocol == "consumer":
        # KIP-848: the coordinator assigns and times sessions; the classic knobs are refused.
        config.update({"group.protocol": "consumer", "group.remote.assignor": args.assignor})
    else:
        config.update({"session.timeout.ms": args.session_timeout_ms,
                       "heartbeat.interval.ms": args.heartbeat_interval_ms,
                       "partition.assignment.strategy": args.assignor})
    consumer = Consumer(config)

    def on_assign(c, partitions):
        report("assigned", partitions=sorted(tp.partition for tp in partitions))

    def on_revoke(c, partitions):
        report("revoked", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    stop = threading.Event()
    watch_stdin(stop)

    def poll_batch(timeout_s: float) -> list[tuple[int, int, str]]:
        out = []
        for m in consumer.consume(num_messages=args.max_poll_records, timeout=timeout_s):
            if m.error() is None:
                out.append((m.partition(), m.offset(), m.value().decode()))
            else:
                report("error", error=str(m.error()))
        return out

    if args.hold_after_autocommit:
        records: list[tuple[int, int, str]] = []
        while not records:
            records = poll_batch(1.0)
        report("polled", records=[list(r) for r in records])
        want: dict[int, int] = {}
        for p, o, _ in records:
            want[p] = max(want.get(p, 0), o + 1)
        while True:     # the auto-commit timer runs in librdkafka's own thread
            got = consumer.committed([TopicPartition(args.topic, p) for p in want], timeout=10)
            have = {tp.partition: tp.offset for tp in got}
            if have == want:
                report("autocommitted", offsets={str(k): v for k, v in want.items()})
                threading.Event().wait()            # crash here: polled, committed, never processed
            stop.wait(0.05)

    proc = Processor(report, args.pause_at)
    while not stop.is_set():
        records = poll_batch(0.2)
        if proc.process_batch(records):
            threading.Event().wait()                # paused mid-batch until SIGKILL
        if records and args.commit == "manual":
            try:
                consumer.commit(asynchronous=False)
                proc.committed()
            except KafkaException as e:
                report("commit-failed", error=str(e))
    consumer.close()
    report("closed")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True, choices=["kafka-python", "aiokafka", "confluent"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--client-id", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--assignor", default="range")
    ap.add_argument("--commit", choices=["auto", "manual"], default="manual")
    ap.add_argument("--auto-commit-interval-ms", type=int, default=200)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=300)
    ap.add_argument("--max-poll-records", type=int, default=50)
    ap.add_argument("--pause-at", type=int, default=None)
    ap.add_argument("--hold-after-autocommit", action="store_true")
    ap.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic")
    args = ap.parse_args()
    if args.group_protocol == "consumer" and args.client != "confluent":
        ap.error("--group-protocol consumer: only confluent-kafka (librdkafka) speaks KIP-848 here")
    if args.hold_after_autocommit and args.client != "confluent":
        ap.error("--hold-after-autocommit needs confluent-kafka's background auto-commit")
    # The libraries' own account of joins and assignments, on stderr, for reading a failure.
    logging.basicConfig(level=os.environ.get("KETCH_GROUP_TEST_LOG", "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    report = Reporter(args.out)
    report("start", pid=os.getpid())
    if args.client == "kafka-python":
        run_kafka_python(args, report)
    elif args.client == "aiokafka":
        asyncio.run(run_aiokafka(args, report))
    else:
        run_confluent(args, report)


if __name__ == "__main__":
    main()
