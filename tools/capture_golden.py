"""Capture golden Kafka frames from real, unmodified clients.

Usage:  python tools/capture_golden.py [--only NAME ...] [--out DIR] [--list]

What it does
------------
A small capturing "broker" listens on 127.0.0.1 (a random free port). It reads
length-prefixed request frames, stores each one, and answers well enough that real clients
go on to send their interesting requests (groups, commits, admin calls, SASL). Each driver
then points one client at it: confluent-kafka (librdkafka 2.16), kcat (librdkafka 2.0.2),
kafka-python and aiokafka as live clients, plus kafka-python's and aiokafka's own request
encoders called directly at the versions those libraries implement.

The replies are encoded with **kafka-python's protocol classes** (never with Ketch's codec),
so this tool stays an independent oracle; the replies themselves are saved too, as
golden *responses* from an independent encoder.

Output: tests/clients/protocol/golden/<client>.json, one entry per frame: the whole wire
frame in hex (4-byte length prefix included) beside its sidecar facts: client, client
version, encoder, API key/name, API version, direction, a variant label (compression codec,
consumer/admin/SASL run) and the frame's sha256.
Identical frames (ignoring the correlation id) are stored once, and each (client, variant,
api, version, direction) keeps at most a few distinct frames, so the set stays small.

Regenerate on purpose and read the diff. Some bytes legitimately change between runs: the
capture broker's random port (in Metadata/FindCoordinator replies), leader epochs that grow
with each Metadata reply, member ids, and which of several near-identical frames is kept.

Advertised versions: CLIENT-REQUIREMENTS.md "Profile B" plus admin/SASL/transaction APIs,
all capped at the maxima of ../shared/kafka-protocol (the Kafka 4.0-SNAPSHOT schemas Ketch's
codec is generated from), so every captured version is one Ketch can decode.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GOLDEN_DIR = REPO / "tests" / "clients" / "protocol" / "golden"

FRAME_BYTES_MAX = 16 * 1024 * 1024  # a capture frame is never near this; guards against garbage
PER_KEY_FRAMES_MAX = 3               # distinct frames kept per (client, variant, api, version, direction)
TOPIC = "golden"
TOPIC_PARTITIONS = 2
GROUP = "golden-group"
NODE_ID = 1
CLUSTER_ID = "ketch-golden-cluster"
LEADER_EPOCH = 1                     # > committed epoch 0, so KIP-320 clients validate positions
RECORDS_PER_PARTITION = 3
BASE_TIMESTAMP_MS = 1_700_000_000_000

# API key -> (min, max) advertised in ApiVersions. Profile B (CLIENT-REQUIREMENTS.md) plus
# APIs some clients use for admin, SASL and transactions.
ADVERTISED: dict[int, tuple[int, int]] = {
    0: (0, 11),   # Produce
    1: (4, 12),   # Fetch (<= 12: no topic-id fetches)
    2: (1, 7),    # ListOffsets
    3: (0, 12),   # Metadata
    8: (2, 9),    # OffsetCommit
    9: (1, 9),    # OffsetFetch
    10: (0, 6),   # FindCoordinator
    11: (0, 9),   # JoinGroup
    12: (0, 4),   # Heartbeat
    13: (0, 5),   # LeaveGroup
    14: (0, 5),   # SyncGroup
    15: (0, 5),   # DescribeGroups
    16: (0, 4),   # ListGroups
    17: (0, 1),   # SaslHandshake
    18: (0, 4),   # ApiVersions
    19: (2, 7),   # CreateTopics
    20: (1, 6),   # DeleteTopics
    21: (0, 2),   # DeleteRecords
    22: (0, 5),   # InitProducerId
    23: (2, 4),   # OffsetForLeaderEpoch
    24: (0, 3),   # AddPartitionsToTxn (4+ is the broker-to-broker batch form)
    25: (0, 3),   # AddOffsetsToTxn
    26: (0, 3),   # EndTxn
    28: (0, 3),   # TxnOffsetCommit
    32: (1, 4),   # DescribeConfigs
    33: (0, 2),   # AlterConfigs
    36: (0, 2),   # SaslAuthenticate
    37: (0, 3),   # CreatePartitions
    42: (0, 2),   # DeleteGroups
    44: (0, 1),   # IncrementalAlterConfigs
    60: (0, 1),   # DescribeCluster
}
APIVERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35


# --------------------------------------------------------------------------------------
# Recording


@dataclass(frozen=True, slots=True)
class Captured:
    client: str
    client_version: str
    variant: str
    direction: str          # "request" | "response"
    api_key: int
    api_version: int
    frame: bytes            # whole wire frame, length prefix included
    encoder: str            # who produced the bytes


@dataclass
class Recorder:
    frames: list[Captured] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, item: Captured) -> None:
        with self.lock:
            self.frames.append(item)


def frame_of(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# --------------------------------------------------------------------------------------
# kafka-python's protocol classes: the independent encoder of our replies


def _kafka_python_classes() -> dict[tuple[int, str], type]:
    import importlib
    import inspect
    import pkgutil

    import kafka.protocol as kp
    from kafka.protocol.api_message import ApiMessage

    found: dict[tuple[int, str], type] = {}
    for mod_info in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" in mod_info.name or "generate" in mod_info.name:
            continue
        module = importlib.import_module(mod_info.name)
        for obj in vars(module).values():
            if (inspect.isclass(obj) and issubclass(obj, ApiMessage) and obj is not ApiMessage
                    and getattr(obj, "_json", None)):
                found[(obj.API_KEY, obj.type)] = obj
    return found


KP = _kafka_python_classes()


def api_name(api_key: int) -> str:
    cls = KP.get((api_key, "request"))
    return cls.name.removesuffix("Request") if cls is not None else f"Api{api_key}"


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"ketch-golden/{name}")


def build_records(partition: int, compression: int = 0) -> bytes:
    """RECORDS_PER_PARTITION records at offsets 0.., built by kafka-python's batch builder."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(RECORDS_PER_PARTITION):
        builder.append(i, timestamp=BASE_TIMESTAMP_MS + i, key=f"k{partition}-{i}".encode(),
                       value=f"value {partition}-{i}".encode(), headers=[("h", b"v")])
    return bytes(builder.build())


def records_in(records: bytes) -> int:
    """Records in a run of v2 batches (recordsCount is the int32 at offset 57 of each)."""
    count, pos = 0, 0
    while pos + 61 <= len(records):
        (batch_length,) = struct.unpack_from(">i", records, pos + 8)
        count += struct.unpack_from(">i", records, pos + 57)[0]
        pos += 12 + batch_length
    return count


class Responder:
    """Builds a reply for one request: kafka-python classes, version = request version."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.next_offset: dict[tuple[str, int], int] = {}
        self.member_seq = 0
        self.metadata_seq = 0
        self.lock = threading.Lock()

    # Each handler gets the decoded kafka-python request and returns field values for the
    # response class, or None when no response is due (Produce with acks=0).
    def respond(self, api_key: int, version: int, correlation_id: int,
                payload: bytes) -> bytes | None:
        if api_key == APIVERSIONS_KEY and version > ADVERTISED[APIVERSIONS_KEY][1]:
            return self._apiversions_unsupported(correlation_id)
        req_cls = KP[(api_key, "request")]
        resp_cls = KP[(api_key, "response")]
        request = req_cls.decode(payload, version=version, header=True)
        handler = getattr(self, f"_{api_name(api_key)}")
        fields = handler(request, version, resp_cls)
        if fields is None:
            return None
        response = resp_cls(version=version, **fields)
        response.with_header(correlation_id=correlation_id)
        return bytes(response.encode(header=True, framed=True))

    def _apiversions_unsupported(self, correlation_id: int) -> bytes:
        # KIP-511: header v0 and a v0 body with error 35 listing at least ApiVersions.
        resp_cls = KP[(APIVERSIONS_KEY, "response")]
        lo, hi = ADVERTISED[APIVERSIONS_KEY]
        response = resp_cls(version=0, error_code=UNSUPPORTED_VERSION, api_keys=[
            resp_cls.ApiVersion(api_key=APIVERSIONS_KEY, min_version=lo, max_version=hi)])
        response.with_header(correlation_id=correlation_id)
        return bytes(response.encode(header=True, framed=True))

    # -- handlers ------------------------------------------------------------------------

    def _ApiVersions(self, req: Any, v: int, R: type) -> dict:
        return dict(error_code=0, throttle_time_ms=0, api_keys=[
            R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ADVERTISED.items())])

    def _broker(self, R: type, cls_name: str) -> Any:
        return getattr(R, cls_name)(node_id=NODE_ID, host="127.0.0.1", port=self.port, rack=None)

    def _Metadata(self, req: Any, v: int, R: type) -> dict:
        names = [t.name for t in req.topics] if req.topics is not None else [TOPIC]
        with self.lock:
            # The leader epoch grows with every Metadata reply, as after leader elections,
            # so KIP-320 clients validate their positions (OffsetForLeaderEpoch).
            self.metadata_seq += 1
            leader_epoch = LEADER_EPOCH + self.metadata_seq - 1
        T = R.MetadataResponseTopic
        P = T.MetadataResponsePartition
        topics = [
            T(error_code=0, name=name, topic_id=topic_id(name), is_internal=False,
              partitions=[P(error_code=0, partition_index=p, leader_id=NODE_ID,
                            leader_epoch=leader_epoch, replica_nodes=[NODE_ID],
                            isr_nodes=[NODE_ID], offline_replicas=[])
                          for p in range(TOPIC_PARTITIONS)])
            for name in names if name is not None
        ]
        return dict(throttle_time_ms=0, brokers=[self._broker(R, "MetadataResponseBroker")],
                    cluster_id=CLUSTER_ID, controller_id=NODE_ID, topics=topics)

    def _Produce(self, req: Any, v: int, R: type) -> dict | None:
        if req.acks == 0:
            return None  # acks=0: the client expects no response at all
        T = R.TopicProduceResponse
        P = T.PartitionProduceResponse
        responses = []
        for topic in req.topic_data:
            parts = []
            for pd in topic.partition_data:
                with self.lock:  # offsets advance by the records appended, as on a broker
                    key = (topic.name, pd.index)
                    base = self.next_offset.get(key, 0)
                    self.next_offset[key] = base + records_in(bytes(pd.records or b""))
                parts.append(P(index=pd.index, error_code=0, base_offset=base,
                               log_append_time_ms=-1, log_start_offset=0, record_errors=[],
                               error_message=None))
            responses.append(T(name=topic.name, partition_responses=parts))
        return dict(responses=responses, throttle_time_ms=0)

    def _Fetch(self, req: Any, v: int, R: type) -> dict:
        T = R.FetchableTopicResponse
        P = T.PartitionData
        responses = []
        any_records = False
        for topic in req.topics:
            parts = []
            for fp in topic.partitions:
                records = b""
                if fp.fetch_offset < RECORDS_PER_PARTITION:
                    records = build_records(fp.partition)
                    any_records = True
                parts.append(P(partition_index=fp.partition, error_code=0,
                               high_watermark=RECORDS_PER_PARTITION,
                               last_stable_offset=RECORDS_PER_PARTITION, log_start_offset=0,
                               aborted_transactions=[], preferred_read_replica=-1,
                               records=records))
            responses.append(T(topic=topic.topic, partitions=parts))
        if not any_records:
            # Stand in for a long poll so idle consumers do not spin; bounded by the request.
            time.sleep(min(req.max_wait_ms, 200) / 1000)
        return dict(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)

    def _ListOffsets(self, req: Any, v: int, R: type) -> dict:
        T = R.ListOffsetsTopicResponse
        P = T.ListOffsetsPartitionResponse
        topics = [T(name=t.name, partitions=[
            P(partition_index=p.partition_index, error_code=0, timestamp=-1,
              offset=0 if p.timestamp == -2 else RECORDS_PER_PARTITION, leader_epoch=LEADER_EPOCH)
            for p in t.partitions]) for t in req.topics]
        return dict(throttle_time_ms=0, topics=topics)

    def _OffsetForLeaderEpoch(self, req: Any, v: int, R: type) -> dict:
        T = R.OffsetForLeaderTopicResult
        P = T.EpochEndOffset
        topics = [T(topic=t.topic, partitions=[
            P(error_code=0, partition=p.partition, leader_epoch=LEADER_EPOCH,
              end_offset=RECORDS_PER_PARTITION) for p in t.partitions]) for t in req.topics]
        return dict(throttle_time_ms=0, topics=topics)

    def _committed(self, partition: int) -> tuple[int, int]:
        # Partition 0 has a committed offset from an older epoch (clients validate it with
        # OffsetForLeaderEpoch); the others have none (clients reset via ListOffsets).
        return (1, 0) if partition == 0 else (-1, -1)

    def _OffsetFetch(self, req: Any, v: int, R: type) -> dict:
        if v >= 8:
            G = R.OffsetFetchResponseGroup
            T = G.OffsetFetchResponseTopics
            P = T.OffsetFetchResponsePartitions
            groups = []
            for g in req.groups:
                topics = []
                for t in g.topics or []:
                    topics.append(T(name=t.name, partitions=[
                        P(partition_index=i, committed_offset=self._committed(i)[0],
                          committed_leader_epoch=self._committed(i)[1], metadata="", error_code=0)
                        for i in t.partition_indexes]))
                groups.append(G(group_id=g.group_id, topics=topics, error_code=0))
            return dict(throttle_time_ms=0, groups=groups)
        T = R.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        topics = [T(name=t.name, partitions=[
            P(partition_index=i, committed_offset=self._committed(i)[0],
              committed_leader_epoch=self._committed(i)[1], metadata="", error_code=0)
            for i in t.partition_indexes]) for t in (req.topics or [])]
        return dict(throttle_time_ms=0, topics=topics, error_code=0)

    def _OffsetCommit(self, req: Any, v: int, R: type) -> dict:
        T = R.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        topics = [T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=0)
                                             for p in t.partitions]) for t in req.topics]
        return dict(throttle_time_ms=0, topics=topics)

    def _FindCoordinator(self, req: Any, v: int, R: type) -> dict:
        if v >= 4:
            C = R.Coordinator
            return dict(throttle_time_ms=0, coordinators=[
                C(key=k, node_id=NODE_ID, host="127.0.0.1", port=self.port, error_code=0,
                  error_message=None) for k in req.coordinator_keys])
        return dict(throttle_time_ms=0, error_code=0, error_message=None, node_id=NODE_ID,
                    host="127.0.0.1", port=self.port)

    def _JoinGroup(self, req: Any, v: int, R: type) -> dict:
        member_id = req.member_id
        if not member_id:
            with self.lock:
                self.member_seq += 1
                member_id = f"golden-member-{self.member_seq}"
        protocol = req.protocols[0]
        M = R.JoinGroupResponseMember
        return dict(throttle_time_ms=0, error_code=0, generation_id=1,
                    protocol_type=req.protocol_type, protocol_name=protocol.name,
                    leader=member_id, skip_assignment=False, member_id=member_id,
                    members=[M(member_id=member_id, group_instance_id=req.group_instance_id,
                               metadata=protocol.metadata)])

    def _SyncGroup(self, req: Any, v: int, R: type) -> dict:
        assignment = b""
        for a in req.assignments:
            if a.member_id == req.member_id:
                assignment = a.assignment
        return dict(throttle_time_ms=0, error_code=0, protocol_type=req.protocol_type,
                    protocol_name=req.protocol_name, assignment=assignment)

    def _Heartbeat(self, req: Any, v: int, R: type) -> dict:
        return dict(throttle_time_ms=0, error_code=0)

    def _LeaveGroup(self, req: Any, v: int, R: type) -> dict:
        M = R.MemberResponse
        members = [M(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=0)
                   for m in (req.members or [])]
        return dict(throttle_time_ms=0, error_code=0, members=members)

    def _InitProducerId(self, req: Any, v: int, R: type) -> dict:
        return dict(throttle_time_ms=0, error_code=0, producer_id=4000, producer_epoch=0)

    def _CreateTopics(self, req: Any, v: int, R: type) -> dict:
        T = R.CreatableTopicResult
        return dict(throttle_time_ms=0, topics=[
            T(name=t.name, topic_id=topic_id(t.name), error_code=0, error_message=None,
              num_partitions=t.num_partitions if t.num_partitions > 0 else 1,
              replication_factor=t.replication_factor if t.replication_factor > 0 else 1,
              configs=[]) for t in req.topics])

    def _DeleteTopics(self, req: Any, v: int, R: type) -> dict:
        T = R.DeletableTopicResult
        names = list(req.topic_names or []) + [t.name for t in (req.topics or [])]
        return dict(throttle_time_ms=0, responses=[
            T(name=n, topic_id=topic_id(n), error_code=0, error_message=None) for n in names])

    def _DeleteRecords(self, req: Any, v: int, R: type) -> dict:
        T = R.DeleteRecordsTopicResult
        P = T.DeleteRecordsPartitionResult
        return dict(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
            P(partition_index=p.partition_index, low_watermark=max(p.offset, 0), error_code=0)
            for p in t.partitions]) for t in req.topics])

    def _CreatePartitions(self, req: Any, v: int, R: type) -> dict:
        T = R.CreatePartitionsTopicResult
        return dict(throttle_time_ms=0, results=[
            T(name=t.name, error_code=0, error_message=None) for t in req.topics])

    def _DescribeConfigs(self, req: Any, v: int, R: type) -> dict:
        Res = R.DescribeConfigsResult
        C = Res.DescribeConfigsResourceResult
        results = [Res(error_code=0, error_message=None, resource_type=r.resource_type,
                       resource_name=r.resource_name, configs=[
                           C(name="cleanup.policy", value="delete", read_only=False,
                             config_source=5, is_sensitive=False, synonyms=[], config_type=2,
                             documentation=None)])
                   for r in req.resources]
        return dict(throttle_time_ms=0, results=results)

    def _IncrementalAlterConfigs(self, req: Any, v: int, R: type) -> dict:
        Res = R.AlterConfigsResourceResponse
        return dict(throttle_time_ms=0, responses=[
            Res(error_code=0, error_message=None, resource_type=r.resource_type,
                resource_name=r.resource_name) for r in req.resources])

    def _AlterConfigs(self, req: Any, v: int, R: type) -> dict:
        Res = R.AlterConfigsResourceResponse
        return dict(throttle_time_ms=0, responses=[
            Res(error_code=0, error_message=None, resource_type=r.resource_type,
                resource_name=r.resource_name) for r in req.resources])

    def _DescribeCluster(self, req: Any, v: int, R: type) -> dict:
        B = R.DescribeClusterBroker
        return dict(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
                    cluster_id=CLUSTER_ID, controller_id=NODE_ID,
                    brokers=[B(broker_id=NODE_ID, host="127.0.0.1", port=self.port, rack=None)])

    def _ListGroups(self, req: Any, v: int, R: type) -> dict:
        G = R.ListedGroup
        return dict(throttle_time_ms=0, error_code=0, groups=[
            G(group_id=GROUP, protocol_type="consumer", group_state="Empty")])

    def _DescribeGroups(self, req: Any, v: int, R: type) -> dict:
        G = R.DescribedGroup
        return dict(throttle_time_ms=0, groups=[
            G(error_code=0, group_id=g, group_state="Empty", protocol_type="consumer",
              protocol_data="", members=[])
            for g in req.groups])

    def _DeleteGroups(self, req: Any, v: int, R: type) -> dict:
        G = R.DeletableGroupResult
        return dict(throttle_time_ms=0, results=[G(group_id=g, error_code=0)
                                                 for g in req.groups_names])

    def _SaslHandshake(self, req: Any, v: int, R: type) -> dict:
        return dict(error_code=0, mechanisms=["PLAIN"])

    def _SaslAuthenticate(self, req: Any, v: int, R: type) -> dict:
        return dict(error_code=0, error_message=None, auth_bytes=b"", session_lifetime_ms=0)

    def _AddPartitionsToTxn(self, req: Any, v: int, R: type) -> dict:
        T = R.AddPartitionsToTxnTopicResult
        P = T.AddPartitionsToTxnPartitionResult
        return dict(throttle_time_ms=0, error_code=0, results_by_topic_v3_and_below=[
            T(name=t.name, results_by_partition=[
                P(partition_index=p, partition_error_code=0) for p in t.partitions])
            for t in req.v3_and_below_topics])

    def _AddOffsetsToTxn(self, req: Any, v: int, R: type) -> dict:
        return dict(throttle_time_ms=0, error_code=0)

    def _EndTxn(self, req: Any, v: int, R: type) -> dict:
        return dict(throttle_time_ms=0, error_code=0)

    def _TxnOffsetCommit(self, req: Any, v: int, R: type) -> dict:
        T = R.TxnOffsetCommitResponseTopic
        P = T.TxnOffsetCommitResponsePartition
        return dict(throttle_time_ms=0, topics=[T(name=t.name, partitions=[
            P(partition_index=p.partition_index, error_code=0) for p in t.partitions])
            for t in req.topics])


# --------------------------------------------------------------------------------------
# The capturing server


class CaptureServer:
    """A threaded TCP listener on 127.0.0.1:<random>; one Responder; records every frame."""

    def __init__(self, recorder: Recorder, client: str, client_version: str, variant: str) -> None:
        self.recorder = recorder
        self.client = client
        self.client_version = client_version
        self.variant = variant
        self.errors: list[str] = []
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._serve(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]
        self.responder = Responder(self.port)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> CaptureServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(30)
        try:
            while True:
                head = _recv_exactly(sock, 4)
                if head is None:
                    return
                (size,) = struct.unpack(">i", head)
                if not 0 < size <= FRAME_BYTES_MAX:
                    self.errors.append(f"bad frame size {size}")
                    return
                payload = _recv_exactly(sock, size)
                if payload is None:
                    return
                api_key, api_version, correlation_id = struct.unpack(">hhi", payload[:8])
                self.recorder.add(Captured(self.client, self.client_version, self.variant,
                                           "request", api_key, api_version, head + payload,
                                           encoder=self.client))
                if api_key not in ADVERTISED:
                    self.errors.append(f"unadvertised api {api_key} v{api_version}")
                    return
                try:
                    reply = self.responder.respond(api_key, api_version, correlation_id, payload)
                except Exception as exc:  # report and drop the connection: clients retry
                    self.errors.append(f"{api_name(api_key)} v{api_version}: {exc!r}")
                    return
                if reply is None:
                    continue
                # ApiVersions replies to too-new versions are v0 bodies.
                reply_version = api_version
                if api_key == APIVERSIONS_KEY and api_version > ADVERTISED[APIVERSIONS_KEY][1]:
                    reply_version = 0
                self.recorder.add(Captured("kafka-python-encoder", _kafka_python_version(),
                                           f"reply-to-{self.client}", "response", api_key,
                                           reply_version, reply, encoder="kafka-python"))
                sock.sendall(reply)
        except OSError:
            return


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _kafka_python_version() -> str:
    import kafka
    return f"kafka-python {kafka.__version__}"


# --------------------------------------------------------------------------------------
# Drivers: one per client library; each runs its client against a fresh CaptureServer.

Driver = Callable[[Recorder], list[str]]
DRIVERS: dict[str, Driver] = {}


def driver(name: str) -> Callable[[Driver], Driver]:
    def register(fn: Driver) -> Driver:
        DRIVERS[name] = fn
        return fn
    return register


@contextmanager
def serving(rec: Recorder, client: str, version: str, variant: str,
            problems: list[str]) -> Iterator[CaptureServer]:
    with CaptureServer(rec, client, version, variant) as server:
        try:
            yield server
        finally:
            problems.extend(f"{client}/{variant}: {e}" for e in server.errors)


def _confluent_version() -> str:
    import confluent_kafka
    return f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@driver("confluent")
def drive_confluent(rec: Recorder) -> list[str]:
    import confluent_kafka
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
        OffsetSpec)

    version = _confluent_version()
    problems: list[str] = []
    base = {"client.id": "golden-confluent", "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 60000}

    def produce(conf: dict, variant: str) -> None:
        with serving(rec, "confluent-kafka", version, variant, problems) as srv:
            p = Producer({**base, **conf, "bootstrap.servers": srv.bootstrap, "linger.ms": 5})
            for i in range(3):
                p.produce(TOPIC, key=f"key-{i}".encode(), value=f"value-{i}".encode() * 4,
                          partition=0, timestamp=BASE_TIMESTAMP_MS + i,
                          headers=[("trace", f"t{i}".encode()), ("empty", b"")])
            p.produce(TOPIC, key=None, value=None, partition=1, timestamp=BASE_TIMESTAMP_MS)
            left = p.flush(10)
            if left:
                problems.append(f"confluent {variant}: {left} messages not delivered")

    for codec in CODECS:
        produce({"acks": "all", "compression.type": codec}, f"acks=all,compression={codec}")
    produce({"acks": "all", "enable.idempotence": True}, "idempotent")
    produce({"acks": "0"}, "acks=0")

    with serving(rec, "confluent-kafka", version, "transactional", problems) as srv:
        p = Producer({**base, "bootstrap.servers": srv.bootstrap, "transactional.id": "golden-txn"})
        p.init_transactions(10)
        p.begin_transaction()
        p.produce(TOPIC, key=b"k", value=b"in a transaction", partition=0,
                  timestamp=BASE_TIMESTAMP_MS)
        p.commit_transaction(10)

    with serving(rec, "confluent-kafka", version, "group-consumer", problems) as srv:
        c = Consumer({**base, "bootstrap.servers": srv.bootstrap, "group.id": GROUP,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 100,
                      "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 500})
        c.subscribe([TOPIC])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < RECORDS_PER_PARTITION and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m)
        if got:
            c.commit(message=got[-1], asynchronous=False)
        else:
            problems.append("confluent consumer: no messages")
        time.sleep(0.3)  # let a heartbeat or two go out
        c.close()

    with serving(rec, "confluent-kafka", version, "admin", problems) as srv:
        a = AdminClient({**base, "bootstrap.servers": srv.bootstrap})
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("create_topics", lambda: a.create_topics(
                [NewTopic("golden-new", 3, 1, config={"cleanup.policy": "compact"})])),
            ("delete_topics", lambda: a.delete_topics(["golden-old"])),
            ("create_partitions", lambda: a.create_partitions([NewPartitions(TOPIC, 4)])),
            ("describe_configs", lambda: a.describe_configs(
                [ConfigResource("topic", TOPIC)])),
            ("incremental_alter_configs", lambda: a.incremental_alter_configs([ConfigResource(
                "topic", TOPIC, incremental_configs=[ConfigEntry(
                    "retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])])),
            ("describe_cluster", lambda: a.describe_cluster()),
            ("list_consumer_groups", lambda: a.list_consumer_groups()),
            ("describe_consumer_groups", lambda: a.describe_consumer_groups([GROUP])),
            ("list_offsets", lambda: a.list_offsets(
                {TopicPartition(TOPIC, 0): OffsetSpec.latest()})),
            ("delete_records", lambda: a.delete_records([TopicPartition(TOPIC, 0, 2)])),
            ("delete_consumer_groups", lambda: a.delete_consumer_groups([GROUP])),
        ]
        for name, call in calls:
            try:
                futures = call()
                for f in (futures.values() if isinstance(futures, dict) else [futures]):
                    f.result(timeout=10)
            except Exception as exc:
                problems.append(f"confluent admin {name}: {exc!r}")

    with serving(rec, "confluent-kafka", version, "sasl-plain", problems) as srv:
        p = Producer({**base, "bootstrap.servers": srv.bootstrap,
                      "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                      "sasl.username": "golden", "sasl.password": "secret"})
        p.list_topics(TOPIC, timeout=10)
    del confluent_kafka
    return problems


def _kcat_version() -> str:
    out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
    line = next((l for l in out.splitlines() if l.startswith("Version")), "")
    # "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)"
    parts = line.split()
    kcat = parts[1] if len(parts) > 1 else "?"
    rdk = parts[parts.index("librdkafka") + 1] if "librdkafka" in parts else "?"
    return f"kcat {kcat} (librdkafka {rdk})"


@driver("kcat")
def drive_kcat(rec: Recorder) -> list[str]:
    if shutil.which("kcat") is None:
        return ["kcat not installed"]
    version = _kcat_version()
    problems: list[str] = []

    def run(variant: str, args: list[str], stdin: str = "") -> None:
        with serving(rec, "kcat", version, variant, problems) as srv:
            cmd = ["kcat", "-b", srv.bootstrap, "-X", "client.id=golden-kcat", *args]
            try:
                done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30)
            except subprocess.TimeoutExpired:
                problems.append(f"kcat {variant}: timed out")
                return
            if done.returncode != 0:
                problems.append(f"kcat {variant}: rc={done.returncode} {done.stderr.strip()[-300:]}")

    lines = "key-1:value one\nkey-2:value two\n:no key\n"
    for codec in CODECS:
        run(f"produce,compression={codec}",
            ["-P", "-t", TOPIC, "-p", "0", "-K:", "-z", codec, "-H", "trace=abc", "-H", "n=1"],
            lines)
    run("produce,idempotent", ["-P", "-t", TOPIC, "-p", "0", "-K:",
                               "-X", "enable.idempotence=true"], lines)
    run("metadata", ["-L"])
    run("consume", ["-C", "-t", TOPIC, "-p", "1", "-o", "beginning", "-c", "3", "-e"])
    run("group-consume", ["-G", GROUP, "-X", "heartbeat.interval.ms=100", "-X",
                          "enable.auto.commit=false", "-c", "3", "-e", TOPIC])
    return problems


@driver("kafka-python")
def drive_kafka_python(rec: Recorder) -> list[str]:
    import kafka
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic, OffsetSpec

    version = f"kafka-python {kafka.__version__}"
    problems: list[str] = []
    common = {"client_id": "golden-kafka-python", "request_timeout_ms": 10000}

    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        variant = f"acks=all,compression={codec or 'none'}"
        with serving(rec, "kafka-python", version, variant, problems) as srv:
            try:
                p = KafkaProducer(bootstrap_servers=srv.bootstrap, acks="all",
                                  compression_type=codec, linger_ms=5, **common)
            except RuntimeError as exc:  # e.g. no python-snappy on this machine
                problems.append(f"kafka-python {variant}: {exc}")
                continue
            for i in range(3):
                p.send(TOPIC, key=f"key-{i}".encode(), value=f"value-{i}".encode() * 4,
                       partition=0, timestamp_ms=BASE_TIMESTAMP_MS + i,
                       headers=[("trace", f"t{i}".encode())])
            p.flush(10)
            p.close(5)

    with serving(rec, "kafka-python", version, "group-consumer", problems) as srv:
        c = KafkaConsumer(bootstrap_servers=srv.bootstrap, group_id=GROUP,
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          heartbeat_interval_ms=100, fetch_max_wait_ms=100, **common)
        c.subscribe([TOPIC])
        got = 0
        deadline = time.monotonic() + 15
        while got < RECORDS_PER_PARTITION and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got += len(records)
        if got:
            c.commit()
        else:
            problems.append("kafka-python consumer: no messages")
        c.close()

    with serving(rec, "kafka-python", version, "admin", problems) as srv:
        a = KafkaAdminClient(bootstrap_servers=srv.bootstrap, **common)
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("create_topics", lambda: a.create_topics(
                [NewTopic("golden-new", 3, 1, topic_configs={"cleanup.policy": "compact"})])),
            ("delete_topics", lambda: a.delete_topics(["golden-old"])),
            ("create_partitions", lambda: a.create_partitions({TOPIC: NewPartitions(4)})),
            ("describe_configs", lambda: a.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, TOPIC)])),
            ("describe_cluster", lambda: a.describe_cluster()),
            ("alter_configs", lambda: a.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "1000"})],
                raise_on_unknown=False)),
            ("list_groups", lambda: a.list_groups()),
            ("describe_groups", lambda: a.describe_groups([GROUP])),
            ("list_group_offsets", lambda: a.list_group_offsets({GROUP: None})),
            ("alter_group_offsets", lambda: a.alter_group_offsets(
                GROUP, {TopicPartition(TOPIC, 0): OffsetAndMetadata(2, "", -1)})),
            ("list_partition_offsets", lambda: a.list_partition_offsets(
                {TopicPartition(TOPIC, 0): OffsetSpec.LATEST})),
            ("delete_records", lambda: a.delete_records({TopicPartition(TOPIC, 0): 2})),
            ("delete_groups", lambda: a.delete_groups([GROUP])),
        ]
        for name, call in calls:
            try:
                call()
            except Exception as exc:
                problems.append(f"kafka-python admin {name}: {exc!r}")
        a.close()
    return problems


@driver("aiokafka")
def drive_aiokafka(rec: Recorder) -> list[str]:
    import aiokafka

    version = f"aiokafka {aiokafka.__version__}"
    problems: list[str] = []

    async def produce(bootstrap: str, codec: str | None) -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                      compression_type=codec, client_id="golden-aiokafka")
        await p.start()
        try:
            batch = []
            for i in range(3):
                batch.append(await p.send(TOPIC, key=f"key-{i}".encode(),
                                          value=f"value-{i}".encode() * 4, partition=0,
                                          timestamp_ms=BASE_TIMESTAMP_MS + i,
                                          headers=[("trace", f"t{i}".encode())]))
            await asyncio.wait_for(asyncio.gather(*batch), 10)
        finally:
            await p.stop()

    async def idempotent(bootstrap: str) -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                      client_id="golden-aiokafka")
        await p.start()
        try:
            await asyncio.wait_for(p.send_and_wait(TOPIC, b"idempotent", key=b"k", partition=0,
                                                   timestamp_ms=BASE_TIMESTAMP_MS), 10)
        finally:
            await p.stop()

    async def consume(bootstrap: str) -> None:
        c = aiokafka.AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      heartbeat_interval_ms=100, fetch_max_wait_ms=100,
                                      client_id="golden-aiokafka")
        await c.start()
        try:
            got = 0
            deadline = time.monotonic() + 15
            while got < RECORDS_PER_PARTITION and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=200)
                got += sum(len(v) for v in batches.values())
            if got:
                await c.commit()
            else:
                problems.append("aiokafka consumer: no messages")
        finally:
            await c.stop()

    async def admin(bootstrap: str) -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
        from aiokafka.structs import TopicPartition
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="golden-aiokafka")
        await a.start()
        try:
            calls: list[tuple[str, Callable[[], Any]]] = [
                ("create_topics", lambda: a.create_topics([NewTopic("golden-new", 3, 1)])),
                ("delete_topics", lambda: a.delete_topics(["golden-old"])),
                ("create_partitions", lambda: a.create_partitions({TOPIC: NewPartitions(4)})),
                ("describe_configs", lambda: a.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, TOPIC)])),
                ("alter_configs", lambda: a.alter_configs([ConfigResource(
                    ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "1000"})])),
                ("describe_cluster", lambda: a.describe_cluster()),
                ("list_consumer_groups", lambda: a.list_consumer_groups()),
                ("describe_consumer_groups", lambda: a.describe_consumer_groups([GROUP])),
                ("list_consumer_group_offsets", lambda: a.list_consumer_group_offsets(GROUP)),
                ("delete_records", lambda: a.delete_records(
                    {TopicPartition(TOPIC, 0): RecordsToDelete(2)})),
            ]
            for name, make in calls:
                try:
                    await asyncio.wait_for(make(), 10)
                except Exception as exc:
                    problems.append(f"aiokafka admin {name}: {exc!r}")
        finally:
            await a.close()

    def run(variant: str, make: Callable[[str], Any]) -> None:
        with serving(rec, "aiokafka", version, variant, problems) as srv:
            try:
                asyncio.run(make(srv.bootstrap))
            except Exception as exc:
                problems.append(f"aiokafka {variant}: {exc!r}")

    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        run(f"acks=all,compression={codec or 'none'}", lambda b, c=codec: produce(b, c))
    run("idempotent", idempotent)
    run("group-consumer", consume)
    run("admin", admin)
    return problems


# --------------------------------------------------------------------------------------
# Direct encoders: each library's own request classes, at the versions it implements.


# Direct encoders: each library's own request classes, at the versions it implements.

SHARED_MESSAGES = REPO.parent / "shared" / "kafka-protocol" / "messages"


def snapshot_ranges() -> dict[tuple[int, str], tuple[int, int]]:
    """(api_key, "request"/"response") -> validVersions in ../shared (the schemas Ketch uses)."""
    ranges: dict[tuple[int, str], tuple[int, int]] = {}
    for path in SHARED_MESSAGES.glob("*.json"):
        text = "\n".join(l for l in path.read_text().splitlines() if not l.strip().startswith("//"))
        spec = json.loads(text)
        if spec.get("type") not in ("request", "response"):
            continue
        lo, _, hi = spec["validVersions"].partition("-")
        top = int(hi or lo)
        if spec.get("latestVersionUnstable"):
            top -= 1  # a real broker does not advertise the unstable version
        ranges[(spec["apiKey"], spec["type"])] = (int(lo), top)
    return ranges


def kafka_python_request(api_key: int, version: int) -> list[tuple[str, Any]]:
    """Sample requests (variant, object) for one API, with every field any version has."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    R = KP[(api_key, "request")]
    name = api_name(api_key)
    if name == "ApiVersions":
        return [("", R(client_software_name="kafka-python", client_software_version="3.0.12"))]
    if name == "Metadata":
        T = R.MetadataRequestTopic
        return [("topics", R(topics=[T(name=TOPIC), T(name="other")], allow_auto_topic_creation=True,
                             include_cluster_authorized_operations=False,
                             include_topic_authorized_operations=True)),
                ("all-topics", R(topics=None, allow_auto_topic_creation=False))]
    if name == "Produce":
        T = R.TopicProduceData
        P = T.PartitionProduceData
        out = []
        for codec, label in ((0, "none"), (1, "gzip"), (3, "lz4"), (4, "zstd")):
            if codec == 4 and version < 7:
                continue  # zstd needs Produce v7+ (KIP-110)
            b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                          producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                          batch_size=1 << 20)
            for i in range(3):
                b.append(i, timestamp=BASE_TIMESTAMP_MS + i, key=f"k{i}".encode(),
                         value=f"value {i}".encode(), headers=[("h", f"{i}".encode())])
            out.append((f"compression={label}", R(
                transactional_id=None, acks=-1, timeout_ms=30000,
                topic_data=[T(name=TOPIC, partition_data=[P(index=0, records=bytes(b.build()))])])))
        return out
    if name == "Fetch":
        T = R.FetchTopic
        P = T.FetchPartition
        F = R.ForgottenTopic
        return [("", R(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800,
                       isolation_level=1, session_id=0, session_epoch=-1,
                       topics=[T(topic=TOPIC, partitions=[
                           P(partition=0, current_leader_epoch=1, fetch_offset=5,
                             last_fetched_epoch=-1, log_start_offset=-1,
                             partition_max_bytes=1048576),
                           P(partition=1, current_leader_epoch=1, fetch_offset=0,
                             last_fetched_epoch=-1, log_start_offset=-1,
                             partition_max_bytes=1048576)])],
                       forgotten_topics_data=[F(topic="gone", partitions=[3])] if version >= 7 else [],
                       rack_id="rack-a"))]
    if name == "ListOffsets":
        T = R.ListOffsetsTopic
        P = T.ListOffsetsPartition
        return [("", R(replica_id=-1, isolation_level=1, timeout_ms=30000, topics=[T(name=TOPIC, partitions=[
            P(partition_index=0, current_leader_epoch=1, timestamp=-1),
            P(partition_index=1, current_leader_epoch=-1, timestamp=BASE_TIMESTAMP_MS)])]))]
    if name == "OffsetForLeaderEpoch":
        T = R.OffsetForLeaderTopic
        P = T.OffsetForLeaderPartition
        return [("", R(replica_id=-1, topics=[T(topic=TOPIC, partitions=[
            P(partition=0, current_leader_epoch=2, leader_epoch=1)])]))]
    if name == "CreateTopics":
        T = R.CreatableTopic
        A = T.CreatableReplicaAssignment
        C = T.CreatableTopicConfig
        return [("", R(timeout_ms=30000, validate_only=False, topics=[
            T(name="golden-new", num_partitions=3, replication_factor=1, assignments=[],
              configs=[C(name="cleanup.policy", value="compact"), C(name="x", value=None)]),
            T(name="golden-assigned", num_partitions=-1, replication_factor=-1,
              assignments=[A(partition_index=0, broker_ids=[1])], configs=[])]))]
    if name == "DeleteTopics":
        S = R.DeleteTopicState
        return [("", R(timeout_ms=30000, topic_names=["golden-old"],
                       topics=[S(name="golden-old", topic_id=uuid.UUID(int=0))]))]
    if name == "CreatePartitions":
        T = R.CreatePartitionsTopic
        A = T.CreatePartitionsAssignment
        return [("", R(timeout_ms=30000, validate_only=False, topics=[
            T(name=TOPIC, count=4, assignments=None),
            T(name="other", count=2, assignments=[A(broker_ids=[1])])]))]
    if name == "DescribeConfigs":
        Res = R.DescribeConfigsResource
        return [("", R(include_synonyms=True, include_documentation=True, resources=[
            Res(resource_type=2, resource_name=TOPIC, configuration_keys=None),
            Res(resource_type=4, resource_name="1", configuration_keys=["log.retention.ms"])]))]
    if name == "IncrementalAlterConfigs":
        Res = R.AlterConfigsResource
        C = Res.AlterableConfig
        return [("", R(validate_only=False, resources=[Res(resource_type=2, resource_name=TOPIC, configs=[
            C(name="retention.ms", config_operation=0, value="1000"),
            C(name="cleanup.policy", config_operation=1, value=None)])]))]
    if name == "DescribeCluster":
        return [("", R(include_cluster_authorized_operations=True, endpoint_type=1))]
    if name == "InitProducerId":
        return [("idempotent", R(transactional_id=None, transaction_timeout_ms=2147483647,
                                 producer_id=-1, producer_epoch=-1)),
                ("transactional", R(transactional_id="golden-txn", transaction_timeout_ms=60000,
                                    producer_id=4000, producer_epoch=3))]
    if name == "FindCoordinator":
        return [("group", R(key=GROUP, key_type=0, coordinator_keys=[GROUP])),
                ("transaction", R(key="golden-txn", key_type=1, coordinator_keys=["golden-txn", "t2"]))]
    if name == "JoinGroup":
        P = R.JoinGroupRequestProtocol
        return [("", R(group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=300000,
                       member_id="", group_instance_id=None, protocol_type="consumer",
                       protocols=[P(name="range", metadata=b"\x00\x03\x00\x00\x00\x01\x00\x06golden"),
                                  P(name="roundrobin", metadata=b"")],
                       reason="joining"))]
    if name == "SyncGroup":
        A = R.SyncGroupRequestAssignment
        return [("", R(group_id=GROUP, generation_id=1, member_id="member-1", group_instance_id=None,
                       protocol_type="consumer", protocol_name="range",
                       assignments=[A(member_id="member-1", assignment=b"\x00\x03assignment")]))]
    if name == "Heartbeat":
        return [("", R(group_id=GROUP, generation_id=1, member_id="member-1", group_instance_id=None))]
    if name == "LeaveGroup":
        M = R.MemberIdentity
        return [("", R(group_id=GROUP, member_id="member-1", members=[
            M(member_id="member-1", group_instance_id=None, reason="shutting down")]))]
    if name == "OffsetCommit":
        T = R.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        return [("", R(group_id=GROUP, generation_id_or_member_epoch=1, member_id="member-1",
                       group_instance_id=None, retention_time_ms=-1, topics=[T(name=TOPIC, partitions=[
                           P(partition_index=0, committed_offset=42, committed_leader_epoch=1,
                             committed_metadata="meta"),
                           P(partition_index=1, committed_offset=7, committed_leader_epoch=-1,
                             committed_metadata=None if version >= 0 else "")])]))]
    if name == "OffsetFetch":
        T = R.OffsetFetchRequestTopic
        G = R.OffsetFetchRequestGroup
        GT = G.OffsetFetchRequestTopics
        return [("", R(group_id=GROUP, require_stable=True,
                       topics=[T(name=TOPIC, partition_indexes=[0, 1])],
                       groups=[G(group_id=GROUP, member_id=None, member_epoch=-1,
                                 topics=[GT(name=TOPIC, partition_indexes=[0, 1])])]))]
    if name == "ListGroups":
        return [("", R(states_filter=["Stable", "Empty"]))]
    if name == "DescribeGroups":
        return [("", R(groups=[GROUP, "other-group"], include_authorized_operations=True))]
    if name == "DeleteGroups":
        return [("", R(groups_names=[GROUP]))]
    if name == "SaslHandshake":
        return [("", R(mechanism="PLAIN"))]
    if name == "SaslAuthenticate":
        return [("", R(auth_bytes=b"\x00golden\x00secret"))]
    if name == "DescribeQuorum":
        T = R.TopicData
        P = T.PartitionData
        return [("", R(topics=[T(topic_name="__cluster_metadata", partitions=[P(partition_index=0)])]))]
    raise KeyError(name)


KAFKA_PYTHON_DIRECT_APIS = (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 23,
                            32, 36, 37, 42, 44, 55, 60)


def kafka_python_version_range(api_key: int, snapshot: dict) -> range:
    """Versions kafka-python really implements (its JSON validVersions, not the forced 0)
    that the shared snapshot also has."""
    cls = KP[(api_key, "request")]
    lo, hi = BaseFieldVersions(cls.json["validVersions"])
    slo, shi = snapshot.get((api_key, "request"), (lo, hi))
    return range(max(lo, slo), min(hi, shi) + 1)


def BaseFieldVersions(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


@driver("kafka-python-encoder")
def drive_kafka_python_encoder(rec: Recorder) -> list[str]:
    """kafka-python's request classes, encoded by kafka-python at every version it has; and
    the capture server's reply to each, encoded by kafka-python too."""
    version = _kafka_python_version()
    snapshot = snapshot_ranges()
    problems: list[str] = []
    responder = Responder(port=9092)
    # KIP-511: the reply to an ApiVersions version the broker does not know (here v5) is a
    # v0 body with error 35 under response header v0.
    rec.add(Captured("kafka-python-encoder", version, "unsupported-version-reply", "response",
                     APIVERSIONS_KEY, 0, responder._apiversions_unsupported(99),
                     encoder="kafka-python"))
    correlation_id = 100
    for api_key in KAFKA_PYTHON_DIRECT_APIS:
        for api_version in kafka_python_version_range(api_key, snapshot):
            for variant, request in kafka_python_request(api_key, api_version):
                correlation_id += 1
                try:
                    request.API_VERSION = api_version
                    request.with_header(correlation_id=correlation_id, client_id="golden-kafka-python")
                    payload = bytes(request.encode(header=True))
                except Exception as exc:
                    problems.append(f"kafka-python encode {api_name(api_key)} v{api_version}: {exc!r}")
                    continue
                rec.add(Captured("kafka-python-encoder", version, variant or "direct", "request",
                                 api_key, api_version, frame_of(payload), encoder="kafka-python"))
                if api_key == 55 or (api_key, "response") not in snapshot:  # no DescribeQuorum replier
                    continue
                if not snapshot[(api_key, "response")][0] <= api_version <= snapshot[(api_key, "response")][1]:
                    continue
                try:
                    reply = responder.respond(api_key, api_version, correlation_id, payload)
                except Exception as exc:
                    problems.append(f"kafka-python reply {api_name(api_key)} v{api_version}: {exc!r}")
                    continue
                if reply is not None:
                    rec.add(Captured("kafka-python-encoder", version, "direct-reply", "response",
                                     api_key, api_version, reply, encoder="kafka-python"))
    return problems


def aiokafka_requests() -> list[tuple[str, Any]]:
    """aiokafka Request builders with sample arguments (variant, builder)."""
    from aiokafka.protocol import admin, commit, coordination, fetch, group, metadata, offset
    from aiokafka.protocol import produce, transaction
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(3):
        b.append(i, timestamp=BASE_TIMESTAMP_MS + i, key=f"k{i}".encode(),
                 value=f"value {i}".encode(), headers=[("h", f"{i}".encode())])
    batch = bytes(b.build())
    return [
        ("", admin.ApiVersionRequest()),
        ("", admin.CreateTopicsRequest(
            [("golden-new", 3, 1, [], [("cleanup.policy", "compact")])], 30000, False)),
        ("", admin.DeleteTopicsRequest(["golden-old"], 30000)),
        ("", admin.ListGroupsRequest()),
        ("", admin.DescribeGroupsRequest([GROUP, "other-group"])),
        ("", admin.SaslHandShakeRequest("PLAIN")),
        ("", admin.DescribeConfigsRequest([(2, TOPIC, None), (4, "1", ["log.retention.ms"])])),
        ("", admin.AlterConfigsRequest([(2, TOPIC, [("retention.ms", "1000")])])),
        ("", admin.SaslAuthenticateRequest(b"\x00golden\x00secret")),
        ("", admin.CreatePartitionsRequest([(TOPIC, (4, None))], 30000, False)),
        ("", admin.DeleteGroupsRequest([GROUP])),
        ("", admin.DeleteRecordsRequest([(TOPIC, [(0, 2)])], 30000)),
        ("", commit.OffsetCommitRequest(GROUP, 1, "member-1", -1, [(TOPIC, [(0, 42, "meta")])])),
        ("", commit.OffsetFetchRequest(GROUP, [(TOPIC, [0, 1])])),
        ("", coordination.FindCoordinatorRequest(GROUP, 0)),
        ("", fetch.FetchRequest(500, 1, 52428800, 0, [(TOPIC, [(0, 5, 1048576)])], rack_id="rack-a")),
        ("", group.JoinGroupRequest(GROUP, 10000, 300000, "", None, "consumer",
                                    [("range", b"\x00\x01meta")])),
        ("", group.SyncGroupRequest(GROUP, 1, "member-1", None, [("member-1", b"\x00\x01assign")])),
        ("", group.HeartbeatRequest(GROUP, 1, "member-1")),
        ("", group.LeaveGroupRequest(GROUP, "member-1")),
        ("", metadata.MetadataRequest([TOPIC], allow_auto_topic_creation=True)),
        ("", offset.OffsetRequest(-1, 0, [(TOPIC, [(0, -1)])])),
        ("", produce.ProduceRequest(None, -1, 30000, [(TOPIC, [(0, batch)])])),
        ("", transaction.InitProducerIdRequest("golden-txn", 60000)),
        ("", transaction.AddPartitionsToTxnRequest("golden-txn", 4000, 0, [(TOPIC, [0, 1])])),
        ("", transaction.AddOffsetsToTxnRequest("golden-txn", 4000, 0, GROUP)),
        ("", transaction.EndTxnRequest("golden-txn", 4000, 0, True)),
        ("", transaction.TxnOffsetCommitRequest("golden-txn", GROUP, 4000, 0,
                                                [(TOPIC, [(0, 42, "meta")])])),
    ]


@driver("aiokafka-encoder")
def drive_aiokafka_encoder(rec: Recorder) -> list[str]:
    """aiokafka's request structs, encoded by aiokafka, one frame per version it implements."""
    import aiokafka

    version = f"aiokafka {aiokafka.__version__}"
    snapshot = snapshot_ranges()
    problems: list[str] = []
    correlation_id = 200
    for variant, builder in aiokafka_requests():
        for struct_cls in builder._CLASSES:
            api_key, api_version = struct_cls.API_KEY, struct_cls.API_VERSION
            lo, hi = snapshot.get((api_key, "request"), (0, 1 << 15))
            if not lo <= api_version <= hi:
                continue
            if api_key == 0 and api_version < 3:
                continue  # Produce v0-2 carry magic 0/1 message sets; aiokafka never sends them
            correlation_id += 1
            try:
                struct_obj = builder.build(struct_cls)
                header = struct_obj.build_request_header(correlation_id, "golden-aiokafka")
                payload = header.encode() + struct_obj.encode()
            except Exception as exc:
                problems.append(f"aiokafka encode {struct_cls.__name__}: {exc!r}")
                continue
            rec.add(Captured("aiokafka-encoder", version, variant or "direct", "request",
                             api_key, api_version, frame_of(payload), encoder="aiokafka"))
    return problems


# --------------------------------------------------------------------------------------
# Writing the golden set


def select(frames: list[Captured]) -> list[Captured]:
    """Drop repeats (same bytes apart from the correlation id) and cap each group."""
    kept: list[Captured] = []
    seen: set[tuple] = set()
    per_group: dict[tuple, int] = {}
    for c in frames:
        body = c.frame[:8] + b"\0\0\0\0" + c.frame[12:] if c.direction == "request" \
            else c.frame[:4] + b"\0\0\0\0" + c.frame[8:]
        if c.direction == "response":
            # Replies to live clients repeat across clients: one group for all of them.
            kind = "reply" if c.variant.startswith("reply-to-") else c.variant
            group = (c.client, c.direction, kind, c.api_key, c.api_version)
        else:
            group = (c.client, c.variant, c.direction, c.api_key, c.api_version)
        ident = (c.client, c.direction, c.api_key, c.api_version, body)
        if ident in seen or per_group.get(group, 0) >= PER_KEY_FRAMES_MAX:
            continue
        seen.add(ident)
        per_group[group] = per_group.get(group, 0) + 1
        kept.append(c)
    return kept


def entry(c: Captured) -> dict[str, Any]:
    """One golden frame: the bytes (hex) with its sidecar facts."""
    return {
        "client": c.client,
        "client_version": c.client_version,
        "encoder": c.encoder,
        "variant": c.variant,
        "direction": c.direction,
        "api_key": c.api_key,
        "api_name": api_name(c.api_key),
        "api_version": c.api_version,
        "sha256": hashlib.sha256(c.frame).hexdigest(),
        "frame": c.frame.hex(),
    }


def write(frames: list[Captured], produced: set[tuple[str, str]], out: Path) -> int:
    """Merge into out/<client>.json: entries of the (client, variant) pairs this run produced
    are replaced, others (from drivers not run this time) are kept. Returns frame bytes."""
    out.mkdir(parents=True, exist_ok=True)
    by_client: dict[str, list[dict[str, Any]]] = {}
    for path in out.glob("*.json"):
        kept = [e for e in json.loads(path.read_text())
                if (e["client"], e["variant"]) not in produced]
        by_client[path.stem] = kept
    for c in frames:
        by_client.setdefault(c.client, []).append(entry(c))
    total = 0
    for client, entries in by_client.items():
        entries.sort(key=lambda e: (e["api_key"], e["api_version"], e["direction"],
                                    e["variant"], e["sha256"]))
        # One entry per line: diffs of a regeneration read frame by frame.
        lines = ",\n".join(json.dumps(e, sort_keys=True) for e in entries)
        (out / f"{client}.json").write_text(f"[\n{lines}\n]\n")
        total += sum(len(e["frame"]) // 2 for e in entries)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(DRIVERS), help="drivers to run")
    parser.add_argument("--out", type=Path, default=GOLDEN_DIR)
    parser.add_argument("--list", action="store_true", help="print what was captured")
    args = parser.parse_args(argv)

    rec = Recorder()
    problems: list[str] = []
    names = args.only or sorted(DRIVERS)
    for name in names:
        started = time.monotonic()
        problems += DRIVERS[name](rec)
        print(f"{name}: done in {time.monotonic() - started:.1f}s", file=sys.stderr)
    kept = select(rec.frames)
    produced = {(c.client, c.variant) for c in rec.frames}
    total = write(kept, produced, args.out)
    print(f"captured {len(rec.frames)} frames, kept {len(kept)}; golden set now holds "
          f"{total} frame bytes in {args.out}", file=sys.stderr)
    if args.list:
        for c in sorted(kept, key=lambda c: (c.client, c.api_key, c.api_version, c.direction)):
            print(f"{c.client:22} {api_name(c.api_key):24} v{c.api_version:<3} {c.direction:9} {c.variant}")
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
