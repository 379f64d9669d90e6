"""Golden bytes from real clients: Ketch's codec reads what they send and writes it back exactly.

The frames in ``golden/`` were captured by ``tools/capture_golden.py`` from confluent-kafka
(librdkafka 2.16), kcat (librdkafka 2.0.2), kafka-python and aiokafka talking to a capturing
broker, plus frames from kafka-python's and aiokafka's own encoders; the responses were
encoded by kafka-python's protocol classes. These tests need none of those tools.
"""
from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import crc32c
import pytest

from clients.protocol import (
    NEED_DATA, ClientConnection, RequestReceived, ResponseHeader, ResponseReceived,
    ServerConnection, decode_request, decode_response, encode_request, encode_response, messages,
)
from tests.clients.protocol.golden import GoldenCase, load

REQUESTS = load(direction="request")
RESPONSES = load(direction="response")
LIVE_CLIENTS = ("confluent-kafka", "kcat", "kafka-python", "aiokafka")


def test_the_golden_set_is_all_there() -> None:
    # Guards against an emptied or truncated regeneration: every live client, the APIs the
    # issue names, and both directions must be present.
    clients = Counter(c.client for c in REQUESTS)
    for client in (*LIVE_CLIENTS, "kafka-python-encoder", "aiokafka-encoder"):
        assert clients[client] >= 10, (client, clients)
    apis = {c.api_name for c in REQUESTS}
    assert apis >= {
        "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch",
        "CreateTopics", "DeleteTopics", "CreatePartitions", "DescribeConfigs",
        "IncrementalAlterConfigs", "DescribeCluster", "InitProducerId", "FindCoordinator",
        "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
        "ListGroups", "DescribeGroups", "DeleteGroups", "SaslHandshake", "SaslAuthenticate",
        "DescribeQuorum",
    }, sorted(apis)
    assert {c.api_name for c in RESPONSES} >= {"ApiVersions", "Metadata", "Produce", "Fetch"}
    assert sum(len(c.frame) for c in load()) < 1 << 20


@pytest.mark.parametrize("case", REQUESTS, ids=str)
def test_request_decodes_and_reencodes_byte_for_byte(case: GoldenCase) -> None:
    header, body = decode_request(case.payload)
    assert (header.api_key, header.api_version) == (case.api_key, case.api_version)
    assert header.correlation_id == case.correlation_id
    assert encode_request(header, body) == case.payload


@pytest.mark.parametrize("case", REQUESTS, ids=str)
def test_framing_gives_the_same_request_for_any_chunking(case: GoldenCase) -> None:
    expected_header, expected_body = decode_request(case.payload)
    rng = random.Random(case.sha256)   # deterministic per frame
    cut_sets = [
        [],                                                  # whole
        list(range(1, len(case.frame))),                     # byte by byte
        sorted(rng.sample(range(1, len(case.frame)), k=min(5, len(case.frame) - 1))),
    ]
    for cuts in cut_sets:
        conn = ServerConnection(frame_bytes_max=len(case.frame))
        events = []
        for start, end in zip([0, *cuts], [*cuts, len(case.frame)]):
            conn.receive_data(case.frame[start:end])
            while (event := conn.next_event()) is not NEED_DATA:
                events.append(event)
        assert events == [RequestReceived(expected_header, expected_body, len(case.payload))]
        assert conn.buffered_bytes == 0


@pytest.mark.parametrize("case", RESPONSES, ids=str)
def test_response_decodes_and_reencodes_byte_for_byte(case: GoldenCase) -> None:
    header, body = decode_response(case.api_key, case.api_version, case.payload)
    assert header.correlation_id == case.correlation_id
    assert encode_response(case.api_key, case.api_version, header.correlation_id, body) == case.payload


@pytest.mark.parametrize("case", RESPONSES, ids=str)
def test_client_framing_gives_the_same_response_for_any_chunking(case: GoldenCase) -> None:
    # A ClientConnection matches responses to its own correlation ids (from 0), so the
    # golden response is renumbered to answer the first request sent.
    request_cls = getattr(messages, f"{case.api_name}Request")
    renumbered = case.frame[:4] + (0).to_bytes(4, "big") + case.frame[8:]
    _, expected_body = decode_response(case.api_key, case.api_version, renumbered[4:])
    rng = random.Random(case.sha256)
    for cuts in ([], list(range(1, len(renumbered))),
                 sorted(rng.sample(range(1, len(renumbered)), k=min(5, len(renumbered) - 1)))):
        conn = ClientConnection(client_id="golden", frame_bytes_max=len(renumbered))
        correlation_id, _ = conn.send(case.api_key, case.api_version, request_cls())
        assert correlation_id == 0
        events = []
        for start, end in zip([0, *cuts], [*cuts, len(renumbered)]):
            conn.receive_data(renumbered[start:end])
            while (event := conn.next_event()) is not NEED_DATA:
                events.append(event)
        assert events == [ResponseReceived(ResponseHeader(0), expected_body,
                                           case.api_key, case.api_version)]
        assert conn.in_flight == 0


# -- what the bytes mean, checked independently of the round trip --------------------------

PRODUCE_REQUESTS = [c for c in REQUESTS if c.api_name == "Produce"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _batches(records: bytes) -> list[bytes]:
    batches, pos = [], 0
    while pos < len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        batches.append(records[pos:pos + 12 + length])
        pos += 12 + length
    assert pos == len(records)
    return batches


@pytest.mark.parametrize("case", PRODUCE_REQUESTS, ids=str)
def test_produce_records_are_the_clients_batches(case: GoldenCase) -> None:
    # The decoded `records` field must be exactly the client's v2 batches: each batch's
    # CRC-32C (over attributes..end) holds, and the compression bits match the codec the
    # client was told to use.
    _, body = decode_request(case.payload)
    acks_expected = 0 if case.variant == "acks=0" else None
    if acks_expected is not None:
        assert body.acks == acks_expected
    codec = next((CODEC_IDS[v.split("=")[1]] for v in case.variant.split(",")
                  if v.startswith("compression=")), None)
    seen = 0
    for topic in body.topic_data:
        assert topic.name == "golden"
        for partition in topic.partition_data:
            for batch in _batches(partition.records):
                assert batch[16] == 2                                    # magic
                (crc,) = struct.unpack_from(">I", batch, 17)
                assert crc32c.crc32c(batch[21:]) == crc
                attributes = struct.unpack_from(">h", batch, 21)[0]
                if codec is not None and partition.records:
                    assert attributes & 0x7 == codec, case.variant
                seen += 1
    assert seen >= 1


def test_apiversions_responses_carry_the_advertised_ranges() -> None:
    # ApiVersions replies always use response header v0 (KIP-511), even v3/v4 whose bodies
    # are flexible: decoding them with a v1 header would misread the first body byte.
    cases = [c for c in RESPONSES if c.api_name == "ApiVersions"]
    assert {c.api_version for c in cases} >= {0, 3, 4}
    unsupported = 0
    for case in cases:
        _, body = decode_response(case.api_key, case.api_version, case.payload)
        ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        if case.variant == "unsupported-version-reply":
            # The answer to a too-new ApiVersions request: error 35 in a v0 body that
            # still names ApiVersions' own range, so the client can retry lower.
            assert case.api_version == 0
            assert body.error_code == 35 and ranges == {18: (0, 4)}
            unsupported += 1
            continue
        assert body.error_code == 0
        assert ranges[0] == (0, 11) and ranges[1] == (4, 12) and ranges[18] == (0, 4)
    assert unsupported == 1


def test_metadata_responses_name_the_capture_broker() -> None:
    cases = [c for c in RESPONSES if c.api_name == "Metadata"]
    assert len({c.api_version for c in cases}) >= 5
    for case in cases:
        _, body = decode_response(case.api_key, case.api_version, case.payload)
        assert [b.node_id for b in body.brokers] == [1]
        assert body.brokers[0].host == "127.0.0.1"
        for topic in body.topics:
            assert [p.partition_index for p in topic.partitions] == [0, 1]
            assert all(p.leader_id == 1 and p.replica_nodes == [1] for p in topic.partitions)


def test_fetch_responses_carry_kafka_pythons_batches() -> None:
    cases = [c for c in RESPONSES if c.api_name == "Fetch"]
    assert cases
    with_records = 0
    for case in cases:
        _, body = decode_response(case.api_key, case.api_version, case.payload)
        for topic in body.responses:
            for partition in topic.partitions:
                assert partition.high_watermark == 3
                if partition.records:
                    for batch in _batches(partition.records):
                        (crc,) = struct.unpack_from(">I", batch, 17)
                        assert crc32c.crc32c(batch[21:]) == crc
                        with_records += 1
    assert with_records >= 1


def test_request_headers_keep_the_clients_ids() -> None:
    ids = {decode_request(c.payload)[0].client_id for c in REQUESTS}
    assert {"golden-confluent", "golden-kcat", "golden-kafka-python", "golden-aiokafka"} <= ids


# -- an independent decoder: kafka-python reads the same values from the same bytes --------


def _kafka_python_classes() -> dict[tuple[int, str], type]:
    import importlib
    import inspect
    import pkgutil

    import kafka.protocol as kp
    from kafka.protocol.api_message import ApiMessage

    found: dict[tuple[int, str], type] = {}
    for info in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" in info.name or "generate" in info.name:
            continue
        for obj in vars(importlib.import_module(info.name)).values():
            if (inspect.isclass(obj) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                    and getattr(obj, "_json", None)):
                found[(obj.API_KEY, obj.type)] = obj
    return found


def _bitmask(value: set[int] | None) -> int:
    # kafka-python turns authorized-operations int32s into sets of bit numbers; None is
    # Kafka's "not requested" sentinel INT32_MIN (bit 31 alone).
    if value is None:
        return -(1 << 31)
    mask = sum(1 << bit for bit in value)
    return mask - (1 << 32) if mask >= 1 << 31 else mask


def _same_values(theirs_obj: Any, ours: Any, version: int, path: str, diffs: list[str]) -> None:
    """Compare every field kafka-python decodes at this version with Ketch's value."""
    for f in theirs_obj._struct._fields:
        if not f.for_version_q(version):
            continue
        name = f.name
        theirs = getattr(theirs_obj, name)
        if not hasattr(ours, name):
            # kafka-python renames the authorized-operations bitfields (json_patch).
            alias = [n for n in dir(ours) if n.endswith("_" + name)]
            if len(alias) != 1:
                diffs.append(f"{path}.{name}: not in Ketch's message")
                continue
            name = alias[0]
        mine = getattr(ours, name)
        where = f"{path}.{name}"
        if isinstance(theirs, set) or (theirs is None and name.endswith("authorized_operations")):
            if _bitmask(theirs) != mine:
                diffs.append(f"{where}: kafka-python {theirs!r}, Ketch {mine!r}")
        elif f.is_struct_array() and theirs is not None and mine is not None:
            if len(theirs) != len(mine):
                diffs.append(f"{where}: {len(theirs)} elements, Ketch {len(mine)}")
                continue
            for i, (a, b) in enumerate(zip(theirs, mine)):
                _same_values(a, b, version, f"{where}[{i}]", diffs)
        elif f.is_struct() and mine is not None:
            if theirs is None:
                # An absent tagged struct: Ketch holds the schema's default instead.
                if mine != type(mine)():
                    diffs.append(f"{where}: absent for kafka-python, Ketch {mine!r}")
            else:
                _same_values(theirs, mine, version, where, diffs)
        else:
            if isinstance(theirs, uuid.UUID | None) and isinstance(mine, uuid.UUID) and mine.int == 0:
                mine = None   # kafka-python reads the all-zero UUID as None
            if isinstance(theirs, bytearray | memoryview):
                theirs = bytes(theirs)
            if isinstance(mine, tuple) and isinstance(theirs, list):
                mine = list(mine)
            if theirs != mine:
                diffs.append(f"{where}: kafka-python {theirs!r}, Ketch {mine!r}")


@pytest.mark.interop
@pytest.mark.parametrize("case", load(), ids=str)
def test_kafka_python_decodes_the_same_values(case: GoldenCase) -> None:
    # Byte-exact round trips cannot see a field decoded under the wrong name or type if the
    # encoder makes the mirror-image mistake; a second, independent decoder can.
    pytest.importorskip("kafka")
    classes = _KAFKA_PYTHON.setdefault("classes", _kafka_python_classes())
    cls = classes.get((case.api_key, case.direction))
    if cls is None:
        pytest.skip(f"kafka-python has no {case.api_name} {case.direction} class")
    lo, _, hi = cls.json["validVersions"].partition("-")
    if not int(lo) <= case.api_version <= int(hi or lo):
        pytest.skip(f"kafka-python's {case.api_name} schema lacks v{case.api_version}")
    theirs = cls.decode(case.payload, version=case.api_version, header=True)
    if case.direction == "request":
        _, ours = decode_request(case.payload)
    else:
        _, ours = decode_response(case.api_key, case.api_version, case.payload)
    diffs: list[str] = []
    _same_values(theirs, ours, case.api_version, case.api_name, diffs)
    assert not diffs, diffs


_KAFKA_PYTHON: dict[str, dict] = {}


# -- optional: capture afresh from kcat and check the live bytes too -----------------------

TOOLS = Path(__file__).resolve().parents[3] / "tools"


@pytest.mark.interop
@pytest.mark.process
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_live_kcat_produce_round_trips(tmp_path: Path) -> None:
    # A fresh capture (about a second): kcat produces through the capturing broker; every
    # request it sends must decode and re-encode exactly.
    pytest.importorskip("kafka")
    sys.path.insert(0, str(TOOLS))
    try:
        import capture_golden as capture
    finally:
        sys.path.remove(str(TOOLS))
    rec = capture.Recorder()
    with capture.CaptureServer(rec, "kcat", "live", "live") as server:
        done = subprocess.run(
            ["kcat", "-b", server.bootstrap, "-P", "-t", "golden", "-p", "0", "-K:", "-z", "lz4",
             "-H", "h=v", "-X", "client.id=golden-kcat-live"],
            input="k:v\n:no key\n", capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert not server.errors
    requests = [c for c in rec.frames if c.direction == "request"]
    assert {c.api_key for c in requests} >= {18, 3, 0}   # ApiVersions, Metadata, Produce
    for c in requests:
        header, body = decode_request(c.frame[4:])
        assert encode_request(header, body) == c.frame[4:]
