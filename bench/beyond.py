"""Benchmark: the "beyond Kafka" features of issue 18 on a local cluster.

Built so far: **tag filtering**. A 1-partition topic of ``--records`` records of 100 bytes
(confluent-kafka, linger 20 ms), 1% tagged ``vip``, the rest ``std`` or untagged. Read
from offset 0 to the end twice, in the same run:

1. Bytes the broker sends: a loop of raw Fetch v12 requests (8 MiB per request) with and
   without Ketch's tag field; the ratio filtered / unfiltered (goal <= 0.05 for a 1% tag).
2. Ketch's consumer reading the whole partition with and without ``set_tag_filter``:
   seconds to reach the end, and records/s of the partition scanned (offsets passed per
   second: the filtered reader passes the same offsets while receiving 1% of the records).

3. Delayed delivery: confluent-kafka produces ``--delayed-rate`` records/s (default 5,000)
   for ``--delayed-seconds`` (default 10), each with ``ketch.deliver.at`` = its send time
   + ``--delay-ms`` (default 2,000), to a 3-partition topic; a confluent-kafka consumer
   (read_committed) notes when each arrives. Lateness = arrival - due time: p50/p99/max,
   and whether each arrived exactly once and none early (after one warm-up record, which
   creates the delay store); how many were parked (the others were due on arrival: a
   producer behind its pace). Also the broker process's CPU seconds per 10,000 delayed
   records (parking and delivering them: a figure that the load of a shared machine
   distorts less than rates); ``--profile FILE`` records the
   broker with py-spy meanwhile (``--gil --format raw``: folded stacks of Python CPU);
   ``--plain`` sends the same records without the header, for comparison; ``--relative``
   sends ``ketch.deliver.after`` instead, so every record is parked however far behind
   its pace the producer falls (a loaded machine), its lateness taken against the due
   time its delivered copy carries. ``--pending N`` instead parks N records due in an
   hour, as fast as the broker takes them, and reports the broker's RSS before, at each
   quarter and once the index holds them all, and the index's rows and size on disk
   (issue 18: "millions pending without memory growing with them").

4. The archive (tiered storage, KIP-405), on a cluster of its own (1 controller, 1 broker,
   the filesystem store in a temporary directory): ``--archive-records`` records of 100
   bytes (default 300,000, about 37 MB on disk) to a topic with 1 MiB segments and a local
   retention of half the data. Upload MB/s: the bytes of the copied segments over the sum
   of their upload times (COPY_SEGMENT_STARTED to FINISHED in ``__remote_log_metadata``,
   metadata round trips included), against a raw ``shutil.copyfile`` + fsync of files of
   the same sizes to the same directory. Read records/s: Ketch's consumer reading the
   archived offsets (served from the store) and then the local ones, same run. And the
   Spark source's tasks reading the archived offsets [0, local log start) into Arrow
   batches (its planning and ``read_range``, run in this process as an executor runs them,
   so a JVM's start does not drown the figure): through the broker (no option) and from
   the store directly (``ketch.remote.storage``), alternated ``--archive-repeats`` times
   (default 2): records/s, and the broker's CPU seconds per run.

Usage: python bench/beyond.py [--records 200000] [--only tags|delayed|archive]
       python bench/beyond.py --only delayed --pending 1000000
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clients import Admin, Consumer  # noqa: E402
from clients.admin import NewTopic  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402
from clients.connection import roundtrip  # noqa: E402
from clients.protocol import ApiKey, messages  # noqa: E402
from clients.protocol.tag_filter import FETCH_TAG_FILTER, encode_tag_filter  # noqa: E402
from clients.records import iter_batches  # noqa: E402
from clients.records.tags import TAG_HEADER  # noqa: E402
from clients.types import TopicPartition  # noqa: E402

TOPIC = "tagged"


def produce(bootstrap: str, records: int) -> int:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000})
    vip = 0
    for i in range(records):
        tag = b"vip" if i % 100 == 7 else (b"std" if i % 2 else None)
        vip += tag == b"vip"
        while True:
            try:
                producer.produce(TOPIC, value=b"%08d" % i + b"." * 92, partition=0,
                                 headers=[(TAG_HEADER, tag)] if tag else None)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    return vip


def fetched_bytes(port: int, end: int, filtered: bool) -> int:
    cls = messages.FetchRequest
    extra = ((FETCH_TAG_FILTER, encode_tag_filter({TOPIC: frozenset({b"vip"})})),) if filtered else ()
    offset = total = 0
    while offset < end:
        req = cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, unknown_tagged_fields=extra,
                  topics=[cls.FetchTopic(topic=TOPIC, partitions=[cls.FetchTopic.FetchPartition(
                      partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                      partition_max_bytes=8 << 20)])])
        data = bytes(roundtrip("127.0.0.1", port, ApiKey.FETCH, 12, req).responses[0].partitions[0].records)
        total += len(data)
        last = [h.last_offset for _, h in iter_batches(data, partial_tail_ok=True)]
        offset = last[-1] + 1 if last else end
    return total


def read_through(bootstrap: str, end: int, filtered: bool) -> dict:
    tp = TopicPartition(TOPIC, 0)
    with Consumer({"bootstrap.servers": bootstrap, "fetch.max.wait.ms": 50}) as c:
        if filtered:
            c.set_tag_filter(TOPIC, ["vip"])
        c.assign([tp])
        c.seek(tp, 0)
        got = 0
        start = time.perf_counter()
        while c.position(tp) < end:
            got += len(c.poll(200))
        elapsed = time.perf_counter() - start
    return {"records_received": got, "seconds": round(elapsed, 3), "offsets_per_s": round(end / elapsed)}


DELAYED_TOPIC = "delayed"


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process (Linux /proc)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def delayed_lateness(bootstrap: str, rate: int, seconds: float, delay_ms: int, broker_pid: int,
                     profile: str | None, plain: bool = False, relative: bool = False) -> dict:
    """Produce ``rate`` delayed records/s for ``seconds``; the lateness of their arrival."""
    import subprocess
    import threading
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP
    arrived: dict[bytes, list[int]] = {}
    due_at: dict[bytes, int] = {}       # relative: the due time each delivered copy carries
    stop = threading.Event()

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 20, "isolation.level": "read_committed"})
        c.assign([CTP(DELAYED_TOPIC, p, 0) for p in range(3)])
        while not stop.is_set():
            for m in c.consume(1000, 0.05):
                if m.error() is None:
                    arrived.setdefault(m.value(), []).append(int(time.time() * 1000))
                    if relative:
                        due_at.setdefault(m.value(), int(dict(m.headers() or ()).get("ketch.deliver.at", b"-1")))
        c.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000})
    # Warm-up, not measured: the first delayed record creates the delay store's topic
    # (a metadata round trip and its partitions' start), and the reader gets assigned.
    warm_up = b"warm-up"
    producer.produce(DELAYED_TOPIC, value=warm_up, key=warm_up,
                     headers=None if plain else [("ketch.deliver.after", b"100")])
    producer.flush(60)
    deadline = time.monotonic() + 60
    while warm_up not in arrived and time.monotonic() < deadline:
        time.sleep(0.05)
    arrived.pop(warm_up, None)
    due: dict[bytes, int] = {}
    total = int(rate * seconds)
    spy = None if profile is None else subprocess.Popen(
        ["py-spy", "record", "--pid", str(broker_pid), "--rate", "100", "--format", "raw", "--gil",
         "--output", profile, "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu_before = cpu_seconds(broker_pid)
    start = time.monotonic()
    for i in range(total):
        # Paced: record i leaves at start + i / rate (in bursts of 20 ms: a sleep of
        # 1 ms oversleeps on a busy machine, which would lower the rate itself).
        ahead = start + i / rate - time.monotonic()
        if ahead > 0.02:
            producer.poll(ahead)
        when = int(time.time() * 1000) + delay_ms
        value = b"%08d" % i
        due[value] = when
        producer.produce(DELAYED_TOPIC, value=value, key=value, headers=None if plain else [
            ("ketch.deliver.after", str(delay_ms).encode()) if relative
            else ("ketch.deliver.at", str(when).encode())])
    send_s = time.monotonic() - start
    producer.flush(120)
    produce_s = time.monotonic() - start
    deadline = time.monotonic() + delay_ms / 1000 + 120
    while len(arrived) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    user, system = (a - b for a, b in zip(cpu_seconds(broker_pid), cpu_before))
    if spy is not None:
        spy.send_signal(2)      # SIGINT: py-spy writes its output and exits
        spy.wait(30)
    stop.set()
    reader.join(10)
    parked = parked_records(bootstrap)
    if relative:
        due.update(due_at)
    late = sorted(ts[0] - due[v] for v, ts in arrived.items())

    def pct(q: int) -> int:
        return late[min(len(late) - 1, len(late) * q // 100)] if late else -1
    return {"rate_asked": rate, "produced": total, "produce_rate": round(total / produce_s),
            "send_rate": round(total / send_s), "flush_s": round(produce_s - send_s, 2),
            "parked": parked, "delivered": len(arrived), "duplicates": sum(len(ts) - 1 for ts in arrived.values()),
            "early": sum(1 for v, ts in arrived.items() if ts[0] < due[v]),
            "lateness_ms_p50": pct(50), "lateness_ms_p99": pct(99), "lateness_ms_max": late[-1] if late else -1,
            "broker_cpu_s_per_10k": round((user + system) * 10_000 / max(1, len(arrived)), 2),
            "broker_system_cpu_s_per_10k": round(system * 10_000 / max(1, len(arrived)), 2)}


def parked_records(bootstrap: str) -> int:
    """How many records went through the delay store (its records with a value): those
    due by the time they reached the broker (a producer behind its pace) were appended at
    once, and cost what a plain record does."""
    from confluent_kafka import Consumer, TopicPartition as CTP
    from broker.delayed.store import DELAY_STORE_TOPIC
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-store", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        partitions = c.list_topics(DELAY_STORE_TOPIC, 10).topics[DELAY_STORE_TOPIC].partitions
        if not partitions:
            return 0
        c.assign([CTP(DELAY_STORE_TOPIC, p, 0) for p in partitions])
        count, eof = 0, set()
        deadline = time.monotonic() + 60
        while len(eof) < len(partitions) and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.5):
                if m.error():
                    eof.add(m.partition())
                elif m.value() is not None:
                    count += 1
        return count
    finally:
        c.close()


PENDING_TOPIC = "pending"
PENDING_AFTER_MS = 3_600_000        # an hour: nothing comes due while measured


def rss_mb(pid: int) -> float:
    """A process's resident set (Linux /proc), MB."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1.0


def pending_memory(bootstrap: str, broker_pid: int, data_dir: str, log: str, records: int) -> dict:
    """Park ``records`` records due in an hour (as fast as the broker takes them) and the
    broker's RSS before, at each quarter, and once the schedulers' on-disk index holds
    them all (its rows and size, and how often a scheduler restarted: ``log``).
    Issue 18: "millions pending without memory growing with them"."""
    import contextlib
    import glob
    import sqlite3
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50,
                         "queue.buffering.max.messages": 1_000_000})
    header = [("ketch.deliver.after", str(PENDING_AFTER_MS).encode())]
    # The first one creates the delay store (its partitions and schedulers), not measured.
    producer.produce(PENDING_TOPIC, value=b"warm-up", headers=header)
    producer.flush(60)
    time.sleep(2.0)
    rss = [round(rss_mb(broker_pid), 1)]
    quarter = max(1, records // 4)
    start = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(PENDING_TOPIC, value=b"%08d" % i, key=b"%08d" % i, headers=header)
                break
            except BufferError:
                producer.poll(0.05)
        if (i + 1) % quarter == 0 or i + 1 == records:
            producer.flush(600)
            rss.append(round(rss_mb(broker_pid), 1))
    seconds = time.monotonic() - start
    files = glob.glob(os.path.join(data_dir, "**", "ketch-delayed-index", "*.sqlite"), recursive=True)

    def indexed() -> int:
        """Rows in the schedulers' index files (read-only; the broker's own, read here only
        to show that the records are indexed, not skipped)."""
        total = 0
        for f in files:
            with contextlib.closing(sqlite3.connect(f"file:{f}?mode=ro", uri=True)) as db:
                with contextlib.suppress(sqlite3.Error):
                    total += db.execute("SELECT COUNT(*) FROM parked").fetchone()[0]
        return total
    deadline = time.monotonic() + 300
    while indexed() < records + 1 and time.monotonic() < deadline:
        time.sleep(1.0)
    rss.append(round(rss_mb(broker_pid), 1))
    restarts = sum("restarts after" in line for line in pathlib.Path(log).read_text().splitlines())
    return {"records": records, "park_rate": round(records / seconds), "rss_mb": rss,
            "rss_growth_bytes_per_record": round((rss[-1] - rss[0]) * 2**20 / records, 1),
            "indexed": indexed(), "index_mb": round(sum(os.path.getsize(f) for f in files) / 2**20, 1),
            "scheduler_restarts": restarts}


ARCHIVE_TOPIC = "archive"
SEGMENT_BYTES = 1 << 20


def read_rate(bootstrap: str, topic: str, start: int, end: int) -> float:
    """Records/s of Ketch's consumer reading offsets [start, end)."""
    tp = TopicPartition(topic, 0)
    with Consumer({"bootstrap.servers": bootstrap, "fetch.max.wait.ms": 50,
                   "auto.offset.reset": "none"}) as c:
        c.assign([tp])
        c.seek(tp, start)
        got = 0
        began = time.perf_counter()
        while got < end - start:
            got += sum(1 for r in c.poll(200) if r.offset < end)
        return (end - start) / (time.perf_counter() - began)


def remote_metadata(bootstrap: str) -> list:
    from confluent_kafka import Consumer as CkConsumer, TopicPartition as CkTP

    from clients.tiered.metadata import REMOTE_LOG_METADATA_TOPIC, decode_metadata
    c = CkConsumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                    "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([CkTP(REMOTE_LOG_METADATA_TOPIC, p, 0) for p in range(3)])
        out, eof = [], set()
        deadline = time.monotonic() + 60
        while len(eof) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                eof.add(m.partition())
            else:
                out.append(decode_metadata(m.value()))
        return out
    finally:
        c.close()


def raw_copy_mb_per_s(target: pathlib.Path, sizes: list[int]) -> float:
    """shutil.copyfile + fsync of files of ``sizes`` bytes into ``target`` (the sources
    written first, untimed)."""
    import shutil
    sources = {}
    for size in set(sizes):
        sources[size] = target / f"raw-source-{size}"
        sources[size].write_bytes(os.urandom(size))
    began = time.perf_counter()
    for i, size in enumerate(sizes):
        dest = target / f"raw-{i}"
        shutil.copyfile(sources[size], dest)
        with open(dest, "rb+") as f:
            os.fsync(f.fileno())
    return sum(sizes) / (time.perf_counter() - began) / 1e6


def local_log_start(cluster: LocalCluster) -> int:
    """The base offset of the broker's first local segment of the archive topic."""
    import glob
    data_dir = cluster.spec.brokers[0].data_dir
    bases = [int(os.path.basename(p)[:-4]) for p in glob.glob(
        os.path.join(data_dir, "**", f"{ARCHIVE_TOPIC}-0", "*.log"), recursive=True)]
    return min(bases, default=0)


def spark_archive_read(bootstrap: str, store: pathlib.Path, end: int, direct: bool,
                       broker_pid: int) -> tuple[float, float, int]:
    """(records/s, broker CPU s, tasks reading the store) of the Spark source's read of
    offsets [0, end) of the archive topic."""
    from clients.spark.options import parse_source_options
    from clients.spark.source import KetchBatchReader, read_range
    options = {"kafka.bootstrap.servers": bootstrap, "assign": f'{{"{ARCHIVE_TOPIC}": [0]}}',
               "startingOffsets": "earliest",
               "endingOffsets": f'{{"{ARCHIVE_TOPIC}": {{"0": {end}}}}}'}
    if direct:
        options.update({"ketch.remote.storage": "filesystem",
                        "ketch.remote.storage.fs.path": str(store)})
    cpu_before = sum(cpu_seconds(broker_pid))
    began = time.perf_counter()
    parts = KetchBatchReader(parse_source_options(options, streaming=False)).partitions()
    rows = sum(batch.num_rows for part in parts for batch in read_range(part))
    elapsed = time.perf_counter() - began
    assert rows == end, (rows, end)
    direct_tasks = sum(1 for p in parts if p.segments)
    return rows / elapsed, sum(cpu_seconds(broker_pid)) - cpu_before, direct_tasks


def archive(records: int, repeats: int = 2) -> dict:
    from clients.tiered.metadata import (
        RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
    )
    with tempfile.TemporaryDirectory(prefix="ketch-bench-archive-") as d:
        store = pathlib.Path(d) / "store"
        store.mkdir()
        tiered = {"remote.log.storage.system.enable": "true"}
        cluster = LocalCluster(os.path.join(d, "cluster"), controllers=1, brokers=1, broker_props={
            **tiered, "ketch.remote.storage.fs.path": str(store),
            "remote.log.manager.task.interval.ms": "200",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
            "log.retention.check.interval.ms": "500"}, controller_props=tiered)
        try:
            cluster.start(timeout_s=120)
            bootstrap = cluster.spec.bootstrap_servers
            total = records * 121           # a record's bytes in a batch of 100-byte values
            with Admin({"bootstrap.servers": bootstrap}) as admin:
                admin.create_topics([NewTopic(ARCHIVE_TOPIC, 1, 1, configs={
                    "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
                    "local.retention.bytes": str(total // 2), "file.delete.delay.ms": "0"})])
            global TOPIC
            saved, TOPIC = TOPIC, ARCHIVE_TOPIC
            try:
                produce(bootstrap, records)
            finally:
                TOPIC = saved
            # Wait until local retention has moved the local log start (half archived).
            local_start = 0
            deadline = time.monotonic() + 300
            while local_start < records // 4 and time.monotonic() < deadline:
                local_start = local_log_start(cluster)
                time.sleep(0.5)
            started: dict = {}
            copies: list[tuple[int, int]] = []
            finished_at: list[tuple[int, int]] = []     # (start offset, FINISHED event ms)
            for r in remote_metadata(bootstrap):
                if isinstance(r, RemoteLogSegmentMetadata) and r.segment.topic == ARCHIVE_TOPIC:
                    started[r.segment.segment_id] = r
                elif (isinstance(r, RemoteLogSegmentMetadataUpdate)
                      and r.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
                      and r.segment.segment_id in started):
                    s = started[r.segment.segment_id]
                    copies.append((s.segment_size_bytes, r.event_timestamp_ms - s.event_timestamp_ms))
                    finished_at.append((s.start_offset, r.event_timestamp_ms))
            # A metadata round trip (FINISHED written and replayed, the next STARTED event):
            # the gap between one segment's FINISHED event and the next one's STARTED.
            starts = sorted((m.start_offset, m.event_timestamp_ms) for m in started.values())
            gaps = sorted(nxt[1] - fin[1] for fin, nxt in zip(sorted(finished_at), starts[1:]))
            round_trip_ms = gaps[len(gaps) // 2] if gaps else 0
            copied_bytes = sum(b for b, _ in copies)
            upload_s = max(1, sum(ms for _, ms in copies)) / 1000
            raw = raw_copy_mb_per_s(store, [b for b, _ in copies] or [SEGMENT_BYTES])
            remote_rate = read_rate(bootstrap, ARCHIVE_TOPIC, 0, local_start)
            local_rate = read_rate(bootstrap, ARCHIVE_TOPIC, local_start, records)
            broker_pid = cluster.processes[cluster.spec.brokers[0].id].pid
            spark: dict[str, list] = {"broker": [], "direct": []}
            for _ in range(repeats):            # alternated: the machine's load hits both
                for way in ("broker", "direct"):
                    rate, cpu, direct_tasks = spark_archive_read(
                        bootstrap, store, local_start, way == "direct", broker_pid)
                    assert direct_tasks == (1 if way == "direct" else 0), direct_tasks
                    spark[way].append((round(rate), round(cpu, 2)))
        finally:
            cluster.stop()
    return {"records": records, "local_log_start_offset": local_start,
            "segments_copied": len(copies), "bytes_copied": copied_bytes,
            "upload_mb_per_s": round(copied_bytes / upload_s / 1e6, 1),
            "metadata_round_trip_ms_p50": round_trip_ms,
            "upload_mb_per_s_without_metadata": round(copied_bytes / max(
                0.001, upload_s - len(copies) * round_trip_ms / 1000) / 1e6, 1),
            "raw_copy_mb_per_s": round(raw, 1),
            "remote_records_per_s": round(remote_rate), "local_records_per_s": round(local_rate),
            "spark_archived_via_broker": spark["broker"], "spark_archived_direct": spark["direct"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--only", choices=("tags", "delayed", "archive"))
    ap.add_argument("--archive-records", type=int, default=300_000)
    ap.add_argument("--archive-repeats", type=int, default=2)
    ap.add_argument("--delayed-rate", type=int, default=5000)
    ap.add_argument("--delayed-seconds", type=float, default=10.0)
    ap.add_argument("--delay-ms", type=int, default=2000)
    ap.add_argument("--plain", action="store_true",
                    help="the delayed section's records without the header (a baseline)")
    ap.add_argument("--relative", action="store_true",
                    help="ketch.deliver.after instead of .at: every record parked however far "
                         "behind the producer is (for CPU comparisons on a loaded machine); "
                         "lateness against the due time the delivered copy carries")
    ap.add_argument("--pending", type=int, metavar="N",
                    help="delayed section: instead, park N records due in an hour and report the "
                         "broker's RSS before, at each quarter and once indexed (issue 18: millions "
                         "pending without memory growing with them)")
    ap.add_argument("--profile", help="py-spy the broker during the delayed section into this file")
    args = ap.parse_args()
    result: dict = {"bench": "beyond", "cpus": os.cpu_count(), "records": args.records}
    if args.only in (None, "archive"):
        a = result["archive"] = archive(args.archive_records, args.archive_repeats)
        print(f"archive, {a['records']:,} records, {a['segments_copied']} segments "
              f"({a['bytes_copied'] / 1e6:.1f} MB) copied:")
        print(f"  upload {a['upload_mb_per_s']} MB/s (STARTED..FINISHED, metadata included) vs "
              f"raw copy {a['raw_copy_mb_per_s']} MB/s to the same directory")
        print(f"  a metadata round trip p50 {a['metadata_round_trip_ms_p50']} ms; upload without it "
              f"{a['upload_mb_per_s_without_metadata']} MB/s (files + fsyncs + renames)")
        print(f"  Ketch consumer: archived offsets {a['remote_records_per_s']:,} records/s, "
              f"local offsets {a['local_records_per_s']:,} records/s")
        print(f"  Spark source, archived offsets [0, {a['local_log_start_offset']:,}) "
              "(records/s, broker CPU s) per run:")
        print(f"    through the broker {a['spark_archived_via_broker']}; from the store directly "
              f"{a['spark_archived_direct']}")
        if args.only == "archive":
            print(json.dumps(result))
            return 0
    with tempfile.TemporaryDirectory(prefix="ketch-bench-beyond-") as d:
        cluster = LocalCluster(d, controllers=1, brokers=1)
        try:
            cluster.start(timeout_s=120)
            bootstrap = cluster.spec.bootstrap_servers
            if args.only in (None, "delayed"):
                with Admin({"bootstrap.servers": bootstrap}) as admin:
                    admin.create_topics([NewTopic(DELAYED_TOPIC, 3, 1)])
                broker = cluster.processes[cluster.spec.brokers[0].id]
                if args.pending:
                    with Admin({"bootstrap.servers": bootstrap}) as admin:
                        admin.create_topics([NewTopic(PENDING_TOPIC, 3, 1)])
                    p = result["pending"] = pending_memory(bootstrap, broker.pid,
                                                           cluster.spec.brokers[0].data_dir,
                                                           cluster.spec.brokers[0].log, args.pending)
                    print(f"pending: {p['records']:,} records parked (due in an hour) at "
                          f"{p['park_rate']:,}/s; broker RSS MB before, at each quarter, once indexed: "
                          f"{p['rss_mb']} ({p['rss_growth_bytes_per_record']} bytes a record); "
                          f"the on-disk index {p['indexed']:,} rows, {p['index_mb']} MB; "
                          f"scheduler restarts {p['scheduler_restarts']}")
                    print(json.dumps(result))
                    return 0
                result["delayed"] = delayed_lateness(bootstrap, args.delayed_rate, args.delayed_seconds,
                                                     args.delay_ms, broker.pid, args.profile, args.plain,
                                                     args.relative)
            if args.only in (None, "tags"):
                with Admin({"bootstrap.servers": bootstrap}) as admin:
                    admin.create_topics([NewTopic(TOPIC, 1, 1)])
                    vip = produce(bootstrap, args.records)
                    leader = admin.describe_topics([TOPIC])[TOPIC].partitions[0].leader
                port = cluster.spec.node(leader).port
                whole = fetched_bytes(port, args.records, False)
                only = fetched_bytes(port, args.records, True)
                plain = read_through(bootstrap, args.records, False)
                tagged = read_through(bootstrap, args.records, True)
        finally:
            cluster.stop()
    if "delayed" in result:
        d = result["delayed"]
        print(f"delayed delivery, {d['produced']:,} records asked at {d['rate_asked']:,}/s "
              f"(produced at {d['produce_rate']:,}/s), due {args.delay_ms} ms after sending:")
        print(f"  parked {d['parked']:,} (the others were due when they arrived); "
              f"delivered {d['delivered']:,}, duplicates {d['duplicates']}, early {d['early']}; "
              f"lateness p50 {d['lateness_ms_p50']} ms, p99 {d['lateness_ms_p99']} ms, "
              f"max {d['lateness_ms_max']} ms; broker CPU {d['broker_cpu_s_per_10k']} s per 10k records "
              f"({d['broker_system_cpu_s_per_10k']} s of it in the kernel)")
    if args.only == "delayed":
        print(json.dumps(result))
        return 0
    ratio = round(only / whole, 4)
    print(f"tag filter, 1 tag of {vip} / {args.records} records ({vip / args.records:.1%}):")
    print(f"  bytes sent: unfiltered {whole:,}, filtered {only:,} = {ratio} x (goal <= 0.05)")
    print(f"  Ketch consumer to the end: unfiltered {plain['seconds']} s ({plain['offsets_per_s']:,} offsets/s, "
          f"{plain['records_received']:,} records), filtered {tagged['seconds']} s "
          f"({tagged['offsets_per_s']:,} offsets/s, {tagged['records_received']:,} records)")
    result["tag_filter"] = {"tagged_records": vip, "bytes_unfiltered": whole, "bytes_filtered": only,
                            "bytes_ratio": ratio, "consumer_unfiltered": plain, "consumer_filtered": tagged}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
