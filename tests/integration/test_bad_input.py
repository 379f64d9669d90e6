"""Bad input against a live broker, over raw sockets with Ketch's codec.

A malformed frame or an oversized length prefix closes that connection only: requests
before it on the same connection are answered, other connections and fresh ones are
served, and records acknowledged before are still there. ApiVersions at a version the
broker does not know gets error 35 and the supported list (KIP-511); topics that do not
exist, when the client disables auto-creation, get UNKNOWN_TOPIC_OR_PARTITION; bad record
batches get their per-partition Kafka error codes.
"""
from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest

from broker.apis import SUPPORTED_VERSIONS
from clients.protocol import ApiKey, ClientConnection, NEED_DATA, decode_response, messages
from clients.protocol.errors import ErrorCode
from clients.records import CompressionType, Record, build_batch, decode_batches
from integration_helpers import metadata, partition_states, roundtrip, wait_until

pytestmark = [pytest.mark.process]

CLOSE_TIMEOUT_S = 10.0


class RawConnection:
    """A blocking socket speaking Kafka, which can also send arbitrary bytes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=CLOSE_TIMEOUT_S)
        self.conn = ClientConnection(client_id="ketch-bad-input")

    def send(self, api_key: int, version: int, body) -> None:
        _, data = self.conn.send(api_key, version, body)
        self.sock.sendall(data)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self):
        while (event := self.conn.next_event()) is NEED_DATA:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed by the broker")
            self.conn.receive_data(chunk)
        return event.body

    def request(self, api_key: int, version: int, body):
        self.send(api_key, version, body)
        return self.receive()

    def read_until_closed(self) -> bytes:
        """What the broker still sends before it closes; fails if it keeps the socket open."""
        data = b""
        try:
            while chunk := self.sock.recv(1 << 16):
                data += chunk
        except ConnectionResetError:
            pass
        except socket.timeout:
            raise AssertionError(f"the broker kept the connection open for {CLOSE_TIMEOUT_S}s")
        return data

    def close(self) -> None:
        self.sock.close()


def _api_versions(conn: RawConnection):
    return conn.request(ApiKey.API_VERSIONS, 3, messages.ApiVersionsRequest(
        client_software_name="ketch-it", client_software_version="1"))


def _request_frame(api_key: int, version: int, correlation_id: int, body: bytes,
                   flexible_header: bool) -> bytes:
    client_id = b"ketch-bad-input"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if flexible_header:
        header += b"\x00"     # no tagged fields
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


@pytest.fixture(scope="module")
def broker_port(cluster) -> int:
    return cluster.spec.brokers[0].port


@pytest.fixture(scope="module")
def acked(cluster):
    """Records acknowledged before any bad input; checked again at the end."""
    from kafka import KafkaProducer

    topic = f"bad-input-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=cluster.spec.bootstrap_servers)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0) for i in range(20)]
    producer.flush(30)
    offsets = [f.get(30).offset for f in futures]
    producer.close()
    assert offsets == list(range(20))
    return topic


def test_garbage_frame_closes_that_connection_only(cluster, broker_port, acked) -> None:
    bystander = RawConnection(broker_port)
    victim = RawConnection(broker_port)
    try:
        assert _api_versions(bystander).error_code == 0
        # A good request pipelined before the garbage is still answered, in order.
        victim.send(ApiKey.METADATA, 1, messages.MetadataRequest(topics=[]))
        victim.send_raw(struct.pack(">i", 24) + bytes([0x00, 0x03, 0x00, 0x09]) + b"\xfe" * 20)
        assert victim.receive().brokers, "the request before the garbage got no answer"
        assert victim.read_until_closed() == b""
        assert _api_versions(bystander).error_code == 0
    finally:
        victim.close()
        bystander.close()
    fresh = RawConnection(broker_port)
    try:
        assert _api_versions(fresh).error_code == 0
    finally:
        fresh.close()


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 3) + b"abc",                     # shorter than any request header
    struct.pack(">i", 10) + b"\xff" * 10,              # API key -1
    struct.pack(">i", 9) + struct.pack(">hhi", ApiKey.METADATA, 12, 7) + b"\x05",   # torn header
], ids=["short", "negative-api-key", "torn-flexible-header"])
def test_malformed_frames_close_the_connection(broker_port, frame: bytes) -> None:
    conn = RawConnection(broker_port)
    try:
        conn.send_raw(frame)
        assert conn.read_until_closed() == b""
    finally:
        conn.close()
    fresh = RawConnection(broker_port)
    try:
        assert _api_versions(fresh).error_code == 0
    finally:
        fresh.close()


@pytest.mark.parametrize("size", [0x7FFFFFFF, 100 * 1024 * 1024 + 1, -1],
                         ids=["int32-max", "one-past-socket.request.max.bytes", "negative"])
def test_oversized_length_prefix_is_refused_at_once(broker_port, size: int) -> None:
    """Only the 4 length bytes are sent: a broker that waited for (or buffered) the body
    would keep the connection open."""
    conn = RawConnection(broker_port)
    try:
        conn.send_raw(struct.pack(">i", size))
        assert conn.read_until_closed() == b""
    finally:
        conn.close()
    fresh = RawConnection(broker_port)
    try:
        assert _api_versions(fresh).error_code == 0
    finally:
        fresh.close()


def test_unknown_api_versions_version_gets_error_35_and_the_supported_list(broker_port) -> None:
    conn = RawConnection(broker_port)
    try:
        # ApiVersions v127, flexible header and a v3-style body, as a newer client sends it.
        body = b"\x09ketch-it\x021\x00"
        conn.send_raw(_request_frame(ApiKey.API_VERSIONS, 127, 4242, body, flexible_header=True))
        # The answer is an ApiVersions v0 response (header v0): length, correlation id, body.
        raw = b""
        while len(raw) < 4 or len(raw) < 4 + struct.unpack_from(">i", raw)[0]:
            chunk = conn.sock.recv(1 << 16)
            assert chunk, "closed instead of answering with error 35"
            raw += chunk
        header, resp = decode_response(ApiKey.API_VERSIONS, 0, raw[4:])
        assert header.correlation_id == 4242
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION == 35
        listed = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        for api_key, versions in SUPPORTED_VERSIONS.items():
            assert listed.get(api_key) == versions, ApiKey(api_key).name
        # The client retries on the same connection with a version from the list.
        assert listed[ApiKey.API_VERSIONS][1] >= 3
        assert _api_versions(conn).error_code == 0
    finally:
        conn.close()


def test_unknown_api_key_closes_the_connection(broker_port) -> None:
    conn = RawConnection(broker_port)
    try:
        conn.send_raw(_request_frame(9999, 0, 1, b"", flexible_header=False))
        assert conn.read_until_closed() == b""
    finally:
        conn.close()


def test_unknown_topic_without_auto_creation(cluster, broker_port) -> None:
    topic = f"never-created-{uuid.uuid4().hex[:8]}"
    for version in (4, 9, 12):
        resp = metadata(broker_port, [topic], version=version, allow_auto_topic_creation=False)
        (t,) = resp.topics
        assert (t.name, t.error_code) == (topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), version
        assert t.partitions == []
    # Produce and Fetch never create topics.
    batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"v")])
    produce = roundtrip(broker_port, ApiKey.PRODUCE, 9, messages.ProduceRequest(
        acks=-1, timeout_ms=5000, topic_data=[messages.ProduceRequest.TopicProduceData(
            name=topic, partition_data=[messages.ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    (p,) = produce.responses[0].partition_responses
    assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    cls = messages.FetchRequest
    fetch = roundtrip(broker_port, ApiKey.FETCH, 12, cls(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=0, session_epoch=-1,
        topics=[cls.FetchTopic(topic=topic, partitions=[cls.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
            partition_max_bytes=1 << 20)])]))
    assert fetch.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    everything = metadata(broker_port, None)
    assert topic not in {t.name for t in everything.topics}
    # With the client's permission (and auto.create.topics.enable's default, true) it is created.
    resp = metadata(broker_port, [topic], version=12, allow_auto_topic_creation=True)
    assert resp.topics[0].error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
    states = wait_until(lambda: partition_states(cluster, topic), 30, f"{topic} auto-created")
    assert len(states) == 3                     # num.partitions in the test cluster


def _produce_one(port: int, topic: str, records: bytes) -> int:
    return _produce(port, topic, 0, records).error_code


def test_bad_record_batches_get_partition_error_codes(cluster, acked) -> None:
    states = partition_states(cluster, acked)
    port = cluster.spec.node(states[0].leader).port
    good = bytearray(build_batch([Record(0, int(time.time() * 1000), b"k", b"v" * 50)]))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    assert _produce_one(port, acked, bytes(bad_crc)) == ErrorCode.CORRUPT_MESSAGE
    legacy = bytearray(good)
    legacy[16] = 1                                  # magic byte: a v1 message set
    assert _produce_one(port, acked, bytes(legacy)) == ErrorCode.UNSUPPORTED_VERSION
    bad_codec = bytearray(build_batch([Record(0, int(time.time() * 1000), b"k", b"v")]))
    bad_codec[22] |= 0x07                           # attributes low bits: codec id 7
    assert _produce_one(port, acked, bytes(bad_codec)) in (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, ErrorCode.CORRUPT_MESSAGE)   # the CRC no longer matches either
    assert _produce_one(port, acked, bytes(good[:-5])) == ErrorCode.CORRUPT_MESSAGE   # torn batch
    huge = build_batch([Record(0, int(time.time() * 1000), None, b"x" * (1_100_000))],
                       compression=CompressionType.NONE)
    assert _produce_one(port, acked, huge) in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE)
    # None of these reached the log: the next good batch lands right after the 20 acked.
    resp = roundtrip(port, ApiKey.PRODUCE, 9, messages.ProduceRequest(
        acks=-1, timeout_ms=10000, topic_data=[messages.ProduceRequest.TopicProduceData(
            name=acked, partition_data=[messages.ProduceRequest.PartitionProduceData(index=0, records=bytes(good))])]))
    p = resp.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (ErrorCode.NONE, 20)


def _produce(port: int, topic: str, partition: int, records: bytes, acks: int = -1):
    resp = roundtrip(port, ApiKey.PRODUCE, 9, messages.ProduceRequest(
        acks=acks, timeout_ms=10000, topic_data=[messages.ProduceRequest.TopicProduceData(
            name=topic, partition_data=[messages.ProduceRequest.PartitionProduceData(
                index=partition, records=records)])]))
    return resp.responses[0].partition_responses[0]


def _idempotent_batch(producer_id: int, epoch: int, sequence: int, count: int, tag: str) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(i, now, None, f"{tag}-{i}".encode()) for i in range(count)],
                       producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


def test_idempotent_produce_sequence_rules(cluster) -> None:
    """Duplicates are acknowledged at their first offsets without a second append; gaps
    get OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch gets INVALID_PRODUCER_EPOCH."""
    topic = f"idempotence-{uuid.uuid4().hex[:8]}"
    states = wait_until(lambda: metadata(cluster.spec.brokers[0].port, [topic], allow_auto_topic_creation=True)
                        and partition_states(cluster, topic), 30, f"{topic} auto-created")
    port = cluster.spec.node(states[0].leader).port
    init = roundtrip(port, ApiKey.INIT_PRODUCER_ID, 4, messages.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0 and init.producer_id >= 0, init
    pid, epoch = init.producer_id, init.producer_epoch

    first = _produce(port, topic, 0, _idempotent_batch(pid, epoch, 0, 3, "a"))
    assert (first.error_code, first.base_offset) == (0, 0)
    again = _produce(port, topic, 0, _idempotent_batch(pid, epoch, 0, 3, "a"))
    assert (again.error_code, again.base_offset) == (0, 0), "a retried batch must get its first offset"
    gap = _produce(port, topic, 0, _idempotent_batch(pid, epoch, 7, 1, "gap"))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = _produce(port, topic, 0, _idempotent_batch(pid, epoch, 3, 2, "b"))
    assert (nxt.error_code, nxt.base_offset) == (0, 3), "the duplicate or the gap reached the log"
    bumped = _produce(port, topic, 0, _idempotent_batch(pid, epoch + 1, 0, 1, "c"))
    assert (bumped.error_code, bumped.base_offset) == (0, 5)
    zombie = _produce(port, topic, 0, _idempotent_batch(pid, epoch, 5, 1, "zombie"))
    assert zombie.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    new_epoch_gap = _produce(port, topic, 0, _idempotent_batch(pid, epoch + 2, 4, 1, "d"))
    assert new_epoch_gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    cls = messages.FetchRequest
    fetch = roundtrip(port, ApiKey.FETCH, 12, cls(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=0, session_epoch=-1,
        topics=[cls.FetchTopic(topic=topic, partitions=[cls.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
            partition_max_bytes=1 << 20)])]))
    part = fetch.responses[0].partitions[0]
    assert part.high_watermark == 6
    values = [r.value for b in decode_batches(part.records) for r in b.records]
    assert values == [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1", b"c-0"]


def test_requests_to_a_follower_or_with_a_wrong_leader_epoch(cluster, acked) -> None:
    states = partition_states(cluster, acked)
    st = states[0]
    leader_port = cluster.spec.node(st.leader).port
    follower = next(r for r in st.replicas if r != st.leader)
    follower_port = cluster.spec.node(follower).port
    batch = build_batch([Record(0, int(time.time() * 1000), None, b"misdirected")])
    assert _produce(follower_port, acked, 0, batch).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    def fetch_code(port: int, leader_epoch: int, version: int = 12) -> int:
        cls = messages.FetchRequest
        resp = roundtrip(port, ApiKey.FETCH, version, cls(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=0, session_epoch=-1,
            topics=[cls.FetchTopic(topic=acked, partitions=[cls.FetchPartition(
                partition=0, current_leader_epoch=leader_epoch, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=1 << 20)])]))
        return resp.responses[0].partitions[0].error_code

    # Before v11 a consumer may fetch from the leader only; from v11 (client metadata,
    # KIP-392) a follower serves it too, as Kafka's do, but not in a wrong epoch.
    assert fetch_code(follower_port, -1, version=10) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch_code(follower_port, -1) == ErrorCode.NONE
    assert fetch_code(follower_port, st.leader_epoch + 1) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch_code(leader_port, st.leader_epoch) == ErrorCode.NONE
    assert fetch_code(leader_port, st.leader_epoch + 1) == ErrorCode.UNKNOWN_LEADER_EPOCH
    if st.leader_epoch > 0:
        assert fetch_code(leader_port, st.leader_epoch - 1) == ErrorCode.FENCED_LEADER_EPOCH

    cls = messages.ListOffsetsRequest
    resp = roundtrip(leader_port, ApiKey.LIST_OFFSETS, 7, cls(
        replica_id=-1, isolation_level=0, topics=[cls.ListOffsetsTopic(name=acked, partitions=[
            cls.ListOffsetsPartition(partition_index=0, current_leader_epoch=st.leader_epoch + 5, timestamp=-1)])]))
    assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    cls = messages.OffsetForLeaderEpochRequest
    resp = roundtrip(leader_port, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, cls(
        replica_id=-1, topics=[cls.OffsetForLeaderTopic(topic=acked, partitions=[cls.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=st.leader_epoch, leader_epoch=st.leader_epoch)])]))
    r = resp.topics[0].partitions[0]
    assert (r.error_code, r.leader_epoch) == (0, st.leader_epoch)
    assert r.end_offset >= 20


def test_pipelined_requests_are_answered_in_request_order(cluster, acked) -> None:
    """Forty requests in one write, mixing slow (acks=all, long-poll Fetch with min_bytes
    already met) and fast ones, and acks=0 Produce that gets no response: every response
    comes back in request order (ClientConnection checks each correlation id)."""
    states = partition_states(cluster, acked)
    conn = RawConnection(cluster.spec.node(states[0].leader).port)
    now = int(time.time() * 1000)
    expected = []
    data = b""
    try:
        for i in range(40):
            kind = i % 5
            if kind == 0:
                body = messages.ApiVersionsRequest(client_software_name="ketch-it", client_software_version="1")
                api, version = ApiKey.API_VERSIONS, 3
            elif kind == 1:
                body = messages.MetadataRequest(topics=[messages.MetadataRequest.MetadataRequestTopic(name=acked)])
                api, version = ApiKey.METADATA, 12
            elif kind in (2, 3):
                body = messages.ProduceRequest(
                    acks=-1 if kind == 2 else 0, timeout_ms=10000, topic_data=[
                        messages.ProduceRequest.TopicProduceData(name=acked, partition_data=[
                            messages.ProduceRequest.PartitionProduceData(index=0, records=build_batch(
                                [Record(0, now, b"pipelined", b"%d" % i)]))])])
                api, version = ApiKey.PRODUCE, 9
            else:
                cls = messages.FetchRequest
                body = cls(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, session_id=0,
                           session_epoch=-1, topics=[cls.FetchTopic(topic=acked, partitions=[cls.FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                               partition_max_bytes=1 << 20)])])
                api, version = ApiKey.FETCH, 12
            _, frame_bytes = conn.conn.send(api, version, body, expect_response=kind != 3)
            data += frame_bytes
            if kind != 3:
                expected.append(api)
        conn.send_raw(data)
        responses = [conn.receive() for _ in expected]
        assert [type(r).__name__ for r in responses] == [
            {ApiKey.API_VERSIONS: "ApiVersionsResponse", ApiKey.METADATA: "MetadataResponse",
             ApiKey.PRODUCE: "ProduceResponse", ApiKey.FETCH: "FetchResponse"}[a] for a in expected]
        produced = [r.responses[0].partition_responses[0] for r in responses
                    if type(r).__name__ == "ProduceResponse"]
        assert all(p.error_code == 0 for p in produced)
        # acks=0 batches sit between the acks=all ones: each acks=all lands 2 offsets later.
        bases = [p.base_offset for p in produced]
        assert bases == [bases[0] + 2 * i for i in range(len(bases))], bases
    finally:
        conn.close()


def test_acknowledged_records_survive_the_bad_input(cluster, acked) -> None:
    """Runs last in this module: the records acknowledged before are all still there."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.spec.bootstrap_servers, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10000)
    try:
        consumer.assign([TopicPartition(acked, 0)])
        got = [(m.offset, m.key, m.value) for _, m in zip(range(20), consumer)]
    finally:
        consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(20)]
