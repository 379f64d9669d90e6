"""Benchmark: the cost of applying committed metadata batches, in process (no cluster).

What a controller and a broker do with every committed batch of the metadata log, replayed
the way they replay it (issue 22, "Metadata at scale"):

- controller: ``QuorumController.replay_encoded`` (decode the framed records, replay them
  into a ``MetadataDelta``, apply it, move the ``BrokersToPartitions`` index) and
  ``MetadataLogReader.batch_bytes`` (the v2 record batch the brokers fetch, built once);
- broker: ``decode_batches`` of those bytes and ``MetadataImageListener.handle_commit``
  (decode, replay, apply).

Workload for N partitions, RF 3 on 3 brokers, topics of ``--partitions-per-topic``:

1. create: CreateTopics decided by the controller, ``--partitions-per-request`` per batch;
2. isr: every partition whose ISR holds broker 2 and that broker 2 does not lead drops it,
   then takes it back (AlterPartition from the leaders, 1,000 partitions per request);
3. fence: broker 2's session expires and the controller's polls fence it (its leaderships
   move, it leaves every ISR), then its heartbeat unfences it;
   the leaders take it back into the ISRs (AlterPartition) and the preferred leaders are
   elected back (the periodic scan, ``elections_per_poll_max`` per batch).

The decisions are not timed (they are the controller's, once per batch); the apply is, in
CPU time of this thread (the machine is shared).
Printed per size and phase: records, batches, µs per partition record on the controller
and on a broker, the longest single batch; then the growth of µs/record from the smallest
size to the largest (goal ~1x: apply proportional to what a batch changes). Last line: JSON.

``--tick-probe``: the same apply at the first size, with a thread doing what pysyncobj's tick
thread does each tick (poll a socket with the tick period as timeout, encrypt and decrypt
three messages with Fernet as its transport does with the cluster secret, send and receive
them over a socket pair, fdatasync a journal file): each such step gives up the GIL and must
win it back from the thread applying batches. Printed for several ``sys.setswitchinterval``
values: the tick durations beyond the poll timeout (p50, p99, max) and how many exceed the
election timeouts considered (150 ms, 300 ms, 1 s).

Usage: python bench/metadata_apply.py [--sizes 10000,100000] [--partitions-per-topic 100]
       python bench/metadata_apply.py --tick-probe [--sizes 10000]
"""
from __future__ import annotations

import argparse
import gc
import json
import pathlib
import random
import sys
import time
import uuid
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from broker.metadata_follower import MetadataImageListener  # noqa: E402
from clients.protocol import messages  # noqa: E402
from clients.records import decode_batches  # noqa: E402
from metadata_log.committed import CommittedBatch  # noqa: E402
from metadata_log.records import encode_record  # noqa: E402
from quorum.controller import ControllerConfig, QuorumController  # noqa: E402
from quorum.server import MetadataLogReader  # noqa: E402

M = messages
BROKERS = (0, 1, 2)
ALTER_PER_REQUEST = 1000


class Phase:
    def __init__(self) -> None:
        self.records = 0
        self.batches = 0
        self.controller_s = 0.0
        self.broker_s = 0.0
        self.controller_max_s = 0.0
        self.broker_max_s = 0.0

    def as_dict(self) -> dict[str, Any]:
        n = max(1, self.records)
        return {"records": self.records, "batches": self.batches,
                "controller_us_per_record": self.controller_s / n * 1e6,
                "broker_us_per_record": self.broker_s / n * 1e6,
                "controller_batch_max_ms": self.controller_max_s * 1000,
                "broker_batch_max_ms": self.broker_max_s * 1000}


class Bench:
    """A controller and a broker's listener fed the same committed batches."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.controller = QuorumController(config, random.Random(0))
        self.reader = MetadataLogReader()
        self.broker = MetadataImageListener()
        self.now_ms = 1_000_000
        self.next_offset = 0
        self.phase = Phase()
        self.controller.activate(self.now_ms)
        self.poll()

    def commit(self, records: tuple[Any, ...]) -> None:
        if not records:
            return
        framed = [encode_record(r) for r in records]
        batch = CommittedBatch(self.next_offset, 1, self.now_ms, tuple(framed))
        self.next_offset = batch.next_offset
        t0 = time.thread_time()
        outcome = self.controller.replay_encoded(batch.records, batch.last_offset, batch.epoch)
        data = self.reader.batch_bytes(batch)
        t1 = time.thread_time()
        assert outcome.error is None, outcome.error
        for b in decode_batches(data):
            self.broker.handle_commit(CommittedBatch(
                b.header.base_offset, b.header.partition_leader_epoch,
                b.records[0].timestamp, tuple(r.value or b"" for r in b.records)))
        self.broker.take_changes()
        t2 = time.thread_time()
        ph = self.phase
        ph.records += len(records)
        ph.batches += 1
        ph.controller_s += t1 - t0
        ph.broker_s += t2 - t1
        ph.controller_max_s = max(ph.controller_max_s, t1 - t0)
        ph.broker_max_s = max(ph.broker_max_s, t2 - t1)

    def poll(self) -> int:
        result, _ = self.controller.poll(self.now_ms)
        self.commit(result.records)
        return len(result.records)

    def register(self, broker_id: int) -> None:
        R = M.BrokerRegistrationRequest
        request = R(broker_id=broker_id, cluster_id="",
                    incarnation_id=uuid.UUID(int=broker_id + 1, version=4),
                    listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1",
                                          port=9000 + broker_id, security_protocol=0)],
                    features=[R.Feature(name="metadata.version", min_supported_version=1,
                                        max_supported_version=self.config.metadata_version)])
        self.commit(self.controller.handle_broker_registration(request, self.now_ms).records)
        self.heartbeat(broker_id)

    def heartbeat(self, broker_id: int) -> Any:
        b = self.controller.image.cluster.get(broker_id)
        assert b is not None
        request = M.BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=b.broker_epoch,
            current_metadata_offset=self.next_offset - 1)
        result = self.controller.handle_broker_heartbeat(request, self.now_ms)
        self.commit(result.records)
        return result.response

    def create(self, partitions: int, per_topic: int, per_request: int) -> None:
        R = M.CreateTopicsRequest
        topics = [(f"t{i:06d}", min(per_topic, partitions - i * per_topic))
                  for i in range((partitions + per_topic - 1) // per_topic)]
        chunk: list[Any] = []
        count = 0
        for name, n in topics:
            chunk.append(R.CreatableTopic(name=name, num_partitions=n, replication_factor=3))
            count += n
            if count >= per_request:
                self._create(chunk)
                chunk, count = [], 0
        if chunk:
            self._create(chunk)

    def _create(self, topics: list[Any]) -> None:
        result = self.controller.handle_create_topics(M.CreateTopicsRequest(topics=topics),
                                                      self.now_ms)
        assert all(t.error_code == 0 for t in result.response.topics), result.response
        self.commit(result.records)

    def alter_isr(self, broker_id: int, add: bool) -> None:
        """Every leader other than ``broker_id`` drops it from (or adds it to) the ISRs."""
        R = M.AlterPartitionRequest
        image = self.controller.image
        by_leader: dict[int, list[tuple[uuid.UUID, int, Any]]] = {}
        for t in image.topics.by_id.values():
            for i, p in t.partitions.items():
                if p.leader == broker_id or broker_id not in p.replicas:
                    continue
                if add == (broker_id in p.isr):
                    continue
                isr = ([b for b in p.replicas if b in p.isr or b == broker_id] if add
                       else [b for b in p.isr if b != broker_id])
                by_leader.setdefault(p.leader, []).append((t.topic_id, i, (p, isr)))
        for leader, parts in by_leader.items():
            for start in range(0, len(parts), ALTER_PER_REQUEST):
                image = self.controller.image
                topics: dict[uuid.UUID, list[Any]] = {}
                for tid, i, (p, isr) in parts[start:start + ALTER_PER_REQUEST]:
                    topics.setdefault(tid, []).append(R.PartitionData(
                        partition_index=i, leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch,
                        leader_recovery_state=int(p.leader_recovery_state),
                        new_isr_with_epochs=[R.BrokerState(
                            broker_id=b, broker_epoch=image.cluster.brokers[b].broker_epoch)
                            for b in isr]))
                request = R(broker_id=leader,
                            broker_epoch=image.cluster.brokers[leader].broker_epoch,
                            topics=[R.TopicData(topic_id=tid, partitions=ps)
                                    for tid, ps in topics.items()])
                self.commit(self.controller.handle_alter_partition(request, self.now_ms).records)

    def fence(self, broker_id: int) -> None:
        """``broker_id``'s session expires: the controller's polls fence it and move its
        partitions (in as many batches as the controller makes)."""
        self.now_ms += self.config.broker_session_timeout_ms
        while True:
            for b in BROKERS:
                if b != broker_id:
                    self.heartbeat(b)
            if not self.poll():
                break
        assert self.controller.image.cluster.brokers[broker_id].fenced

    def elect_preferred(self) -> None:
        """The controller's polls until nothing is left: the follow-ups of the ISR
        changes elect the preferred leaders back (the brokers heartbeat meanwhile)."""
        while True:
            for b in BROKERS:
                self.heartbeat(b)
            if not self.poll():
                return

    def run_phase(self, name: str, work: Any, results: dict[str, Any]) -> None:
        self.phase = Phase()
        work()
        results[name] = self.phase.as_dict()


def run(size: int, per_topic: int, per_request: int) -> dict[str, Any]:
    config = ControllerConfig(default_replication_factor=3)
    bench = Bench(config)
    for b in BROKERS:
        bench.register(b)
    results: dict[str, Any] = {}
    bench.run_phase("create", lambda: bench.create(size, per_topic, per_request), results)
    bench.run_phase("isr_shrink", lambda: bench.alter_isr(2, add=False), results)
    bench.run_phase("isr_expand", lambda: bench.alter_isr(2, add=True), results)
    bench.run_phase("fence", lambda: bench.fence(2), results)
    bench.run_phase("unfence", lambda: bench.heartbeat(2), results)
    bench.run_phase("rejoin_isr", lambda: bench.alter_isr(2, add=True), results)
    bench.run_phase("preferred_elections", bench.elect_preferred, results)
    assert bench.broker.image.topics.partition_count() == size
    return results


def tick_probe(size: int, per_topic: int, per_request: int,
               switch_intervals: list[float]) -> dict[str, Any]:
    import os
    import select
    import socket
    import tempfile
    import threading
    from cryptography.fernet import Fernet
    out: dict[str, Any] = {}
    fernet = Fernet(Fernet.generate_key())
    a, b = socket.socketpair()
    journal = tempfile.NamedTemporaryFile(prefix="tick-probe-")
    period_s = 0.05     # pysyncobj's autoTickPeriod
    default_interval = sys.getswitchinterval()
    for interval in switch_intervals:
        sys.setswitchinterval(interval)
        stop = threading.Event()
        ticks: list[float] = []

        def tick_thread() -> None:
            poller = select.poll()
            poller.register(b, select.POLLIN)
            while not stop.is_set():
                t0 = time.perf_counter()
                poller.poll(period_s * 1000)
                t1 = time.perf_counter()
                for _ in range(3):
                    a.send(fernet.encrypt(b"x" * 200))
                    fernet.decrypt(b.recv(4096))
                os.write(journal.fileno(), b"y" * 100)
                os.fdatasync(journal.fileno())
                ticks.append(time.perf_counter() - t1 + max(0.0, t1 - t0 - period_s))

        thread = threading.Thread(target=tick_thread, daemon=True)
        thread.start()
        run(size, per_topic, per_request)
        stop.set()
        thread.join()
        ticks.sort()
        r = {"ticks": len(ticks), "p50_ms": ticks[len(ticks) // 2] * 1000,
             "p99_ms": ticks[int(len(ticks) * 0.99)] * 1000, "max_ms": ticks[-1] * 1000,
             "over_150ms": sum(t > 0.15 for t in ticks), "over_300ms": sum(t > 0.3 for t in ticks),
             "over_1s": sum(t > 1.0 for t in ticks)}
        out[f"{interval * 1000:g}ms"] = r
        print(f"switch interval {interval * 1000:g} ms: {r['ticks']} ticks, beyond the poll: "
              f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.0f} ms; "
              f"over 150 ms {r['over_150ms']}, 300 ms {r['over_300ms']}, 1 s {r['over_1s']} "
              f"(load average {os.getloadavg()[0]:.1f})", flush=True)
    sys.setswitchinterval(default_interval)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--partitions-per-request", type=int, default=1000)
    parser.add_argument("--profile", help="write a cProfile of the largest size here")
    parser.add_argument("--tick-probe", action="store_true")
    parser.add_argument("--switch-intervals", default="0.005,0.001,0.0005")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.tick_probe:
        print(json.dumps(tick_probe(sizes[0], args.partitions_per_topic,
                                    args.partitions_per_request,
                                    [float(x) for x in args.switch_intervals.split(",")])))
        return
    out: dict[str, Any] = {}
    for size in sizes:
        gc.collect()
        if args.profile and size == sizes[-1]:
            import cProfile
            profiler = cProfile.Profile()
            profiler.enable()
            out[str(size)] = run(size, args.partitions_per_topic, args.partitions_per_request)
            profiler.disable()
            profiler.dump_stats(args.profile)
        else:
            out[str(size)] = run(size, args.partitions_per_topic, args.partitions_per_request)
        for phase, r in out[str(size)].items():
            print(f"{size:>7} {phase:<20} {r['records']:>7} records {r['batches']:>5} batches: "
                  f"controller {r['controller_us_per_record']:6.1f} us/record "
                  f"(max batch {r['controller_batch_max_ms']:6.1f} ms), "
                  f"broker {r['broker_us_per_record']:6.1f} us/record "
                  f"(max batch {r['broker_batch_max_ms']:6.1f} ms)", flush=True)
    if len(sizes) > 1:
        a, b = out[str(sizes[0])], out[str(sizes[-1])]
        growth = {}
        for phase in a:
            for side in ("controller", "broker"):
                key = f"{side}_us_per_record"
                growth[f"{phase}.{side}"] = b[phase][key] / max(a[phase][key], 1e-9)
        print(f"growth of us/record {sizes[0]} -> {sizes[-1]} partitions (goal ~1x): "
              + ", ".join(f"{k} {v:.2f}x" for k, v in growth.items()))
        out["growth"] = growth
    print(json.dumps(out))


if __name__ == "__main__":
    main()
