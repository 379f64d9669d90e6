"""Sans-I/O framing: any chunking gives the same events; bad frames fail one connection."""
from __future__ import annotations

import dataclasses
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.protocol import (
    NEED_DATA, ApiKey, ClientConnection, CorruptFrameError, RequestHeader, RequestReceived,
    ServerConnection, UnsupportedRequest, encode_request, encode_response, frame, messages,
)
from clients.protocol.framing import ConnectionState


def _metadata_frame(correlation_id: int) -> bytes:
    body = messages.MetadataRequest(topics=[messages.MetadataRequest.MetadataRequestTopic(name="t")])
    return frame(encode_request(RequestHeader(ApiKey.METADATA, 9, correlation_id, "c"), body))


def _drain(conn: ServerConnection) -> list:
    events = []
    while (ev := conn.next_event()) is not NEED_DATA:
        events.append(ev)
    return events


@given(cuts=st.lists(st.integers(0, 200), max_size=8))
def test_any_chunking_gives_the_same_requests(cuts: list[int]) -> None:
    stream = _metadata_frame(1) + _metadata_frame(2) + _metadata_frame(3)
    whole = ServerConnection()
    whole.receive_data(stream)
    expected = _drain(whole)
    assert [e.header.correlation_id for e in expected] == [1, 2, 3]
    chunked = ServerConnection()
    got = []
    points = sorted({c % len(stream) for c in cuts}) + [len(stream)]
    start = 0
    for p in points:
        chunked.receive_data(stream[start:p])
        got.extend(_drain(chunked))
        start = p
    assert got == expected


def test_byte_by_byte() -> None:
    stream = _metadata_frame(42)
    conn = ServerConnection()
    events = []
    for i in range(len(stream)):
        conn.receive_data(stream[i:i + 1])
        events.extend(_drain(conn))
    assert len(events) == 1 and isinstance(events[0], RequestReceived)
    assert events[0].header.correlation_id == 42


def test_oversized_frame_is_refused_from_its_length_alone() -> None:
    conn = ServerConnection(frame_bytes_max=1024)
    conn.receive_data(b"\x00\x10\x00\x00")  # 1 MiB announced, nothing else sent
    with pytest.raises(CorruptFrameError):
        conn.next_event()
    assert conn.state is ConnectionState.ERROR
    assert conn.buffered_bytes == 4  # the body was never buffered


def test_negative_length_and_garbage_body() -> None:
    conn = ServerConnection()
    conn.receive_data(b"\xff\xff\xff\xff")
    with pytest.raises(CorruptFrameError):
        conn.next_event()
    conn = ServerConnection()
    conn.receive_data(frame(b"\x00\x03\x00\x00\x00\x00\x00\x01\x7f"))
    with pytest.raises(CorruptFrameError):
        conn.next_event()
    with pytest.raises(CorruptFrameError):  # stays failed
        conn.next_event()


def test_unsupported_version_is_an_event_and_the_connection_goes_on() -> None:
    conn = ServerConnection()
    conn.receive_data(frame(b"\x00\x12\x00\x09\x00\x00\x00\x05\x00\x00") + _metadata_frame(6))
    first, second = _drain(conn)
    assert first == UnsupportedRequest(api_key=18, api_version=9, correlation_id=5)
    assert second.header.correlation_id == 6


def test_client_matches_responses_in_order_and_skips_acks0() -> None:
    client = ClientConnection(client_id="me")
    server = ServerConnection()
    cid1, f1 = client.send(ApiKey.API_VERSIONS, 3, messages.ApiVersionsRequest(
        client_software_name="ketch", client_software_version="0"))
    produce = messages.ProduceRequest(acks=0, timeout_ms=100, topic_data=[])
    _, f2 = client.send(ApiKey.PRODUCE, 9, produce, expect_response=False)
    cid3, f3 = client.send(ApiKey.METADATA, 12, messages.MetadataRequest(topics=None))
    server.receive_data(f1 + f2 + f3)
    reqs = _drain(server)
    assert [r.header.api_key for r in reqs] == [18, 0, 3]
    assert client.in_flight == 2
    out = b"".join(server.send(18, 3, cid1, messages.ApiVersionsResponse()))
    out += b"".join(server.send(3, 12, cid3, messages.MetadataResponse(cluster_id="k")))
    client.receive_data(out)
    r1 = client.next_event()
    r2 = client.next_event()
    assert (r1.api_key, r1.header.correlation_id) == (18, cid1)
    assert r2.body.cluster_id == "k"
    assert client.next_event() is NEED_DATA and client.in_flight == 0


def test_response_parts_carry_file_regions() -> None:
    class Region:
        def __len__(self) -> int:
            return 10

    pd = messages.FetchResponse.PartitionData(partition_index=0, records=Region())
    body = messages.FetchResponse(responses=[messages.FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[pd])])
    parts = ServerConnection().send(ApiKey.FETCH, 11, 1, body)
    assert isinstance(parts[1], Region) and len(parts) == 3
    total = sum(len(p) for p in parts)
    assert int.from_bytes(parts[0][:4], "big") == total - 4
    # Replacing the region by its bytes gives the same frame as a plain encode.
    body = messages.FetchResponse(responses=[messages.FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[dataclasses.replace(pd, records=b"x" * 10)])])
    plain = ServerConnection().send(ApiKey.FETCH, 11, 1, body)
    assert parts[0] + b"x" * 10 + parts[2] == plain[0]


@pytest.mark.parametrize("version", [3, 9])   # header v0 and v1 (flexible)
def test_response_frame_is_the_length_then_the_encoded_response(version: int) -> None:
    # The length is written into the encoding's own buffer (no copy): the same bytes as
    # framing the plain encoding, and a client reads them back.
    body = messages.ProduceResponse(responses=[messages.ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[messages.ProduceResponse.PartitionProduceResponse(
            index=i, base_offset=100 * i) for i in range(3)])])
    client = ClientConnection()
    correlation_id, _ = client.send(ApiKey.PRODUCE, version, messages.ProduceRequest(acks=1))
    parts = ServerConnection().send(ApiKey.PRODUCE, version, correlation_id, body)
    assert len(parts) == 1
    assert bytes(parts[0]) == frame(encode_response(ApiKey.PRODUCE, version, correlation_id, body))
    client.receive_data(bytes(parts[0]))
    assert client.next_event().body == body
