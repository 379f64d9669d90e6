"""Benchmark: the floor of issue 22's end-to-end latency on this machine: Ketch's acks=all
message pattern, without Kafka's codec, storage or broker logic.

Why: bench/produce.py measures Ketch's end-to-end latency at 10,000 records/s (acks=all,
RF 3, linger 0) against absolute goals (p50 <= 3 ms, p99 <= 10 ms). On a 2-core machine
that runs six nodes and both clients, the latency is mostly each hop's wait for a CPU, so
the question is how far Ketch is from what the same messages cost in Python at all. This
relay sends exactly those messages between processes:

- three "broker" processes (uvloop, 4-byte length-prefixed frames), each leading a third
  of the records and following the other two by pull, as Ketch's replicas do: a parked
  follower fetch is answered when its leader appends, the follower "appends" (counts)
  and fetches again from its new log end, which is its report; the leader's high
  watermark is the least log end of the followers; the produce is answered at the high
  watermark, and so is a parked consumer fetch;
- one producer process: one record per request (linger 0), paced at --rate, the send
  time (CLOCK_MONOTONIC, shared by the processes of a machine) in the record; with
  ``--batch``, the records due at a turn of its 1 ms pacing go to each broker in one
  request, as librdkafka's linger 0 batches what queued while it was busy (bench/produce.py's
  brokers see ~4 records per Produce at 10,000 records/s);
- one consumer process, fetching from each broker, which times receive - send.

No Kafka codec, no log files, no fetch sessions, no purgatories: what is left is the
event loops, the sockets and the processes' turns on the CPUs. The producer and consumer
are Python here, where bench/produce.py's are librdkafka: that only adds CPU to the
floor. Printed: p50, p99 and max, and the brokers' CPU per 1,000 records (user + system
from /proc, over the paced run). bench/produce.py runs it beside Ketch's latency run and
prints Ketch's figures as ratios to these.

``--work-us N`` makes each relay broker burn N microseconds of CPU per message it handles
(a produce, a follower fetch, a consumer fetch, a fetched response it follows): a broker that
does real work per message. Run at several N, it shows what the brokers' CPU may be on this
machine for a latency goal (``--sweep 0,50,100`` runs each in turn and prints a table).

Usage: python bench/latency_floor.py [--rate 10000] [--seconds 5] [--batch]
                                     [--work-us 0 | --sweep N,N,...]
Prints one line, then ONE JSON line. No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients.cli.launcher import free_ports  # noqa: E402

BROKERS = 3
VALUE = b"." * 100
_LEN = struct.Struct(">I")
_FETCH = struct.Struct(">II")        # follower id, fetch offset (its log end)
_OFFSET = struct.Struct(">I")        # a consumer's fetch offset
_SENT = struct.Struct(">Q")          # the send time in a record, monotonic ns
WORK_NS = 0                          # --work-us, in a relay broker


def _work() -> None:
    """Burn WORK_NS of this thread's CPU time (not wall time: a preempted burn still costs
    what it says)."""
    if WORK_NS:
        end = time.thread_time_ns() + WORK_NS
        while time.thread_time_ns() < end:
            pass


def _frame(payload: bytes) -> bytes:
    return _LEN.pack(len(payload)) + payload


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    return await reader.readexactly(_LEN.unpack(await reader.readexactly(4))[0])


def _records(log: list[bytes], start: int, end: int) -> bytes:
    return _frame(b"".join(_frame(r) for r in log[start:end]))


def _count_records(payload: bytes) -> list[int]:
    """The offsets within ``payload`` of each record it carries."""
    out, pos = [], 0
    while pos < len(payload):
        out.append(pos + 4)
        pos += 4 + _LEN.unpack_from(payload, pos)[0]
    return out


async def _connect(port: int, role: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_frame(role))
            return reader, writer
        except OSError:
            await asyncio.sleep(0.05)


class _Leader:
    """One relay broker's leader side: its log, the followers' reports, the HW."""

    def __init__(self) -> None:
        self.log: list[bytes] = []
        self.hw = 0
        self.reported: dict[int, int] = {}                  # follower -> its log end
        self.parked: dict[int, asyncio.StreamWriter] = {}   # follower -> its parked fetch
        self.acks: list[tuple[int, int, asyncio.StreamWriter]] = []  # (log end, records, producer)
        self.consumer: tuple[asyncio.StreamWriter, int] | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            role = await _read_frame(reader)
            if role == b"P":
                while True:
                    request = await _read_frame(reader)
                    _work()
                    self.append(request, writer)
            elif role == b"F":
                while True:
                    fetch = _FETCH.unpack(await _read_frame(reader))
                    _work()
                    self.follower_fetch(*fetch, writer)
            elif role == b"C":
                while True:
                    offset = _OFFSET.unpack(await _read_frame(reader))[0]
                    _work()
                    self.consumer_fetch(offset, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def append(self, request: bytes, producer: asyncio.StreamWriter) -> None:
        positions = _count_records(request)
        for pos in positions:
            self.log.append(request[pos:pos + _LEN.unpack_from(request, pos - 4)[0]])
        self.acks.append((len(self.log), len(positions), producer))
        parked, self.parked = self.parked, {}
        for follower, writer in parked.items():
            writer.write(_records(self.log, self.reported[follower], len(self.log)))

    def follower_fetch(self, follower: int, offset: int, writer: asyncio.StreamWriter) -> None:
        self.reported[follower] = offset
        if len(self.reported) == BROKERS - 1:
            self.advance(min(self.reported.values()))
        if offset < len(self.log):
            writer.write(_records(self.log, offset, len(self.log)))
        else:
            self.parked[follower] = writer

    def consumer_fetch(self, offset: int, writer: asyncio.StreamWriter) -> None:
        if offset < self.hw:
            writer.write(_records(self.log, offset, self.hw))
        else:
            self.consumer = (writer, offset)

    def advance(self, hw: int) -> None:
        if hw <= self.hw:
            return
        self.hw = hw
        waiting = []
        for ack in self.acks:
            end, records, producer = ack
            if end <= hw:
                producer.write(_frame(_OFFSET.pack(records)))
            else:
                waiting.append(ack)
        self.acks = waiting
        if self.consumer is not None:
            writer, offset = self.consumer
            self.consumer = None
            writer.write(_records(self.log, offset, hw))


async def _follow(me: int, leader_port: int) -> None:
    reader, writer = await _connect(leader_port, b"F")
    log_end = 0
    writer.write(_frame(_FETCH.pack(me, log_end)))
    try:
        while True:
            log_end += len(_count_records(await _read_frame(reader)))
            _work()
            writer.write(_frame(_FETCH.pack(me, log_end)))
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _broker(me: int, ports: list[int]) -> None:
    leader = _Leader()
    server = await asyncio.start_server(leader.serve, "127.0.0.1", ports[me])
    followers = [asyncio.create_task(_follow(me, port)) for i, port in enumerate(ports) if i != me]
    async with server:
        await server.serve_forever()
    for f in followers:
        f.cancel()


async def _producer(ports: list[int], rate: float, seconds: float, batch: bool) -> None:
    connections = [await _connect(port, b"P") for port in ports]
    total = int(rate * seconds)
    acked = 0
    done = asyncio.Event()

    async def acks(reader: asyncio.StreamReader) -> None:
        nonlocal acked
        while acked < total:
            records = _OFFSET.unpack(await _read_frame(reader))[0]
            acked += records        # not "acked += (await ...)": that reads acked before the await
            if acked == total:
                done.set()
    readers = [asyncio.create_task(acks(r)) for r, _ in connections]
    # Paced as bench/produce.py paces: each turn sends what is due by now.
    start = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        requests: list[list[bytes]] = [[] for _ in ports]
        while sent < due:
            record = _frame(_SENT.pack(time.monotonic_ns()) + VALUE)
            if batch:
                requests[sent % len(ports)].append(record)
            else:
                connections[sent % len(ports)][1].write(_frame(record))
            sent += 1
        for (_, writer), records in zip(connections, requests):
            if records:
                writer.write(_frame(b"".join(records)))
        await asyncio.sleep(0.001)
    await done.wait()
    for task in readers:
        task.cancel()
    print(json.dumps({"achieved_records_per_s": round(total / (time.perf_counter() - start))}), flush=True)


async def _consumer(ports: list[int], expected: int) -> None:
    latencies_us: list[float] = []
    done = asyncio.Event()

    async def fetch_from(port: int) -> None:
        reader, writer = await _connect(port, b"C")
        offset = 0
        writer.write(_frame(_OFFSET.pack(offset)))
        while True:
            payload = await _read_frame(reader)
            now = time.monotonic_ns()
            for pos in _count_records(payload):
                latencies_us.append((now - _SENT.unpack_from(payload, pos)[0]) / 1000)
                offset += 1
            if len(latencies_us) >= expected:
                done.set()
            writer.write(_frame(_OFFSET.pack(offset)))
    tasks = [asyncio.create_task(fetch_from(port)) for port in ports]
    print("READY", flush=True)
    await done.wait()
    for task in tasks:
        task.cancel()
    print(json.dumps({"latencies_us": latencies_us}), flush=True)


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s (bench/produce.py's helpers too)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure_floor(rate: int, seconds: float, work_us: int = 0, batch: bool = False) -> dict:
    """The relay at ``rate`` records/s for ``seconds``, each relay broker burning
    ``work_us`` of CPU per message: p50/p99/max in ms, the brokers' CPU per 1,000 records
    and in cores (CPU seconds per second of the paced run)."""
    ports = free_ports(BROKERS)
    me = [sys.executable, __file__, "--ports", ",".join(map(str, ports)), "--work-us", str(work_us)]
    brokers = [subprocess.Popen([*me, "--role", "broker", "--id", str(i)], start_new_session=True)
               for i in range(BROKERS)]
    expected = int(rate * seconds)
    consumer = producer = None
    try:
        consumer = subprocess.Popen([*me, "--role", "consumer", "--records", str(expected)],
                                    stdout=subprocess.PIPE, start_new_session=True)
        assert consumer.stdout is not None
        if consumer.stdout.readline().strip() != b"READY":
            raise RuntimeError("the relay's consumer did not start")
        cpu_before = sum(_cpu_seconds(b.pid) for b in brokers)
        producer = subprocess.Popen([*me, "--role", "producer", "--rate", str(rate),
                                     "--seconds", str(seconds), *(["--batch"] if batch else [])],
                                    stdout=subprocess.PIPE, start_new_session=True)
        produced, _ = producer.communicate(timeout=seconds * 10 + 60)
        consumed, _ = consumer.communicate(timeout=60)
        cpu = sum(_cpu_seconds(b.pid) for b in brokers) - cpu_before
    finally:
        for proc in (producer, consumer, *brokers):
            if proc is not None:
                stop_process(proc)
    lat = sorted(json.loads(consumed.decode().strip().splitlines()[-1])["latencies_us"])
    achieved = json.loads(produced.decode().strip())["achieved_records_per_s"]
    q = statistics.quantiles(lat, n=100, method="inclusive")
    return {"target_records_per_s": rate,
            "achieved_records_per_s": achieved,
            "records": len(lat), "p50_ms": round(q[49] / 1000, 2), "p99_ms": round(q[98] / 1000, 2),
            "max_ms": round(lat[-1] / 1000, 2),
            "broker_cpu_ms_per_1000_records": round(cpu * 1e6 / len(lat), 1),
            # Over the producer's run (first send to last ack), not its process's start-up.
            "work_us": work_us, "batch": batch, "broker_cores": round(cpu * achieved / len(lat), 2)}


def _serve(args: argparse.Namespace) -> None:
    import uvloop      # as the nodes run (broker/__main__.py)
    global WORK_NS
    WORK_NS = args.work_us * 1000
    ports = [int(p) for p in args.ports.split(",")]
    if args.role == "broker":
        uvloop.run(_broker(args.id, ports))
    elif args.role == "producer":
        uvloop.run(_producer(ports, args.rate, args.seconds, args.batch))
    else:
        uvloop.run(_consumer(ports, args.records))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--work-us", type=int, default=0,
                    help="CPU microseconds each relay broker burns per message it handles")
    ap.add_argument("--sweep", help="comma-separated --work-us values, run in turn")
    ap.add_argument("--batch", action="store_true",
                    help="the records due at a turn of the producer's pacing go to a broker in one request")
    ap.add_argument("--role", choices=("broker", "producer", "consumer"), help=argparse.SUPPRESS)
    ap.add_argument("--ports", help=argparse.SUPPRESS)
    ap.add_argument("--id", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        _serve(args)
        return
    if args.sweep:
        runs = []
        print(f"relay at {args.rate:,} rec/s ({'batched' if args.batch else 'one record'} per "
              f"produce), each broker burning N us of CPU per message:")
        print(f"  {'N us':>5} {'p50 ms':>7} {'p99 ms':>7} {'brokers, cores':>15} {'CPU-ms/1000':>12}")
        for work_us in (int(n) for n in args.sweep.split(",")):
            run = measure_floor(args.rate, args.seconds, work_us, args.batch)
            runs.append(run)
            print(f"  {work_us:>5} {run['p50_ms']:>7} {run['p99_ms']:>7} {run['broker_cores']:>15} "
                  f"{run['broker_cpu_ms_per_1000_records']:>12}", flush=True)
        print(json.dumps({"bench": "latency_floor", "cpus": os.cpu_count(), "sweep": runs}))
        return
    floor = measure_floor(args.rate, args.seconds, args.work_us, args.batch)
    print(f"latency floor (relay of the acks=all RF-3 messages, no codec or storage"
          f"{f', {args.work_us} us of CPU per message' if args.work_us else ''}) at "
          f"{args.rate:,} rec/s: p50 {floor['p50_ms']} ms, p99 {floor['p99_ms']} ms, max "
          f"{floor['max_ms']} ms; the relay brokers used {floor['broker_cpu_ms_per_1000_records']} "
          f"CPU-ms per 1000 records ({floor['broker_cores']} cores)")
    print(json.dumps({"bench": "latency_floor", "cpus": os.cpu_count(), **floor}))


if __name__ == "__main__":
    main()
