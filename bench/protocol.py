"""Benchmark: decode and validate Produce requests carrying 1 MiB of 100-byte records.

What the broker does per Produce is the *batch-level path*: decode the request frame with
the schema codec (`clients.protocol.decode_request`), then `validate_batches` on each
partition's records (magic, lengths, codec id, CRC-32C; no record is decoded). Its cost is
compared with a bare CRC-32C pass over the same records bytes, measured here on the same
machine: the goal is a ratio within 2x. Per-record decoding (`decode_batches`:
decompression plus the zig-zag varint records, what a consumer does) is reported on its own.

Two request shapes, each uncompressed and lz4:
  one-batch:   1 partition, one 1 MiB batch (Produce v3+ allows one batch per partition)
  16k-batches: 64 partitions with one 16 KiB batch each (the Java producer's default
               batch.size), so per-batch and per-partition overheads show.
"1 MiB" is the uncompressed batches: as many 100-byte-value records (null key, no headers)
as fit in 1 MiB of record batch v2; lz4 then carries the same records in fewer bytes.

Also: bytes on the wire of one idle consumer fetch of 1,000 partitions, full vs incremental
(KIP-227 fetch session), against a real 1+1 cluster (goal >= 20x fewer; --skip-sessions).

Usage: python bench/protocol.py [--seconds-min 0.3] [--seed 1] [--skip-sessions]
Prints figures, then ONE JSON line (the last line).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import crc32c  # noqa: E402

from clients.protocol import (  # noqa: E402
    RequestHeader, decode_request, encode_message, encode_request, messages,
)
from clients.protocol.api_keys import ApiKey  # noqa: E402
from clients.records import (  # noqa: E402
    CompressionType,
    RecordBatchBuilder,
    decode_batches,
    validate_batches,
)

PRODUCE_VERSION = 9  # flexible; what current Java and librdkafka producers send
PAYLOAD_BYTES = 1 << 20
RECORD_VALUE_BYTES = 100


def _record_values(rng: random.Random, count: int) -> list[bytes]:
    # Text-like values: compressible, but not trivially so (not all zeros).
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(512)]
    values = []
    for _ in range(count):
        v = b" ".join(rng.choice(words) for _ in range(30))[:RECORD_VALUE_BYTES]
        values.append(v.ljust(RECORD_VALUE_BYTES, b"."))
    return values


def _record_count_for(values: list[bytes], start_ms: int) -> int:
    """How many records fit in PAYLOAD_BYTES of uncompressed batch (header included)."""
    builder = RecordBatchBuilder()
    for j, v in enumerate(values):
        builder.append(start_ms + j, None, v)
        if builder.size_in_bytes > PAYLOAD_BYTES:
            return j
    return len(values)


def _build_batches(values: list[bytes], per_batch: int, compression: CompressionType,
                   start_ms: int) -> list[bytes]:
    batches = []
    for i in range(0, len(values), per_batch):
        builder = RecordBatchBuilder(compression=compression, producer_id=1000, producer_epoch=0,
                                     base_sequence=i)
        for j, v in enumerate(values[i : i + per_batch]):
            builder.append(start_ms + j, None, v)
        batches.append(builder.build())
    return batches


def _produce_payload(batches: list[bytes]) -> bytes:
    body = messages.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            messages.ProduceRequest.TopicProduceData(
                name="bench",
                partition_data=[
                    messages.ProduceRequest.PartitionProduceData(index=p, records=b)
                    for p, b in enumerate(batches)
                ],
            )
        ],
    )
    header = RequestHeader(api_key=ApiKey.PRODUCE, api_version=PRODUCE_VERSION, correlation_id=7,
                           client_id="bench")
    return encode_request(header, body)


def _time_per_call(fn, seconds_min: float) -> float:
    """Median seconds per call over 7 rounds, each running at least seconds_min / 7."""
    fn()  # warm up
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= seconds_min / 7:
            break
        n *= 2
    rounds = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - t0) / n)
    return statistics.median(rounds)


def _partition_records(body) -> list[bytes]:
    return [p.records for t in body.topic_data for p in t.partition_data]


def run_case(name: str, payload: bytes, record_count: int, seconds_min: float) -> dict:
    _, body = decode_request(payload)
    records = _partition_records(body)
    records_bytes = sum(len(r) for r in records)

    def crc_only() -> None:
        for r in records:
            crc32c.crc32c(r)

    def validate_only() -> None:
        for r in records:
            validate_batches(r)

    def frame_decode_only() -> None:
        decode_request(payload)

    def batch_level() -> None:
        _, b = decode_request(payload)
        for t in b.topic_data:
            for p in t.partition_data:
                validate_batches(p.records)

    def per_record() -> None:
        for r in records:
            decode_batches(r)

    # Sanity: the paths agree on what is in the request.
    assert sum(h.records_count for r in records for h in validate_batches(r)) == record_count
    assert sum(len(b.records) for r in records for b in decode_batches(r)) == record_count

    t_crc = _time_per_call(crc_only, seconds_min)
    t_validate = _time_per_call(validate_only, seconds_min)
    t_frame = _time_per_call(frame_decode_only, seconds_min)
    t_batch = _time_per_call(batch_level, seconds_min)
    t_record = _time_per_call(per_record, seconds_min)
    return {
        "case": name,
        "records": record_count,
        "records_bytes": records_bytes,
        "partitions": len(records),
        "crc32c_bytes_per_s": records_bytes / t_crc,
        "validate_batches_bytes_per_s": records_bytes / t_validate,
        "frame_decode_us": t_frame * 1e6,
        "batch_level_bytes_per_s": records_bytes / t_batch,
        "batch_level_records_per_s": record_count / t_batch,
        "per_record_bytes_per_s": records_bytes / t_record,
        "per_record_records_per_s": record_count / t_record,
        "batch_level_to_crc32c_ratio": t_batch / t_crc,
        "validate_batches_to_crc32c_ratio": t_validate / t_crc,
    }


SESSION_PARTITIONS = 1000


def idle_fetch_bytes(partitions: int = SESSION_PARTITIONS) -> dict:
    """Bytes on the wire of one idle consumer fetch of ``partitions`` partitions, against a
    real broker (1 controller, 1 broker): a full fetch (no session, what every fetch was
    before KIP-227) vs an incremental fetch on a session (request and response each, as
    framed: 4-byte size, header, body; re-encoded from the decoded answer, which our codec
    encodes exactly as it decoded)."""
    import tempfile

    from clients import connection
    from clients.admin import Admin, NewTopic
    from clients.cli.launcher import LocalCluster
    F = messages.FetchRequest

    def request(session_id: int, epoch: int, listed: bool):
        return F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20,
                 isolation_level=0, session_id=session_id, session_epoch=epoch,
                 topics=[F.FetchTopic(topic="idle", partitions=[
                     F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                     for p in range(partitions)])] if listed else [])

    def wire(req, port: int) -> tuple[int, int, object]:
        header = RequestHeader(ApiKey.FETCH, 12, 1, "bench")
        resp = connection.roundtrip("127.0.0.1", port, ApiKey.FETCH, 12, req, timeout_s=30,
                                    client_id="bench")
        # the response header of a flexible version: correlation id + empty tagged fields
        return len(encode_request(header, req)), 4 + 4 + 1 + len(encode_message(resp, 12)), resp

    with tempfile.TemporaryDirectory(prefix="ketch-bench-sessions-") as d:
        cluster = LocalCluster(d, controllers=1, brokers=1, broker_props={
            "max.incremental.fetch.session.cache.slots": str(partitions)})
        try:
            cluster.start(timeout_s=120)
            port = cluster.spec.brokers[0].port
            admin = Admin({"bootstrap.servers": cluster.spec.bootstrap_servers})
            try:
                admin.create_topics([NewTopic("idle", num_partitions=partitions, replication_factor=1)])
            finally:
                admin.close()
            deadline = time.monotonic() + 60
            while True:                  # until the broker leads every partition
                _, _, resp = wire(request(0, -1, True), port)
                if all(p.error_code == 0 for t in resp.responses for p in t.partitions) and \
                        sum(len(t.partitions) for t in resp.responses) == partitions:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit("bench: the broker never led every partition")
                time.sleep(0.2)
            full_req, full_resp, _ = wire(request(0, -1, True), port)
            _, _, opened = wire(request(0, 0, True), port)
            inc_req, inc_resp, _ = wire(request(opened.session_id, 1, False), port)
        finally:
            cluster.stop(timeout_s=30)
    full, incremental = full_req + full_resp, inc_req + inc_resp
    return {"partitions": partitions, "full_request_bytes": full_req, "full_response_bytes": full_resp,
            "incremental_request_bytes": inc_req, "incremental_response_bytes": inc_resp,
            "session_id": opened.session_id, "full_to_incremental_ratio": round(full / incremental, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-min", type=float, default=0.3,
                        help="minimum seconds spent timing each path (default 0.3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-sessions", action="store_true",
                        help="skip the fetch-session measurement (it starts a 1+1 cluster)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    start_ms = 1_700_000_000_000
    values = _record_values(rng, PAYLOAD_BYTES // RECORD_VALUE_BYTES)
    count = _record_count_for(values, start_ms)
    values = values[:count]
    results = []
    for shape, per_batch in (("one-batch", count), ("16k-batches", 16 * 1024 // RECORD_VALUE_BYTES)):
        for compression in (CompressionType.NONE, CompressionType.LZ4):
            batches = _build_batches(values, per_batch, compression, start_ms)
            payload = _produce_payload(batches)
            name = f"{shape}/{compression.name.lower()}"
            r = run_case(name, payload, count, args.seconds_min)
            results.append(r)
            print(
                f"{name:22s} {r['partitions']:3d} partition(s), {r['records']} records, "
                f"{r['records_bytes'] / 1024:7.1f} KiB of batches, frame {len(payload) / 1024:7.1f} KiB"
            )
            print(f"    bare crc32c           {r['crc32c_bytes_per_s'] / 1e9:8.2f} GB/s")
            print(f"    validate_batches      {r['validate_batches_bytes_per_s'] / 1e9:8.2f} GB/s"
                  f"   ({r['validate_batches_to_crc32c_ratio']:.2f}x crc32c)")
            print(f"    frame decode alone    {r['frame_decode_us']:8.1f} us per request")
            print(f"    batch level (frame + validate)"
                  f" {r['batch_level_bytes_per_s'] / 1e9:6.2f} GB/s, "
                  f"{r['batch_level_records_per_s'] / 1e6:7.2f} M records/s"
                  f"   ({r['batch_level_to_crc32c_ratio']:.2f}x crc32c; goal <= 2x)")
            print(f"    per-record decode     {r['per_record_bytes_per_s'] / 1e6:8.1f} MB/s, "
                  f"{r['per_record_records_per_s'] / 1e6:7.3f} M records/s")
    summary = {
        "bench": "protocol",
        "produce_version": PRODUCE_VERSION,
        "payload_bytes": PAYLOAD_BYTES,
        "record_value_bytes": RECORD_VALUE_BYTES,
        "crc32c_hardware": bool(crc32c.hardware_based),
        "batch_level_to_crc32c_ratio_max": max(r["batch_level_to_crc32c_ratio"] for r in results),
        "cases": {
            r["case"]: {
                k: (round(v, 3) if isinstance(v, float) else v)
                for k, v in r.items() if k != "case"
            }
            for r in results
        },
    }
    if not args.skip_sessions:
        sessions = idle_fetch_bytes()
        print(f"idle consumer fetch of {sessions['partitions']} partitions: full "
              f"{sessions['full_request_bytes'] + sessions['full_response_bytes']:,} B on the wire, "
              f"incremental (KIP-227 session) "
              f"{sessions['incremental_request_bytes'] + sessions['incremental_response_bytes']:,} B: "
              f"{sessions['full_to_incremental_ratio']}x fewer (goal >= 20x)")
        summary["idle_fetch_sessions"] = sessions
    print(json.dumps(summary, separators=(",", ":")))


if __name__ == "__main__":
    main()
