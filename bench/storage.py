"""Benchmark: the partition log against raw system calls on the same machine, same run.

Four measurements (issue 3):

1. Append throughput with 16 KiB and 1 MiB batches: `PartitionLog.append_as_leader`
   (CRC-32C check, offset and epoch stamping in place, index upkeep, pwrite; no fsync,
   Kafka's default) against plain `os.write` appends of the same bytes to one file,
   interleaved call by call. Goal: ratio >= 0.8 at 1 MiB.
2. Read throughput: a consumer-style loop of `PartitionLog.read(offset, 1 MiB, HW)` and
   `os.sendfile` of each returned slice to a loopback TCP socket, interleaved slice by
   slice with `os.sendfile` of the same byte range of the same file from a plain
   descriptor to the same socket. A thread drains the socket for both.
3. Recovery time for an unclean log (no clean-shutdown marker, recovery point 0): every
   batch walked and CRC-checked, indexes rebuilt. 1 GiB by default (`--recovery-bytes`),
   written as 16 KiB batches; the file is in the page cache, as after a process crash.
4. Open file descriptors of a broker process holding 10,000 partitions (`--partitions`):
   one FileStorage with the default 512-descriptor LRU, each partition appended to and
   read once; /proc/self/fd counted before and after.

Usage: python bench/storage.py [--dir DIR] [--append-mib 256] [--recovery-bytes 1073741824]
                               [--partitions 10000] [--repeat 5]
Prints figures, then ONE JSON line (the last line).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from broker.log import FileStorage, LogConfig, LogManager, PartitionLog  # noqa: E402
from clients.records import Record, build_batch  # noqa: E402

KIB = 1024
MIB = 1024 * KIB


def make_batch_of(size_bytes: int) -> bytearray:
    """An uncompressed batch of about `size_bytes`, 1 KiB records (16 or 1024 of them)."""
    value = bytes(range(256)) * 4  # 1 KiB, not all zeros
    count = max(1, size_bytes // (len(value) + 20))
    records = [Record(i, 1_700_000_000_000 + i, b"key-%d" % i, value) for i in range(count)]
    return bytearray(build_batch(records))


def fds_open() -> int:
    return len(os.listdir("/proc/self/fd"))


# --- 1. appends ---------------------------------------------------------------------------


def bench_append(root: str, batch_bytes: int, total_bytes: int, repeat: int) -> dict:
    """Both sides write the same batches, interleaved call by call, so writeback, other
    processes and CPU frequency changes hit both alike; each repeat starts fresh files."""
    batch = make_batch_of(batch_bytes)
    raw_batch = bytes(batch)
    count = max(1, total_bytes // len(batch))
    ratios, raw_total, log_total = [], 0.0, 0.0
    clock = time.perf_counter
    for _ in range(repeat):
        raw_path, log_dir = f"{root}/raw.bin", f"{root}/append-0"
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        storage = FileStorage()
        log, _ = PartitionLog.open(storage, log_dir, LogConfig(), now_ms=0)
        raw_s = log_s = 0.0
        try:
            for i in range(count):
                # The same bytearray each time: the log rewrites base offset and epoch in
                # place, as it does with a Produce request's buffer. Which side goes first
                # alternates: the second finds the source bytes in the CPU cache.
                if i % 2:
                    t0 = clock()
                    os.write(fd, raw_batch)
                    t1 = clock()
                    result = log.append_as_leader(batch, leader_epoch=1, now_ms=0)
                    t2 = clock()
                    raw_s += t1 - t0
                    log_s += t2 - t1
                else:
                    t0 = clock()
                    result = log.append_as_leader(batch, leader_epoch=1, now_ms=0)
                    t1 = clock()
                    os.write(fd, raw_batch)
                    t2 = clock()
                    log_s += t1 - t0
                    raw_s += t2 - t1
            assert result.error_code == 0, result
            assert log.log_end_offset == count * (result.last_offset - result.base_offset + 1)
        finally:
            os.close(fd)
            os.unlink(raw_path)
            storage.close()
            shutil.rmtree(log_dir)
        ratios.append(raw_s / log_s)
        raw_total += raw_s
        log_total += log_s
    mib = repeat * count * len(batch) / MIB
    return {
        "batch_bytes": len(batch),
        "batches": count,
        "raw_mib_s": mib / raw_total,
        "log_mib_s": mib / log_total,
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


# --- 2. sendfile reads --------------------------------------------------------------------


class Drain:
    """A loopback TCP connection whose far end a thread reads and discards."""

    def __init__(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        self.sender = socket.create_connection(listener.getsockname())
        self.receiver, _ = listener.accept()
        listener.close()
        self.received = 0
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        buf = bytearray(4 * MIB)
        while True:
            n = self.receiver.recv_into(buf)
            if n == 0:
                return
            with self._cond:
                self.received += n
                self._cond.notify_all()

    def wait_for(self, total: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.received >= total, timeout=60)

    def close(self) -> None:
        self.sender.close()
        self._thread.join(timeout=5)
        self.receiver.close()


def send_all(sock: socket.socket, fd: int, position: int, length: int) -> None:
    while length:
        sent = os.sendfile(sock.fileno(), fd, position, length)
        position += sent
        length -= sent


def bench_sendfile(root: str, total_bytes: int, repeat: int) -> dict:
    """A consumer-style loop (read 1 MiB below the high watermark, sendfile the slice),
    interleaved slice by slice with a raw sendfile of the same byte range of the same
    file from a plain descriptor: the difference is the log's read path alone."""
    storage = FileStorage()
    dir_path = f"{root}/read-0"
    log, _ = PartitionLog.open(storage, dir_path, LogConfig(), now_ms=0)
    batch = make_batch_of(16 * KIB)
    while log.size_bytes < total_bytes:
        log.append_as_leader(batch, 1, 0)
    size = log.active_segment.size_bytes
    high_watermark = log.log_end_offset
    raw_fd = os.open(log.active_segment.log_path, os.O_RDONLY)
    drain = Drain()
    sock = drain.sender
    clock = time.perf_counter
    ratios, raw_total, log_total = [], 0.0, 0.0
    sent = 0
    try:
        for _ in range(repeat):
            raw_s = log_s = 0.0
            offset = 0
            turn = 0
            while offset < high_watermark:
                # Each side starts with an empty socket, so neither waits on the other's
                # bytes; the wait for the reader is outside the timings. The order
                # alternates: the second send finds the pages in the CPU cache.
                result = records = None
                for side in ((0, 1) if turn % 2 else (1, 0)):
                    drain.wait_for(sent)
                    t0 = clock()
                    if side == 0:
                        result = log.read(offset, MIB, high_watermark)
                        records = result.records
                        with storage.open_slice(records) as fd:
                            send_all(sock, fd, records.position, records.length_bytes)
                        log_s += clock() - t0
                        length = records.length_bytes
                    else:
                        # The raw side sends the byte range the log's read picks; on the
                        # first turn of a pair it is found the same way, untimed.
                        if records is None:
                            records = log.read(offset, MIB, high_watermark).records
                            t0 = clock()
                        send_all(sock, raw_fd, records.position, records.length_bytes)
                        raw_s += clock() - t0
                        length = records.length_bytes
                    sent += length
                turn += 1
                offset = records.last_offset + 1
            ratios.append(raw_s / log_s)
            raw_total += raw_s
            log_total += log_s
    finally:
        os.close(raw_fd)
        drain.close()
        storage.close()
        shutil.rmtree(dir_path)
    mib = repeat * size / MIB
    return {"bytes": size, "raw_mib_s": mib / raw_total, "log_mib_s": mib / log_total,
            "ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios)}


# --- 3. recovery --------------------------------------------------------------------------


def bench_recovery(root: str, total_bytes: int) -> dict:
    storage = FileStorage()
    dir_path = f"{root}/recover-0"
    config = LogConfig()  # 1 GiB segments
    log, _ = PartitionLog.open(storage, dir_path, config, now_ms=0)
    batch = make_batch_of(16 * KIB)
    while log.size_bytes < total_bytes:
        log.append_as_leader(batch, 1, 0)
    written, leo = log.size_bytes, log.log_end_offset
    storage.close()  # no close(): no fsync, index files never written, as after a crash
    storage = FileStorage()
    start = time.perf_counter()
    recovered, report = PartitionLog.open(storage, dir_path, config, now_ms=0,
                                          recovery_point=0, clean_shutdown=False)
    elapsed = time.perf_counter() - start
    assert recovered.log_end_offset == leo and not report.dropped_anything, report
    batches = sum(r.batches for r in report.recovered_segments)
    storage.close()
    shutil.rmtree(dir_path)
    return {"bytes": written, "batches": batches, "seconds": elapsed,
            "mib_s": written / MIB / elapsed}


# --- 4. descriptors -----------------------------------------------------------------------


def bench_descriptors(root: str, partitions: int) -> dict:
    before = fds_open()
    storage = FileStorage()  # the default LRU: 512 descriptors
    data_dir = f"{root}/fds"
    manager, _ = LogManager.open(storage, data_dir, now_ms=0)
    batch = make_batch_of(KIB)
    start = time.perf_counter()
    peak = 0
    for p in range(partitions):
        log = manager.get_or_create_log("bench", p, now_ms=0)
        log.append_as_leader(batch, 1, 0)
        if p % 500 == 0:
            peak = max(peak, fds_open() - before)
    create_s = time.perf_counter() - start
    for p in range(partitions):
        log = manager.get_log("bench", p)
        result = log.read(0, MIB, log.log_end_offset)
        with storage.open_slice(result.records) as fd:
            os.pread(fd, 16, result.records.position)
    peak = max(peak, fds_open() - before)
    start = time.perf_counter()
    manager.shutdown()
    shutdown_s = time.perf_counter() - start
    storage = FileStorage()
    start = time.perf_counter()
    manager, reports = LogManager.open(storage, data_dir, now_ms=0)
    reopen_s = time.perf_counter() - start
    peak = max(peak, fds_open() - before)
    assert len(reports) == partitions
    manager.shutdown()
    shutil.rmtree(data_dir)
    return {"partitions": partitions, "open_files_max": storage.open_files_max,
            "peak_extra_fds": peak, "create_and_append_s": create_s,
            "clean_shutdown_s": shutdown_s, "clean_reopen_s": reopen_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--append-mib", type=int, default=256)
    parser.add_argument("--read-mib", type=int, default=256)
    parser.add_argument("--recovery-bytes", type=int, default=1024 * MIB)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="ketch-bench-storage-", dir=args.dir)
    try:
        out: dict[str, object] = {}
        for label, size in (("16k", 16 * KIB), ("1m", MIB)):
            r = bench_append(root, size, args.append_mib * MIB, args.repeat)
            print(f"append {label}: {r['batches']} batches of {r['batch_bytes']} B: log "
                  f"{r['log_mib_s']:.0f} MiB/s, raw os.write {r['raw_mib_s']:.0f} MiB/s, "
                  f"ratio {r['ratio']:.2f} (median of {args.repeat}; "
                  f"{r['ratio_min']:.2f}..{r['ratio_max']:.2f})")
            out[f"append_{label}_ratio"] = round(r["ratio"], 3)
            out[f"append_{label}_log_mib_s"] = round(r["log_mib_s"], 1)
            out[f"append_{label}_raw_mib_s"] = round(r["raw_mib_s"], 1)
        r = bench_sendfile(root, args.read_mib * MIB, args.repeat)
        print(f"sendfile read: {r['bytes'] / MIB:.0f} MiB via PartitionLog.read + os.sendfile "
              f"{r['log_mib_s']:.0f} MiB/s, raw os.sendfile {r['raw_mib_s']:.0f} MiB/s, "
              f"ratio {r['ratio']:.2f} (median; {r['ratio_min']:.2f}..{r['ratio_max']:.2f})")
        out["sendfile_ratio"] = round(r["ratio"], 3)
        out["sendfile_log_mib_s"] = round(r["log_mib_s"], 1)
        out["sendfile_raw_mib_s"] = round(r["raw_mib_s"], 1)
        r = bench_recovery(root, args.recovery_bytes)
        print(f"recovery: {r['bytes'] / MIB:.0f} MiB unclean log ({r['batches']} batches of "
              f"16 KiB) in {r['seconds']:.2f} s ({r['mib_s']:.0f} MiB/s)")
        out["recovery_bytes"] = r["bytes"]
        out["recovery_seconds"] = round(r["seconds"], 3)
        out["recovery_mib_s"] = round(r["mib_s"], 1)
        r = bench_descriptors(root, args.partitions)
        print(f"descriptors: {r['partitions']} partitions, peak {r['peak_extra_fds']} extra open "
              f"fds (LRU {r['open_files_max']}); create+append {r['create_and_append_s']:.1f} s, "
              f"clean shutdown {r['clean_shutdown_s']:.1f} s, clean reopen {r['clean_reopen_s']:.1f} s")
        out["partitions"] = r["partitions"]
        out["open_fds_peak"] = r["peak_extra_fds"]
        out["open_files_max"] = r["open_files_max"]
        out["partitions_create_s"] = round(r["create_and_append_s"], 2)
        out["partitions_shutdown_s"] = round(r["clean_shutdown_s"], 2)
        out["partitions_reopen_s"] = round(r["clean_reopen_s"], 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
