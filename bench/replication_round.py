"""Benchmark: the data-plane cores' CPU for one replication round, without processes.

Why: the brokers' CPU per follower and consumer fetch is what issue 22's latency and issue
15's transactional ratio turn on, and a cluster bench on a shared 2-core machine swings by
tens of percent run to run. This one drives three ``ReplicaManager`` cores (broker 1 leads
--partitions partitions with replicas 1, 2, 3 on real files under a temporary directory)
by hand, as the shells would, and counts process CPU (``time.process_time``) per round:

  the leader appends one 10-record batch (100-byte values) to each partition (acks=all);
  each follower takes its round of work (``follower_work``), the leader reads each
  partition at the follower's fetch offset (``read``, a follower's: its fetch state is
  reported) and copies the bytes, the follower appends them (``handle_fetched``);
  each follower's next fetch offsets are read again (its LEO reported: the HW moves);
  a consumer reads each partition from the old HW and the bytes are copied.

No network, codec, event loop or fetch sessions: the core's part of a follower fetch on
both ends (leader read, follower append) and of a consumer fetch. The least of --repeats
measurements of --rounds rounds is printed (noise only adds CPU); compare trees by running
this file from each tree's root, alternately, in the same window.

Usage: python bench/replication_round.py [--rounds 2000] [--repeats 3] [--partitions 6]
Prints one line, then ONE JSON line. No assertions beyond the reads finding their records.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from broker.log import FileStorage, LogManager  # noqa: E402
from broker.replica_manager import EpochAnswer, FetchedPartition, ReplicaManager  # noqa: E402
from clients.protocol import messages as M  # noqa: E402
from clients.records import Record, build_batch  # noqa: E402
from clients.types import TopicPartition  # noqa: E402
from metadata_log import EMPTY_IMAGE, MetadataDelta, Provenance  # noqa: E402

LEADER, FOLLOWERS = 1, (2, 3)
LEADER_EPOCH = 5
TOPIC_ID = uuid.UUID(int=42)


def cores_for(root: pathlib.Path, partitions: int) -> dict[int, ReplicaManager]:
    delta = MetadataDelta(EMPTY_IMAGE)
    for b in (LEADER, *FOLLOWERS):
        delta.replay(M.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b),
                                            broker_epoch=10 + b, fenced=False))
    delta.replay(M.TopicRecord(name="t", topic_id=TOPIC_ID))
    for p in range(partitions):
        delta.replay(M.PartitionRecord(partition_id=p, topic_id=TOPIC_ID, replicas=[1, 2, 3],
                                       isr=[1, 2, 3], leader=LEADER, leader_epoch=LEADER_EPOCH,
                                       partition_epoch=7))
    image = delta.apply(Provenance(1, 1))
    cores = {}
    for b in (LEADER, *FOLLOWERS):
        logs, _ = LogManager.open(FileStorage(), str(root / f"broker-{b}"), now_ms=0)
        core = cores[b] = ReplicaManager(b, logs, {}, replica_lag_time_max_ms=10_000)
        core.apply_metadata(image, list(delta.changes), 0)
        core.take_effects()
    for b in FOLLOWERS:             # the leader's epoch ends where the empty log does: fetch
        work = cores[b].follower_work(LEADER, 1)
        assert work is not None
        cores[b].handle_epoch_answers(work, [EpochAnswer(q.partition, 0, LEADER_EPOCH, 0)
                                             for q in work.epoch_queries], 1)
        cores[b].take_effects()
    return cores


def one_round(cores: dict[int, ReplicaManager], tps: list[TopicPartition], batch: bytes,
              now: int) -> None:
    leader = cores[LEADER]
    old_hw = {}
    for tp in tps:
        leader.append(tp, batch, -1, now)
        old_hw[tp] = leader.high_watermark_of(tp.topic, tp.partition)
    leader.take_effects()
    for b in FOLLOWERS:
        work = cores[b].follower_work(LEADER, now)
        assert work is not None
        fetched = []
        for position in work.fetches:
            r = leader.read(position.partition, position.fetch_offset, 1 << 20, LEADER_EPOCH, b,
                            now, True)
            data = b"" if r.records is None or r.log is None else r.log.read_records_bytes(r.records)
            fetched.append(FetchedPartition(position.partition, r.error_code, r.high_watermark,
                                            r.log_start_offset, data))
        leader.take_effects()
        cores[b].handle_fetched(work, fetched, now)
        cores[b].take_effects()
    for b in FOLLOWERS:             # the next fetch reports the follower's new LEO
        work = cores[b].follower_work(LEADER, now)
        assert work is not None
        for position in work.fetches:
            leader.read(position.partition, position.fetch_offset, 1 << 20, LEADER_EPOCH, b, now, True)
        leader.take_effects()
    for tp in tps:
        r = leader.read(tp, old_hw[tp], 1 << 20, LEADER_EPOCH, -1, now, True)
        assert r.records is not None and r.log is not None, r
        r.log.read_records_bytes(r.records)
    leader.take_effects()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ketch-round-") as tmp:
        cores = cores_for(pathlib.Path(tmp), args.partitions)
        tps = [TopicPartition("t", p) for p in range(args.partitions)]
        batch = bytes(build_batch([Record(i, 0, None, b"x" * 100) for i in range(10)]))
        now = 2
        for _ in range(200):        # warm up (segments, indexes, caches)
            now += 1
            one_round(cores, tps, batch, now)
        figures = []
        for _ in range(args.repeats):
            started = time.process_time()
            for _ in range(args.rounds):
                now += 1
                one_round(cores, tps, batch, now)
            figures.append((time.process_time() - started) / args.rounds * 1e6)
        for core in cores.values():
            core.shutdown()
    best = min(figures)
    print(f"CPU per replication round ({args.partitions} partitions, 2 followers, a consumer): "
          f"{best:.0f} us (runs {[round(f) for f in figures]})")
    print(json.dumps({"bench": "replication_round", "partitions": args.partitions,
                      "rounds": args.rounds, "cpu_us_per_round": round(best),
                      "runs_us": [round(f) for f in figures]}))


if __name__ == "__main__":
    main()
