"""Benchmark: the wire codec's cost per message, as a ratio to a floor measured here.

The codec (clients/protocol/_codec.py, _headers.py) is on every request a broker serves and
every response a client reads, so its microseconds per message are what this prints, for:
  produce-req:    Produce v11 request, 6 partitions, one 10-record batch each
  fetch-req-inc:  incremental Fetch v17 request (a fetch session), 6 partitions
  fetch-resp-6:   Fetch v17 response, 6 partitions with a 10-record batch each
  metadata-resp:  Metadata v12 response, 1 topic of 100 partitions (RF 3), 3 brokers
  fetch-resp-1k:  Fetch v17 response of 1,000 partitions without records (an idle follower's
                  or consumer's fetch)
Requests go through encode_request / decode_request, responses through encode_response /
decode_response: headers included, as a broker and a client use them.

The floor (the baseline each figure is divided by): for each message, one C call per
value the codec must touch (every field of every struct present in that version, every
array length, every tagged-field section), made as `struct.Struct.unpack_from(buf, offset)`
(decode) or `pack_into(buf, offset, value)` (encode) over a list of precomputed offsets
into a buffer of the message's size. That is the least any Python codec pays to visit each
field once: no branching on types, lengths or versions, no objects built, no strings
decoded. A ratio of 1 is unreachable; the ratio says how far above touching each field
once the codec is, and, unlike microseconds, it travels between machines and busy hours.

Times are this process's CPU time (time.process_time), not wall time: on a shared machine
the wall clock also counts the time other processes hold the CPU. Each figure is the least
of --repeats timings (noise only adds time), the codec and its floor timed in turn. No copy of an older codec is kept here: to compare trees, run this same
script in each tree, in the same window, alternately.

Usage: python bench/codec.py [--repeats 15] [--seconds 0.05]
Prints a table, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import struct
import sys
import time
import uuid
from typing import Any, Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from clients.protocol import (  # noqa: E402
    ApiKey, RequestHeader, decode_request, decode_response, encode_request, encode_response,
    messages,
)
from clients.records import Record, build_batch  # noqa: E402

PRODUCE_VERSION = 11
FETCH_VERSION = 17
METADATA_VERSION = 12
TOPIC_ID = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)


def _batch(base_offset: int = 0) -> bytes:
    records = [Record(offset=base_offset + i, timestamp=1_700_000_000_000 + i, key=None,
                      value=b"v" * 100) for i in range(10)]
    return bytes(build_batch(records, base_offset=base_offset))


def produce_request() -> tuple[RequestHeader, Any]:
    P = messages.ProduceRequest
    body = P(acks=-1, timeout_ms=30_000, topic_data=[P.TopicProduceData(name="bench", partition_data=[
        P.PartitionProduceData(index=i, records=_batch()) for i in range(6)])])
    return RequestHeader(ApiKey.PRODUCE, PRODUCE_VERSION, 7, "bench-client"), body


def fetch_request_incremental() -> tuple[RequestHeader, Any]:
    F = messages.FetchRequest
    body = F(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52_428_800, isolation_level=0,
             session_id=123_456, session_epoch=42, topics=[F.FetchTopic(topic_id=TOPIC_ID, partitions=[
                 F.FetchPartition(partition=i, current_leader_epoch=3, fetch_offset=1_000 + i,
                                  log_start_offset=-1, partition_max_bytes=1_048_576)
                 for i in range(6)])], forgotten_topics_data=[], rack_id="")
    return RequestHeader(ApiKey.FETCH, FETCH_VERSION, 8, "bench-client"), body


def _fetch_response(partitions: int, records: bytes | None) -> Any:
    R = messages.FetchResponse
    topics = []
    for t in range(max(1, partitions // 100)):
        count = min(partitions, 100) if partitions >= 100 else partitions
        topics.append(R.FetchableTopicResponse(topic_id=uuid.UUID(int=t + 1), partitions=[
            R.PartitionData(partition_index=i, error_code=0, high_watermark=5_000 + i,
                            last_stable_offset=5_000 + i, log_start_offset=0,
                            preferred_read_replica=-1, records=records)
            for i in range(count)]))
    return R(throttle_time_ms=0, error_code=0, session_id=123_456, responses=topics)


def metadata_response() -> Any:
    M = messages.MetadataResponse
    brokers = [M.MetadataResponseBroker(node_id=b, host="127.0.0.1", port=9092 + b, rack=None)
               for b in range(3)]
    partitions = [M.MetadataResponsePartition(
        error_code=0, partition_index=i, leader_id=i % 3, leader_epoch=5,
        replica_nodes=[i % 3, (i + 1) % 3, (i + 2) % 3], isr_nodes=[i % 3, (i + 1) % 3, (i + 2) % 3],
        offline_replicas=[]) for i in range(100)]
    return M(throttle_time_ms=0, brokers=brokers, cluster_id="bench-cluster", controller_id=0,
             topics=[M.MetadataResponseTopic(error_code=0, name="bench", topic_id=TOPIC_ID,
                                             is_internal=False, partitions=partitions,
                                             topic_authorized_operations=-2147483648)])


# ---------------------------------------------------------------- the floor

def touched_values(obj: Any, version: int) -> int:
    """How many values a codec touches for ``obj`` at ``version``: each field present in
    the version, each array element of a primitive array, and one tagged-field section per
    struct of a flexible version (counted from the schema the message class carries)."""
    spec = type(obj).SCHEMA
    return _count(spec, obj, version, spec.is_flexible(version))


def _count(spec: Any, obj: Any, version: int, flexible: bool) -> int:
    n = 1 if flexible else 0
    for f in spec.fields:
        lo, hi = f.versions
        if not lo <= version <= hi:
            continue
        value = getattr(obj, f.name)
        if flexible and f.tagged is not None and f.tagged[0] <= version <= f.tagged[1] \
                and value == spec.default_of(f):
            continue  # a tagged field at its default is not on the wire
        n += 1
        if f.sub_fields is not None and value is not None:
            child = spec.children[f.name]
            for item in (value if f.is_array else [value]):
                n += _count(child, item, version, flexible)
        elif f.is_array and value is not None:
            n += len(value)
    return n


def floor_decode(size: int, values: int) -> Callable[[], None]:
    buf = bytes(max(size, 16))
    plan = [(struct.Struct(">i").unpack_from, (i * 7) % (len(buf) - 8)) for i in range(values)]

    def run() -> None:
        for unpack_from, offset in plan:
            unpack_from(buf, offset)
    return run


def floor_encode(size: int, values: int) -> Callable[[], None]:
    out = bytearray(max(size, 16))
    plan = [(struct.Struct(">i").pack_into, (i * 7) % (len(out) - 8), i) for i in range(values)]

    def run() -> None:
        for pack_into, offset, value in plan:
            pack_into(out, offset, value)
    return run


# ---------------------------------------------------------------- timing

def _iterations(fn: Callable[[], Any], seconds: float) -> int:
    fn()
    iterations = 1
    while True:  # calibrate: enough iterations for ``seconds``
        t0 = time.process_time()
        for _ in range(iterations):
            fn()
        elapsed = time.process_time() - t0
        if elapsed >= seconds / 4:
            return max(1, int(iterations * seconds / elapsed))
        iterations *= 4


def best_us(fns: list[Callable[[], Any]], repeats: int, seconds: float) -> list[float]:
    """The least time per call of each function, timed in turn ``repeats`` times, so a
    figure and its floor see the same moments of a busy machine."""
    counts = [_iterations(fn, seconds) for fn in fns]
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, (fn, count) in enumerate(zip(fns, counts)):
            t0 = time.process_time()
            for _ in range(count):
                fn()
            best[i] = min(best[i], (time.process_time() - t0) / count)
    return [b * 1e6 for b in best]


def cases() -> dict[str, tuple[Callable[[], Any], Callable[[], Any], int, int]]:
    """name -> (encode, decode, encoded size, values touched)."""
    out = {}
    for name, (header, body) in {"produce-req": produce_request(),
                                 "fetch-req-inc": fetch_request_incremental()}.items():
        payload = encode_request(header, body)
        assert decode_request(payload) == (header, body), name
        out[name] = (lambda h=header, b=body: encode_request(h, b),
                     lambda p=payload: decode_request(p),
                     len(payload), touched_values(body, header.api_version) + 4)
    for name, (api_key, version, body) in {
            "fetch-resp-6": (ApiKey.FETCH, FETCH_VERSION, _fetch_response(6, _batch())),
            "metadata-resp": (ApiKey.METADATA, METADATA_VERSION, metadata_response()),
            "fetch-resp-1k": (ApiKey.FETCH, FETCH_VERSION, _fetch_response(1_000, b""))}.items():
        payload = encode_response(api_key, version, 9, body)
        decoded = decode_response(api_key, version, payload)[1]
        assert encode_response(api_key, version, 9, decoded) == payload, name
        out[name] = (lambda k=api_key, v=version, b=body: encode_response(k, v, 9, b),
                     lambda k=api_key, v=version, p=payload: decode_response(k, v, p),
                     len(payload), touched_values(body, version) + 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=15, help="timings of each figure (the least kept)")
    ap.add_argument("--seconds", type=float, default=0.05, help="length of one timing")
    args = ap.parse_args()
    rows = {}
    print(f"{'message':<15}{'bytes':>7}{'values':>8}{'decode us':>11}{'floor':>8}{'ratio':>7}"
          f"{'encode us':>11}{'floor':>8}{'ratio':>7}")
    for name, (encode, decode, size, values) in cases().items():
        dec, dec_floor, enc, enc_floor = best_us(
            [decode, floor_decode(size, values), encode, floor_encode(size, values)],
            args.repeats, args.seconds)
        rows[name] = {"bytes": size, "values": values,
                      "decode_us": round(dec, 2), "decode_floor_us": round(dec_floor, 2),
                      "decode_ratio": round(dec / dec_floor, 2),
                      "encode_us": round(enc, 2), "encode_floor_us": round(enc_floor, 2),
                      "encode_ratio": round(enc / enc_floor, 2)}
        print(f"{name:<15}{size:>7}{values:>8}{dec:>11.1f}{dec_floor:>8.1f}{dec / dec_floor:>7.2f}"
              f"{enc:>11.1f}{enc_floor:>8.1f}{enc / enc_floor:>7.2f}", flush=True)
    print(json.dumps({"bench": "codec", "cases": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
