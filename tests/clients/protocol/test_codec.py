"""The schema-driven codec: round trips for every message at every version, hand-checked
bytes, and malformed input that may only ever raise CorruptFrameError."""
from __future__ import annotations

import pathlib
import random
import subprocess
import sys
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clients.protocol import (
    ApiKey, CorruptFrameError, RequestHeader, UnsupportedVersionError, decode_message,
    decode_request, decode_response, encode_message, encode_request, encode_response, messages,
)
from clients.protocol import _codec
from clients.protocol.api_keys import REQUEST_NAMES, RESPONSE_NAMES
from tests.clients.protocol.strategies import message_strategy, random_message

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "kafka-protocol"

ALL_VERSIONS = [
    (name, v)
    for name in _codec.schema_names()
    for v in range(_codec.spec_for(name).min_version, _codec.spec_for(name).max_version + 1)
]


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/kafka-protocol is not beside the repo")
def test_generated_schemas_are_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_protocol.py"), "--check",
                             "--shared", str(SHARED)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_issue_api_is_covered() -> None:
    wanted = ["ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch",
              "CreateTopics", "DeleteTopics", "CreatePartitions", "DescribeConfigs",
              "IncrementalAlterConfigs", "DescribeCluster", "InitProducerId", "FindCoordinator",
              "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
              "ListGroups", "DescribeGroups", "DeleteGroups", "DescribeQuorum", "BrokerRegistration",
              "BrokerHeartbeat", "AlterPartition", "DescribeLogDirs", "SaslHandshake",
              "SaslAuthenticate"]
    for api in wanted:
        for kind in ("Request", "Response"):
            assert getattr(messages, api + kind).SCHEMA.kind == kind.lower()
    assert ApiKey.PRODUCE == 0 and ApiKey.FETCH == 1 and ApiKey.API_VERSIONS == 18
    assert ApiKey.ALTER_PARTITION == 56 and ApiKey.DESCRIBE_QUORUM == 55


@pytest.mark.parametrize("name,version", ALL_VERSIONS, ids=[f"{n}-v{v}" for n, v in ALL_VERSIONS])
@settings(max_examples=5)
@given(data=st.data())
def test_round_trip_every_message_every_version(name: str, version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(name, version))
    encoded = encode_message(obj, version)
    assert decode_message(type(obj), version, encoded) == obj
    # Truncations of a valid body only ever raise the typed error.
    if encoded:
        cut = data.draw(st.integers(0, len(encoded) - 1))
        try:
            decode_message(type(obj), version, encoded[:cut])
        except CorruptFrameError:
            pass


def _truncations_raise_only_the_typed_error(decode: Any, encoded: bytes) -> None:
    for cut in range(len(encoded)):
        try:
            decode(encoded[:cut])
        except CorruptFrameError:
            continue
        raise AssertionError(f"a body cut to {cut} of {len(encoded)} bytes decoded")


@pytest.mark.parametrize("name", _codec.schema_names())
def test_seeded_random_instances_round_trip_and_every_truncation_is_typed(name: str) -> None:
    """Every schema at every version: random instances (seeded per schema, so a failure
    reproduces alone) encode, decode to an equal object and re-encode to the same bytes;
    the encoding cut at every position raises CorruptFrameError and nothing else. Requests
    and responses also go through their headers."""
    spec = _codec.spec_for(name)
    rng = random.Random(name)
    for version in range(spec.min_version, spec.max_version + 1):
        for _ in range(2):
            obj = random_message(name, version, rng)
            encoded = encode_message(obj, version)
            decoded = decode_message(type(obj), version, encoded)
            assert decoded == obj, (name, version)
            assert encode_message(decoded, version) == encoded, (name, version)
            _truncations_raise_only_the_typed_error(
                lambda b: decode_message(type(obj), version, b), encoded)
        if spec.kind == "request" and spec.api_key in REQUEST_NAMES:
            payload = encode_request(RequestHeader(spec.api_key, version, 5, "c"), obj)
            assert decode_request(payload)[1] == obj
            _truncations_raise_only_the_typed_error(decode_request, payload)
        elif spec.kind == "response" and spec.api_key in RESPONSE_NAMES:
            payload = encode_response(spec.api_key, version, 5, obj)
            assert decode_response(spec.api_key, version, payload)[1] == obj
            _truncations_raise_only_the_typed_error(
                lambda b: decode_response(spec.api_key, version, b), payload)


def test_metadata_request_v0_bytes_by_hand() -> None:
    body = messages.MetadataRequest(topics=[messages.MetadataRequest.MetadataRequestTopic(name="ab")])
    payload = encode_request(RequestHeader(ApiKey.METADATA, 0, 7, "c"), body)
    assert payload == (b"\x00\x03\x00\x00\x00\x00\x00\x07"  # key 3, version 0, correlation 7
                       b"\x00\x01c"                          # client id "c"
                       b"\x00\x00\x00\x01\x00\x02ab")        # one topic "ab"
    header, decoded = decode_request(payload)
    assert header == RequestHeader(3, 0, 7, "c") and decoded == body


def test_flexible_request_uses_compact_forms_and_header_v2() -> None:
    body = messages.MetadataRequest(topics=[messages.MetadataRequest.MetadataRequestTopic(name="ab")],
                                    allow_auto_topic_creation=False)
    payload = encode_request(RequestHeader(ApiKey.METADATA, 9, 1, None), body)
    assert payload == (b"\x00\x03\x00\x09\x00\x00\x00\x01"
                       b"\xff\xff"          # null client id keeps its int16 length in header v2
                       b"\x00"              # header tagged fields
                       b"\x02"              # compact array: 1 + 1
                       b"\x03ab\x00"        # compact string "ab", struct tagged fields
                       b"\x00\x00\x00"      # allow_auto=false, include_cluster/topic_ops=false
                       b"\x00")             # body tagged fields


def test_api_versions_response_always_uses_header_v0() -> None:
    body = messages.ApiVersionsResponse(error_code=0, api_keys=[
        messages.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)])
    payload = encode_response(ApiKey.API_VERSIONS, 3, 5, body)
    assert payload[:4] == b"\x00\x00\x00\x05" and payload[4:6] == b"\x00\x00"  # no header tags
    header, decoded = decode_response(ApiKey.API_VERSIONS, 3, payload)
    assert header.correlation_id == 5 and decoded == body


def test_tagged_fields_written_only_when_not_default_and_unknown_ones_kept() -> None:
    pd = messages.FetchResponse.PartitionData
    plain = pd(partition_index=1, records=b"")
    with_tag = pd(partition_index=1, records=b"",
                  current_leader=messages.FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=9))
    resp = lambda p: messages.FetchResponse(responses=[messages.FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[p])])
    a = encode_message(resp(plain), 12)
    b = encode_message(resp(with_tag), 12)
    assert len(b) > len(a)
    assert decode_message(messages.FetchResponse, 12, b) == resp(with_tag)
    # An unknown tag (99) inside the partition survives a decode/encode round trip.
    unknown = pd(partition_index=1, records=b"", unknown_tagged_fields=((99, b"\x01\x02"),))
    c = encode_message(resp(unknown), 12)
    assert encode_message(decode_message(messages.FetchResponse, 12, c), 12) == c


def test_nullable_and_uuid_fields() -> None:
    tid = uuid.uuid4()
    rec = messages.TopicRecord(name="orders", topic_id=tid)
    assert decode_message(messages.TopicRecord, 0, encode_message(rec, 0)) == rec
    req = messages.MetadataRequest(topics=None)  # null = all topics (v1+)
    assert decode_message(messages.MetadataRequest, 4, encode_message(req, 4)).topics is None
    with pytest.raises(ValueError):
        encode_message(req, 0)  # v0 cannot say null


def test_unknown_api_key_and_version_are_typed() -> None:
    bad_key = b"\x03\xe7\x00\x00\x00\x00\x00\x09"  # key 999
    with pytest.raises(UnsupportedVersionError) as e:
        decode_request(bad_key)
    assert e.value.correlation_id == 9
    bad_version = b"\x00\x12\x00\x63\x00\x00\x00\x01"  # ApiVersions v99
    with pytest.raises(UnsupportedVersionError) as e:
        decode_request(bad_version)
    assert (e.value.api_key, e.value.api_version) == (18, 99)


def test_lengths_are_checked_before_allocating() -> None:
    # Metadata v0 claiming 2**31-1 topics in a 20-byte frame.
    payload = b"\x00\x03\x00\x00\x00\x00\x00\x01\xff\xff\x7f\xff\xff\xff"
    with pytest.raises(CorruptFrameError):
        decode_request(payload)
    # A string longer than the frame.
    payload = b"\x00\x03\x00\x00\x00\x00\x00\x01\x7f\xff"
    with pytest.raises(CorruptFrameError):
        decode_request(payload)


def test_trailing_bytes_after_a_request_are_ignored_as_kafka_does() -> None:
    # librdkafka's all-topics Metadata v12 ends with 3 bytes no field claims.
    payload = encode_request(RequestHeader(ApiKey.METADATA, 12, 1, "x"),
                             messages.MetadataRequest(topics=None))
    header, body = decode_request(payload + b"\x01\x00\x00")
    assert header.api_version == 12 and body.topics is None
    # A bare body (records, data schemas) must still be exact.
    with pytest.raises(CorruptFrameError):
        decode_message(messages.MetadataRequest, 12, encode_message(messages.MetadataRequest(), 12) + b"\x00")


@settings(max_examples=400)
@given(st.binary(max_size=64))
def test_garbage_requests_raise_only_the_typed_error(data: bytes) -> None:
    try:
        decode_request(data)
    except CorruptFrameError:
        pass


@settings(max_examples=200)
@given(api=st.sampled_from([0, 1, 3, 8, 11, 18, 19]), version=st.integers(0, 9),
       data=st.binary(max_size=64))
def test_garbage_after_a_valid_header_raises_only_the_typed_error(api: int, version: int, data: bytes) -> None:
    spec = _codec.spec_for(messages.__getattr__({0: "ProduceRequest", 1: "FetchRequest",
        3: "MetadataRequest", 8: "OffsetCommitRequest", 11: "JoinGroupRequest",
        18: "ApiVersionsRequest", 19: "CreateTopicsRequest"}[api]).SCHEMA.name)
    version = min(version, spec.max_version)
    header = encode_request(RequestHeader(api, version, 1, "fuzz"), spec.cls())
    body_start = len(header) - len(encode_message(spec.cls(), version))
    try:
        decode_request(header[:body_start] + data)
    except CorruptFrameError:
        pass
