"""Benchmark: transactional produce on a local 3-controller / 3-broker Ketch cluster (issue 15).

One confluent-kafka (librdkafka) producer, or Ketch's own with ``--client ketch`` (its
idempotent baseline then Ketch's too), 100-byte values, a 6-partition topic with
replication factor 3, acks=all, linger.ms=5, batch.size 1 MiB, no compression:

1. Throughput, records/s: transactions of ``--per-transaction`` (1,000) records, each
   begin -> produce -> commit_transaction, against the **idempotent non-transactional
   producer** (the same settings, no transactional.id) in the same run. Runs alternate and
   the best of ``--repeats`` is compared (on a shared machine other load only ever slows a
   run down; medians are in the JSON too). Goal: ratio >= 0.7.
   Beside each run's records/s, the brokers' CPU time per 1,000 records (user + system,
   from /proc): on a machine whose cores other work keeps busy, throughput follows CPU
   cost, so the ratio of the two CPU figures bounds the throughput ratio however the wall
   clock swings (a transaction pays per-request costs that pipelined idempotent produce
   spreads over far more records: its Produce and marker requests, the
   ``__transaction_state`` writes, and the follower fetches each replicated write takes).
   And the requests the brokers answered per 1,000 records, by kind (FetchFollower apart):
   that cost in messages, which the machine's speed does not move.
2. Commit latency, p50/p99: ``commit_transaction()`` called right after a ``flush()``, so
   the figure is the commit alone (EndTxn, the PrepareCommit write to
   ``__transaction_state``, the markers on the 6 partitions, the CompleteCommit write), not
   the transaction's own records. Beside it, the whole transaction (begin to committed).

3. ``--timeline N``: instead of 1 and 2, N transactions with librdkafka's debug log
   (``debug=eos,protocol``, its own millisecond timestamps) and the median of each step of
   a transaction's critical path as the client sees it: the held AddPartitionsToTxn (the
   previous transaction's markers and CompleteCommit), the Produce phase (its requests
   and their round trips), EndTxn (PrepareCommit). The brokers' side of each step needs
   timestamps in the brokers (see docs/transactions.md).

Usage: python bench/transactions.py [--records 200000] [--per-transaction 1000] [--repeats 3]
       [--client confluent|ketch] [--timeline N]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clients.cli.launcher import LocalCluster  # noqa: E402

# bench/produce.py's producer settings and topic helpers, loaded from its file (bench/ is not a package).
_spec = importlib.util.spec_from_file_location("bench_produce", ROOT / "bench" / "produce.py")
produce = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(produce)

VALUE_BYTES = 100
PARTITIONS = 6


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _KetchProducer:
    """Ketch's own Producer (clients/producer.py) behind the calls this bench makes of
    confluent-kafka's: ``--client ketch``."""

    def __init__(self, config: dict) -> None:
        from clients import Producer
        self._producer = Producer(config)

    def produce(self, topic: str, value: bytes, partition: int | None = None,
                on_delivery=None) -> None:  # type: ignore[no-untyped-def]
        # No per-record callback (the transactional run has none): on Ketch's client one
        # halves the idempotent run. Failures are counted by the client instead (``failed``).
        self._producer.send(topic, value, partition=partition)

    def failed(self) -> int:
        return int(self._producer.metrics["record-error-total"])

    def poll(self, _timeout: float) -> int:
        return 0        # callbacks run on the client's own thread

    def flush(self, timeout: float) -> int:
        self._producer.flush(timeout)
        return 0        # flush waits for every record, acknowledged or failed (``failed``)

    def init_transactions(self, timeout: float) -> None:
        self._producer.init_transactions(timeout)

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    def commit_transaction(self, timeout: float) -> None:
        self._producer.commit_transaction(timeout)

    def close(self) -> None:
        self._producer.close()


CLIENT = "confluent"        # --client


def _producer(bootstrap: str, **extra):  # type: ignore[no-untyped-def]
    if CLIENT == "ketch":
        return _KetchProducer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                               "batch.size": 1 << 20, "compression.type": "none",
                               "enable.idempotence": True, **extra})
    from confluent_kafka import Producer
    return Producer(produce.producer_config(bootstrap, "all", **{"enable.idempotence": True, **extra}))


def _close(producer) -> None:  # type: ignore[no-untyped-def]
    if isinstance(producer, _KetchProducer):
        producer.close()        # its loop thread and connections (librdkafka's go with the object)


BrokerCpu = produce.BrokerCpu      # one home: bench/produce.py


def _cpu_ms_per_1000(cpu: BrokerCpu, before: float, records: int) -> float:
    return round((cpu.seconds() - before) * 1000 * 1000 / records, 1)


class BrokerRequests:
    """Requests the brokers answered, by kind (the counts of bench/produce.py's request
    histograms; FetchFollower apart from FetchConsumer): what a run's records cost in
    messages, a figure that the machine's speed, unlike CPU time, does not move."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def counts(self) -> dict[str, float]:
        return {kind: series.get("count", 0.0)
                for kind, series in produce.request_histograms(self.cluster).items()}

    def per_1000(self, before: dict[str, float], records: int) -> dict[str, float]:
        after = self.counts()
        return {kind: round((n - before.get(kind, 0.0)) * 1000 / records, 1)
                for kind, n in sorted(after.items()) if n > before.get(kind, 0.0)}


def measure_idempotent(bootstrap: str, topic: str, records: int, cpu: BrokerCpu,
                       requests: BrokerRequests) -> dict:
    producer = _producer(bootstrap)
    value = b"x" * VALUE_BYTES
    for _ in range(2000):                      # warm up: metadata, connections, producer id
        producer.produce(topic, value=value)
    producer.flush(60)
    failed: list = []

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            failed.append(err)
    start, cpu_start, requests_before = time.perf_counter(), cpu.seconds(), requests.counts()
    for i in range(records):
        try:
            producer.produce(topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
        if i & 0x3FFF == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    if isinstance(producer, _KetchProducer):
        failed.extend(range(producer.failed()))
    _close(producer)
    return {"records": records, "seconds": round(elapsed, 3), "records_per_s": round(records / elapsed),
            "broker_cpu_ms_per_1000": _cpu_ms_per_1000(cpu, cpu_start, records),
            "broker_requests_per_1000": requests.per_1000(requests_before, records),
            "failed": len(failed) + left}


def one_transaction(producer, topic: str, value: bytes, per_txn: int) -> None:  # type: ignore[no-untyped-def]
    """``per_txn`` records spread over the partitions, then the commit (which flushes)."""
    producer.begin_transaction()
    for i in range(per_txn):
        try:
            producer.produce(topic, value=value, partition=i % PARTITIONS)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, value=value, partition=i % PARTITIONS)
    producer.commit_transaction(60)


def measure_transactional(bootstrap: str, topic: str, records: int, per_txn: int, txn_id: str,
                          cpu: BrokerCpu, requests: BrokerRequests) -> dict:
    producer = _producer(bootstrap, **{"transactional.id": txn_id})
    producer.init_transactions(60)
    value = b"x" * VALUE_BYTES
    producer.begin_transaction()              # warm up, as the idempotent run does
    for _ in range(2000):
        producer.produce(topic, value=value)
    producer.commit_transaction(60)
    transactions = max(1, records // per_txn)
    txn_s: list[float] = []
    start, cpu_start, requests_before = time.perf_counter(), cpu.seconds(), requests.counts()
    for _ in range(transactions):
        t0 = time.perf_counter()
        one_transaction(producer, topic, value, per_txn)
        txn_s.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    cpu_ms = _cpu_ms_per_1000(cpu, cpu_start, transactions * per_txn)
    requests_per_1000 = requests.per_1000(requests_before, transactions * per_txn)
    # Commit latency alone: the records are flushed first.
    commit_s: list[float] = []
    for _ in range(min(transactions, 100)):
        producer.begin_transaction()
        for i in range(per_txn):
            producer.produce(topic, value=value, partition=i % PARTITIONS)
        producer.flush(60)
        t0 = time.perf_counter()
        producer.commit_transaction(60)
        commit_s.append(time.perf_counter() - t0)
    _close(producer)
    done = transactions * per_txn
    return {"records": done, "transactions": transactions, "seconds": round(elapsed, 3),
            "records_per_s": round(done / elapsed), "broker_cpu_ms_per_1000": cpu_ms,
            "broker_requests_per_1000": requests_per_1000,
            "transaction_ms_p50": round(percentile(txn_s, 0.5) * 1000, 2),
            "transaction_ms_p99": round(percentile(txn_s, 0.99) * 1000, 2),
            "commit_ms_p50": round(percentile(commit_s, 0.5) * 1000, 2),
            "commit_ms_p99": round(percentile(commit_s, 0.99) * 1000, 2),
            "commits_measured": len(commit_s)}


# librdkafka's log line for a request sent or a response received (its default logger:
# "%7|<seconds.millis>|SEND|<name>| [thrd:...]: <broker>: Sent AddPartitionsToTxnRequest ...").
_RDKAFKA_REQUEST = re.compile(
    r"^%\d\|(?P<t>[\d.]+)\|(?:SEND|RECV)\|.*?: (?P<dir>Sent|Received) (?P<api>\w+?)(?:Request|Response) ")


@contextlib.contextmanager
def _stderr_to(path: str):  # type: ignore[no-untyped-def]
    """librdkafka's default logger writes to file descriptor 2: point it at ``path``."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(fd)
        os.close(saved)


def measure_timeline(bootstrap: str, topic: str, transactions: int, per_txn: int, log_path: str) -> dict:
    """The client's side of each step of ``transactions`` transactions (medians, ms)."""
    value = b"x" * VALUE_BYTES
    bounds: list[tuple[float, float]] = []
    with _stderr_to(log_path):
        producer = _producer(bootstrap, **{"transactional.id": "timeline", "debug": "eos,protocol"})
        producer.init_transactions(60)
        for k in range(transactions + 2):          # the first two warm up
            t0 = time.time()
            one_transaction(producer, topic, value, per_txn)
            if k >= 2:
                bounds.append((t0, time.time()))
        producer.flush(10)
        del producer
    events = []
    with open(log_path, errors="replace") as f:
        for line in f:
            m = _RDKAFKA_REQUEST.match(line)
            if m:
                events.append((float(m["t"]), m["dir"], m["api"]))
    steps: dict[str, list[float]] = {}

    def add(step: str, seconds: float) -> None:
        steps.setdefault(step, []).append(seconds * 1000)
    for begin, end in bounds:
        # librdkafka stamps whole milliseconds: a little slack at both ends.
        ev = [e for e in events if begin - 0.0005 <= e[0] <= end + 0.0015]
        sent = {api: [t for t, d, a in ev if a == api and d == "Sent"] for api in ("AddPartitionsToTxn", "Produce", "EndTxn")}
        got = {api: [t for t, d, a in ev if a == api and d == "Received"] for api in sent}
        if not (sent["AddPartitionsToTxn"] and sent["Produce"] and sent["EndTxn"]):
            continue
        add_sent = sent["AddPartitionsToTxn"][0]
        add_got = next(t for t in got["AddPartitionsToTxn"] if t >= add_sent)
        end_sent = sent["EndTxn"][-1]
        add("AddPartitionsToTxn round trip (held until the previous transaction is complete)", add_got - add_sent)
        add("first Produce sent -> last Produce answered", max(got["Produce"]) - sent["Produce"][0])
        steps.setdefault("Produce requests", []).append(len(sent["Produce"]))
        add("EndTxn round trip (PrepareCommit written)", next(t for t in got["EndTxn"] if t >= end_sent) - end_sent)
        add("whole transaction", end - begin)
    return {step: round(statistics.median(v), 1) for step, v in steps.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="records per throughput run")
    ap.add_argument("--per-transaction", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeline", type=int, default=0, metavar="N",
                    help="only the critical path of N transactions, from librdkafka's debug log")
    ap.add_argument("--broker-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker property for every broker (repeatable), as in bench/produce.py")
    ap.add_argument("--client", choices=("confluent", "ketch"), default="confluent",
                    help="the producer of both runs: confluent-kafka (librdkafka) or Ketch's own")
    args = ap.parse_args()
    global CLIENT
    CLIENT = args.client
    if args.timeline and CLIENT != "confluent":
        ap.error("--timeline reads librdkafka's debug log: --client confluent only")
    broker_props = dict(kv.split("=", 1) for kv in args.broker_prop)
    result: dict = {"bench": "transactions", "cpus": os.cpu_count(), "python": produce.interpreter(),
                    "value_bytes": VALUE_BYTES, "partitions": PARTITIONS, "records": args.records,
                    "per_transaction": args.per_transaction, "client": CLIENT}
    if broker_props:
        result["broker_props"] = broker_props
    runs_of = f"{args.timeline} transactions" if args.timeline else f"{args.records} records per run"
    print(f"machine: {os.cpu_count()} CPUs, {produce.interpreter()}; {runs_of} of {VALUE_BYTES} B records, "
          f"{args.per_transaction} per transaction; {PARTITIONS} partitions, RF 3, acks=all; "
          f"client {CLIENT}")
    with tempfile.TemporaryDirectory(prefix="ketch-bench-txn-") as d:
        cluster = LocalCluster(d, controllers=3, brokers=3, broker_props=broker_props)
        try:
            cluster.start(timeout_s=120)
            bootstrap = cluster.spec.bootstrap_servers
            produce.create_topics(bootstrap, [("idempotent", PARTITIONS, 3, {}), ("transactional", PARTITIONS, 3, {})])
            for t in ("idempotent", "transactional"):
                produce.wait_in_sync(cluster, t, 3)
            if args.timeline:
                timeline = measure_timeline(bootstrap, "transactional", args.timeline,
                                            args.per_transaction, os.path.join(d, "rdkafka.log"))
                for step, ms in timeline.items():
                    print(f"{step:82s} {ms:>8}")
                result.update(timeline=timeline, transactions=args.timeline)
                print(json.dumps(result))
                return 0
            runs: dict[str, list[dict]] = {"idempotent": [], "transactional": []}
            cpu, requests = BrokerCpu(cluster), BrokerRequests(cluster)
            for r in range(args.repeats):
                runs["idempotent"].append(measure_idempotent(bootstrap, "idempotent", args.records, cpu, requests))
                runs["transactional"].append(measure_transactional(
                    bootstrap, "transactional", args.records, args.per_transaction, f"bench-{r}", cpu, requests))
        finally:
            cluster.stop()
    best = {k: max(v, key=lambda x: x["records_per_s"]) for k, v in runs.items()}
    medians = {k: statistics.median(x["records_per_s"] for x in v) for k, v in runs.items()}
    ratio = round(best["transactional"]["records_per_s"] / best["idempotent"]["records_per_s"], 3)
    median_ratio = round(medians["transactional"] / medians["idempotent"], 3)
    t = best["transactional"]
    cpu_ms = {k: round(statistics.median(x["broker_cpu_ms_per_1000"] for x in v), 1)
              for k, v in runs.items()}
    cpu_ratio = round(cpu_ms["idempotent"] / cpu_ms["transactional"], 3)
    print(f"idempotent acks=all:     {best['idempotent']['records_per_s']:>9,} rec/s "
          f"(runs {[x['records_per_s'] for x in runs['idempotent']]})")
    print(f"transactional acks=all:  {t['records_per_s']:>9,} rec/s "
          f"(runs {[x['records_per_s'] for x in runs['transactional']]}) "
          f"= {ratio} x idempotent (goal >= 0.7; medians: {median_ratio})")
    print(f"broker CPU per 1,000 records (medians): idempotent {cpu_ms['idempotent']} ms, "
          f"transactional {cpu_ms['transactional']} ms: throughput ratio bound on saturated "
          f"cores {cpu_ratio}")
    for kind in ("idempotent", "transactional"):
        counts = runs[kind][-1]["broker_requests_per_1000"]
        print(f"broker requests per 1,000 records ({kind}, last run): "
              + ", ".join(f"{name} {n}" for name, n in counts.items()))
    print(f"commit_transaction after a flush: p50 {t['commit_ms_p50']} ms, p99 {t['commit_ms_p99']} ms "
          f"({t['commits_measured']} commits); whole transaction of {args.per_transaction}: "
          f"p50 {t['transaction_ms_p50']} ms, p99 {t['transaction_ms_p99']} ms")
    result.update(runs=runs, ratio=ratio, median_ratio=median_ratio, cpu_ratio=cpu_ratio)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
