"""``ketch dump-log FILE...``: decode a partition's files offline (kafka-dump-log).

Works on the files themselves, read-only, no cluster needed. The kind comes from the
suffix, the segment's base offset from the 20-digit file name (Kafka's naming):

- ``.log``: Kafka's record batches (v2), laid end to end. Per batch: position, base and
  last offset, count, leader epoch, producer id/epoch, base sequence, transactional and
  control flags, compression, CRC (checked), max timestamp, size. ``--records`` (or
  ``--print-data``) decodes the records too: offset, timestamp, key, value, headers.
  A torn tail (a crash in mid-append) is reported, not an error.
- ``.index``: 8-byte entries, big-endian int32 offset relative to the base and int32
  position in the .log: printed as absolute offset and position.
- ``.timeindex``: 12-byte entries, int64 timestamp and int32 relative offset.

Index files are preallocated by some brokers; trailing all-zero entries after the first
are not entries and are not printed. The decoding of batches is Ketch's one codec
(``clients.records.batch``), as the broker and the clients use it.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from typing import Any, Iterator

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch dump-log ketch-data/broker-1/orders-0/00000000000000000000.log
  ketch dump-log ketch-data/broker-1/orders-0/00000000000000000000.log --records
  ketch dump-log ketch-data/broker-1/orders-0/00000000000000000000.index --output json
"""

_INDEX = struct.Struct(">ii")
_TIME_INDEX = struct.Struct(">qi")
_READ_CHUNK = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dump-log", help="decode segment .log, .index and .timeindex files",
                       description=__doc__.split("\n\n")[0].replace("``", ""), epilog=EXAMPLES)
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--records", "--print-data", action="store_true",
                   help="decode each batch's records too")
    c.add_output_args(p)
    p.set_defaults(run=c.guarded(run))


def base_offset_of(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        raise c.CliError(f"{path}: not a segment file name (20 digits of base offset, "
                         f"then .log, .index or .timeindex)")
    return int(stem)


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "backslashreplace")


def dump_segment(data: bytes, records: bool) -> Iterator[dict[str, Any]]:
    from clients.records.batch import decode_batch, iter_batches
    from clients.records.compression import CompressionType
    from clients.records.errors import RecordError
    pos = 0
    try:
        for pos, h in iter_batches(data, partial_tail_ok=True):
            entry: dict[str, Any] = {
                "position": pos, "base_offset": h.base_offset, "last_offset": h.last_offset,
                "count": h.records_count, "partition_leader_epoch": h.partition_leader_epoch,
                "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
                "base_sequence": h.base_sequence, "is_transactional": h.is_transactional,
                "is_control": h.is_control,
                "compression": CompressionType(h.compression).name.lower(),
                "crc": h.crc, "max_timestamp": h.max_timestamp, "size": h.size_in_bytes,
            }
            if records:
                batch = decode_batch(data, pos, check_crc=False)
                entry["records"] = [{"offset": r.offset, "timestamp": r.timestamp,
                                     "key": _text(r.key), "value": _text(r.value),
                                     "headers": [[k, _text(v)] for k, v in r.headers]}
                                    for r in batch.records]
            yield entry
            pos += h.size_in_bytes
    except RecordError as e:
        raise c.CliError(f"corrupt batch after position {pos}: {c.one_line(e)}") from None
    if pos < len(data):
        yield {"position": pos, "torn_tail_bytes": len(data) - pos}


def dump_index(data: bytes, base: int) -> list[dict[str, int]]:
    out = []
    for i in range(len(data) // _INDEX.size):
        rel, position = _INDEX.unpack_from(data, i * _INDEX.size)
        if i and rel == 0 and position == 0:
            break                        # preallocated, unused
        out.append({"offset": base + rel, "position": position})
    return out


def dump_time_index(data: bytes, base: int) -> list[dict[str, int]]:
    out = []
    for i in range(len(data) // _TIME_INDEX.size):
        ts, rel = _TIME_INDEX.unpack_from(data, i * _TIME_INDEX.size)
        if i and ts == 0 and rel == 0:
            break
        out.append({"timestamp": ts, "offset": base + rel})
    return out


def dump_file(path: str, records: bool) -> dict[str, Any]:
    base = base_offset_of(path)
    kind = path.rsplit(".", 1)[-1]
    if kind not in ("log", "index", "timeindex"):
        raise c.CliError(f"{path}: ketch dump-log reads .log, .index and .timeindex files")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise c.CliError(f"cannot read {path}: {e.strerror}") from None
    out: dict[str, Any] = {"file": path, "kind": kind, "base_offset": base, "size": len(data)}
    if kind == "log":
        entries = list(dump_segment(data, records))
        out["batches"] = [e for e in entries if "torn_tail_bytes" not in e]
        torn = [e for e in entries if "torn_tail_bytes" in e]
        out["torn_tail_bytes"] = torn[0]["torn_tail_bytes"] if torn else 0
    elif kind == "index":
        if len(data) % _INDEX.size:
            raise c.CliError(f"{path}: {len(data)} bytes is not a whole number of 8-byte entries")
        out["entries"] = dump_index(data, base)
    else:
        if len(data) % _TIME_INDEX.size:
            raise c.CliError(f"{path}: {len(data)} bytes is not a whole number of 12-byte entries")
        out["entries"] = dump_time_index(data, base)
    return out


def run(args: argparse.Namespace) -> int:
    dumps = [dump_file(p, args.records) for p in args.files]
    if args.output == "json":
        c.print_json(dumps if len(dumps) > 1 else dumps[0])
        return 0
    for i, d in enumerate(dumps):
        if i:
            print()
        print(f"Dumping {d['file']} ({d['kind']}, base offset {d['base_offset']}, {d['size']} bytes)")
        if d["kind"] == "log":
            for b in d["batches"]:
                print(f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} "
                      f"count: {b['count']} position: {b['position']} size: {b['size']} "
                      f"leaderEpoch: {b['partition_leader_epoch']} producerId: {b['producer_id']} "
                      f"producerEpoch: {b['producer_epoch']} baseSequence: {b['base_sequence']} "
                      f"isTransactional: {b['is_transactional']} isControl: {b['is_control']} "
                      f"compression: {b['compression']} maxTimestamp: {b['max_timestamp']} "
                      f"crc: {b['crc']}")
                for r in b.get("records", ()):
                    hdrs = ",".join(f"{k}={v}" for k, v in r["headers"])
                    print(f"| offset: {r['offset']} timestamp: {r['timestamp']} "
                          f"key: {r['key']} value: {r['value']}" + (f" headers: {hdrs}" if hdrs else ""))
            if d["torn_tail_bytes"]:
                print(f"torn tail: {d['torn_tail_bytes']} bytes after the last whole batch",
                      file=sys.stderr)
        else:
            for e in d["entries"]:
                print("  ".join(f"{k}: {v}" for k, v in e.items()))
    return 0
