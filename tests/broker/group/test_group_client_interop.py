"""The coordinator with real clients' bytes: their subscriptions in, their decoders on our
responses (kafka-python's protocol classes as the independent decoder, STYLE.md §6)."""
from __future__ import annotations

import dataclasses

import pytest

from clients.protocol import decode_message, encode_message
from clients.protocol.errors import ErrorCode
from group_harness import Harness, assignment

pytestmark = pytest.mark.interop
E = ErrorCode


def _kafka_python_subscriptions() -> list[tuple[str, bytes]]:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    topics = {"t", "u"}
    out = []
    for assignor in (RangePartitionAssignor, RoundRobinPartitionAssignor):
        out.append((assignor.name, assignor.metadata(topics).encode(version=0)))
    sticky = CooperativeStickyAssignor()
    meta = sticky.metadata(topics)
    out.append((sticky.name, meta.encode(version=meta.version)))
    return out


def _aiokafka_subscriptions() -> list[tuple[str, bytes]]:
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    return [(a.name, a.metadata({"t", "u"}).encode())
            for a in (RangePartitionAssignor, RoundRobinPartitionAssignor)]


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_real_client_subscriptions_select_a_protocol_and_topics(client: str) -> None:
    from kafka.protocol.consumer import ConsumerProtocolSubscription
    protocols = _kafka_python_subscriptions() if client == "kafka-python" else \
        _aiokafka_subscriptions()
    h = Harness()
    a = h.join("g", version=3, client_id="a", protocols=protocols)
    b = h.join("g", version=3, client_id="b", protocols=list(reversed(protocols)))
    h.settle()
    ra, rb = h.response(a), h.response(b)
    assert ra.protocol_name == rb.protocol_name in {name for name, _ in protocols}
    assert h.group("g").subscribed_topics == {"t", "u"}
    leader = ra if ra.leader == ra.member_id else rb
    for m in leader.members:
        decoded = ConsumerProtocolSubscription.decode(m.metadata)
        assert sorted(decoded.topics) == ["t", "u"]


def _kafka_python_class(api: str):
    from kafka.protocol.consumer import group
    from kafka.protocol.admin import groups as admin_groups
    return {
        "join": group.JoinGroupResponse, "sync": group.SyncGroupResponse,
        "heartbeat": group.HeartbeatResponse, "leave": group.LeaveGroupResponse,
        "commit": group.OffsetCommitResponse, "fetch": group.OffsetFetchResponse,
        "offset_delete": group.OffsetDeleteResponse,
        "list": admin_groups.ListGroupsResponse, "describe": admin_groups.DescribeGroupsResponse,
        "delete": admin_groups.DeleteGroupsResponse,
    }[api]


def _plain(value):
    """Our codec objects and kafka-python's, reduced to comparable plain data."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name != "unknown_tagged_fields"}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _kafka_python_plain(obj, fields: dict):
    out = {}
    for name, ours in fields.items():
        if not hasattr(obj, name):
            continue
        theirs = getattr(obj, name)
        if isinstance(ours, list):
            theirs = list(theirs or [])
            if len(theirs) != len(ours):
                out[name] = ("length", len(theirs))     # differs from ours: fails below
                continue
            out[name] = [_kafka_python_plain(t, o) if isinstance(o, dict) else t
                         for t, o in zip(theirs, ours)]
        elif isinstance(ours, dict):
            out[name] = _kafka_python_plain(theirs, ours)
        elif name == "authorized_operations" and theirs is None:
            out[name] = -2**31     # kafka-python reads the "not requested" sentinel as None
        else:
            out[name] = theirs
    return out


def _restrict(ours, theirs):
    """Our plain data, keeping only the fields kafka-python decoded."""
    if isinstance(theirs, dict):
        return {k: _restrict(ours[k], v) for k, v in theirs.items()}
    if isinstance(theirs, list):
        return [_restrict(o, t) for o, t in zip(ours, theirs)]
    return ours


def test_kafka_python_decodes_every_response_to_the_same_values() -> None:
    h = Harness()
    ids = h.form_group("g", 3, version=5)
    h.join("g", member_id=ids[1], version=7)
    h.heartbeat("g", ids[0], 1, version=4)
    h.commit("g", {("t", 0): 5}, member_id=ids[0], generation_id=1, version=8)
    h.commit("solo", {("t", 0): 5, ("t", 1): 6}, version=2, retention_time_ms=1000)
    for v in (1, 5, 7, 8):
        h.fetch("g", {"t": [0, 1]}, version=v)
    h.fetch("g", None, version=6)
    h.offset_delete("solo", {"t": [1]})
    h.list_groups(version=3)
    h.describe(["g", "solo"], version=3)
    h.leave("g", [(ids[2], None), ("ghost", None)], version=4)
    h.leave("g", [("ghost", None)], version=1)
    h.join("g", version=0, session_timeout_ms=10_000)
    h.settle()
    h.delete_groups(["solo", "g"], version=1)
    checked = 0
    for token, response in h.responses.items():
        api, version = h.versions[token]
        data = encode_message(response, version)
        decoded = _kafka_python_class(api).decode(data, version=version)
        # Our own decode of the bytes keeps exactly the fields this version carries.
        ours = _plain(decode_message(type(response), version, data))
        theirs = _kafka_python_plain(decoded, ours)
        assert theirs == _restrict(ours, theirs), (api, version)
        checked += 1
    assert checked == len(h.responses) >= 20
    assert {a for a, _ in h.versions.values()} >= {"join", "sync", "heartbeat", "leave",
                                                   "commit", "fetch", "offset_delete", "list",
                                                   "describe", "delete"}


def test_assignment_bytes_reach_followers_unchanged() -> None:
    from kafka.protocol.consumer import ConsumerProtocolAssignment
    h = Harness()
    ids = h.form_group("g", 2)
    r = h.response(h.sync("g", ids[1], 1))
    decoded = ConsumerProtocolAssignment.decode(r.assignment)
    assert [(t.topic, list(t.partitions)) for t in decoded.assigned_partitions] == [("t", [1])]
    assert r.assignment == assignment({"t": [1]})
