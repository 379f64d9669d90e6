"""CreateTopics, DeleteTopics, CreatePartitions: decisions, refusals, retries."""
from __future__ import annotations

import dataclasses
import random
import uuid

import pytest

from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from quorum.controller import ControllerConfig
from tests.quorum.controller.harness import Harness

CT = M.CreateTopicsRequest


def cluster(n: int = 3, config: ControllerConfig | None = None) -> Harness:
    h = Harness(config)
    h.start_brokers({b: None for b in range(1, n + 1)})
    return h


def test_create_topic_writes_topic_configs_and_partitions_in_one_batch() -> None:
    h = cluster()
    request = CT(topics=[CT.CreatableTopic(
        name="orders", num_partitions=3, replication_factor=2,
        configs=[CT.CreatableTopicConfig(name="retention.ms", value="1000")])])
    result = h.controller.handle_create_topics(request, h.now_ms)
    assert h.image.topics.get("orders") is None            # decided, not applied
    assert [type(r).__name__ for r in result.records] == \
        ["TopicRecord", "ConfigRecord", "PartitionRecord", "PartitionRecord", "PartitionRecord"]
    created = result.response.topics[0]
    assert (created.error_code, created.error_message, created.num_partitions,
            created.replication_factor) == (0, None, 3, 2)
    assert created.topic_id == result.records[0].topic_id
    configs = {c.name: (c.value, c.config_source) for c in created.configs}
    assert configs["retention.ms"] == ("1000", 1) and configs["segment.bytes"][1] == 5
    h.commit(result)
    t = h.topic("orders")
    assert t.topic_id == created.topic_id and len(t.partitions) == 3
    assert h.image.configs.topic("orders") == {"retention.ms": "1000"}


def test_defaults_apply_for_minus_one() -> None:
    h = cluster(config=ControllerConfig(num_partitions=4, default_replication_factor=3))
    created = h.create_topic("d", partitions=-1, replication_factor=-1)
    assert (created.num_partitions, created.replication_factor) == (4, 3)
    assert all(len(p.replicas) == 3 for p in h.topic("d").partitions.values())


def test_a_retried_create_gets_topic_already_exists() -> None:
    h = cluster()
    assert h.create_topic("t").error_code == 0
    again = h.create_topic("t")
    assert (again.error_code, again.error_message) == \
        (ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")


@pytest.mark.parametrize("name, code", [
    ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
    (".", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("..", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("a" * 250, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("has space", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("ünïcode", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("a" * 249, ErrorCode.NONE),
    ("ok.name_with-all", ErrorCode.NONE),
])
def test_topic_names(name: str, code: ErrorCode) -> None:
    h = cluster()
    assert h.create_topic(name).error_code == code


def test_names_differing_only_by_dot_and_underscore_collide() -> None:
    h = cluster()
    assert h.create_topic("a.b").error_code == 0
    clash = h.create_topic("a_b")
    assert clash.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "collides with existing topic: a.b" in clash.error_message


def test_duplicates_in_one_request_and_independent_results() -> None:
    h = cluster()
    request = CT(topics=[CT.CreatableTopic(name="x", num_partitions=1, replication_factor=1),
                         CT.CreatableTopic(name="x", num_partitions=1, replication_factor=1),
                         CT.CreatableTopic(name="y", num_partitions=2, replication_factor=1),
                         CT.CreatableTopic(name="z", num_partitions=0, replication_factor=1)])
    response = h.commit(h.controller.handle_create_topics(request, h.now_ms))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("x", ErrorCode.INVALID_REQUEST), ("x", ErrorCode.INVALID_REQUEST),
        ("y", 0), ("z", ErrorCode.INVALID_PARTITIONS)]
    assert sorted(h.image.topics.by_name) == ["y"]


@pytest.mark.parametrize("partitions, rf, code", [
    (0, 1, ErrorCode.INVALID_PARTITIONS),
    (-2, 1, ErrorCode.INVALID_PARTITIONS),
    (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
    (1, -2, ErrorCode.INVALID_REPLICATION_FACTOR),
    (1, 4, ErrorCode.INVALID_REPLICATION_FACTOR),
    (2_000_000, 1, ErrorCode.INVALID_PARTITIONS),
])
def test_bad_counts(partitions: int, rf: int, code: ErrorCode) -> None:
    h = cluster()
    created = h.create_topic("t", partitions=partitions, replication_factor=rf)
    assert created.error_code == code and created.error_message
    assert h.image.topics.get("t") is None


def test_replication_factor_counts_only_active_brokers() -> None:
    h = cluster()
    h.heartbeat(3, want_fence=True)
    created = h.create_topic("t", replication_factor=3)
    assert created.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "only 2 broker(s) are active" in created.error_message


@pytest.mark.parametrize("configs, code, message", [
    ({"retention.msec": "1"}, ErrorCode.INVALID_CONFIG, "Unknown topic config name: retention.msec"),
    ({"min.insync.replicas": "0"}, ErrorCode.INVALID_CONFIG,
     "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ({"cleanup.policy": "shred"}, ErrorCode.INVALID_CONFIG,
     "Invalid value shred for configuration cleanup.policy: String must be one of: "
     "compact, delete"),
    ({"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG,
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": "99999999999"}, ErrorCode.INVALID_CONFIG,
     "Invalid value 99999999999 for configuration segment.bytes: Not a number of type INT"),
    ({"unclean.leader.election.enable": "yes"}, ErrorCode.INVALID_CONFIG,
     "Invalid value yes for configuration unclean.leader.election.enable: Expected value to be "
     "either true or false"),
    ({"max.message.bytes": "-1"}, ErrorCode.INVALID_CONFIG,
     "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"),
])
def test_bad_topic_configs(configs, code, message) -> None:
    h = cluster()
    created = h.create_topic("t", configs=configs)
    assert (created.error_code, created.error_message) == (code, message)


def test_null_and_duplicate_configs_are_invalid_requests() -> None:
    h = cluster()
    topic = CT.CreatableTopic(name="t", num_partitions=1, replication_factor=1, configs=[
        CT.CreatableTopicConfig(name="retention.ms", value=None)])
    response = h.commit(h.controller.handle_create_topics(CT(topics=[topic]), h.now_ms))
    assert response.topics[0].error_code == ErrorCode.INVALID_REQUEST
    topic = dataclasses.replace(
        topic, configs=[CT.CreatableTopicConfig(name="retention.ms", value="1")] * 2)
    response = h.commit(h.controller.handle_create_topics(CT(topics=[topic]), h.now_ms))
    assert response.topics[0].error_code == ErrorCode.INVALID_REQUEST


def test_good_configs_of_every_type() -> None:
    h = cluster()
    configs = {"cleanup.policy": "compact, delete", "min.cleanable.dirty.ratio": "0.1",
               "preallocate": "TRUE", "retention.bytes": "-1", "compression.type": "zstd",
               "message.timestamp.type": "LogAppendTime", "segment.bytes": "1024"}
    assert h.create_topic("t", configs=configs).error_code == 0
    assert dict(h.image.configs.topic("t")) == configs


def test_validate_only_checks_everything_and_writes_nothing() -> None:
    h = cluster()
    request = CT(validate_only=True, topics=[
        CT.CreatableTopic(name="v", num_partitions=5, replication_factor=3),
        CT.CreatableTopic(name="w", num_partitions=5, replication_factor=9)])
    result = h.controller.handle_create_topics(request, h.now_ms)
    assert result.records == ()
    assert [t.error_code for t in result.response.topics] == \
        [0, ErrorCode.INVALID_REPLICATION_FACTOR]


def test_manual_assignment() -> None:
    h = cluster()
    assert h.create_topic("m", assignments=[[3, 1], [1, 2]]).error_code == 0
    p0, p1 = h.partition("m", 0), h.partition("m", 1)
    assert (p0.replicas, p0.leader, p1.replicas, p1.leader) == ((3, 1), 3, (1, 2), 1)


def test_manual_assignment_skips_fenced_brokers_for_isr_and_leadership() -> None:
    h = cluster()
    h.heartbeat(3, want_fence=True)
    assert h.create_topic("m", assignments=[[3, 1]]).error_code == 0
    p = h.partition("m")
    assert (p.replicas, p.isr, p.leader) == ((3, 1), (1,), 1)


@pytest.mark.parametrize("assignments, message", [
    ([[1], []], "is empty"),
    ([[1, 1]], "more than once"),
    ([[9]], "no such broker is registered"),
    ([[1, 2], [3]], "same number of replicas"),
])
def test_bad_manual_assignments(assignments, message) -> None:
    h = cluster()
    created = h.create_topic("m", assignments=assignments)
    assert created.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert message in created.error_message


def test_manual_assignment_on_fenced_brokers_only() -> None:
    h = cluster()
    h.heartbeat(3, want_fence=True)
    created = h.create_topic("m", assignments=[[3]])
    assert created.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_manual_assignment_with_gaps_or_counts() -> None:
    h = cluster()
    topic = CT.CreatableTopic(name="m", num_partitions=-1, replication_factor=-1, assignments=[
        CT.CreatableReplicaAssignment(partition_index=1, broker_ids=[1])])
    response = h.commit(h.controller.handle_create_topics(CT(topics=[topic]), h.now_ms))
    assert response.topics[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    topic = dataclasses.replace(topic, num_partitions=1, assignments=[
        CT.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])])
    response = h.commit(h.controller.handle_create_topics(CT(topics=[topic]), h.now_ms))
    assert response.topics[0].error_code == ErrorCode.INVALID_REQUEST


def test_topic_ids_are_random_version_4_and_deterministic_given_the_seed() -> None:
    ids = []
    for _ in range(2):
        h = cluster()
        h.create_topic("a")
        h.create_topic("b")
        ids.append((h.topic("a").topic_id, h.topic("b").topic_id))
    assert ids[0] == ids[1] and ids[0][0] != ids[0][1]
    assert ids[0][0].version == 4


# ---------------------------------------------------------------- DeleteTopics

DT = M.DeleteTopicsRequest


def test_delete_by_name_and_by_id() -> None:
    h = cluster()
    h.create_topic("a", configs={"retention.ms": "5"})
    h.create_topic("b")
    b_id = h.topic("b").topic_id
    response = h.commit(h.controller.handle_delete_topics(DT(topic_names=["a"]), h.now_ms))
    assert [(r.name, r.error_code) for r in response.responses] == [("a", 0)]
    assert h.image.topics.get("a") is None and h.image.configs.topic("a") == {}
    response = h.commit(h.controller.handle_delete_topics(
        DT(topics=[DT.DeleteTopicState(name=None, topic_id=b_id)]), h.now_ms))
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [("b", b_id, 0)]
    assert h.image.topics.by_id == {}
    # a recreated topic gets a new id
    h.create_topic("a")
    assert h.image.topics.get("a") is not None


def test_delete_refusals() -> None:
    h = cluster()
    h.create_topic("a")
    a_id = h.topic("a").topic_id
    response = h.commit(h.controller.handle_delete_topics(DT(topics=[
        DT.DeleteTopicState(name="nope"),
        DT.DeleteTopicState(name=None, topic_id=uuid.UUID(int=42)),
        DT.DeleteTopicState(name="a", topic_id=a_id),
    ]), h.now_ms))
    assert [r.error_code for r in response.responses] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INVALID_REQUEST]
    twice = h.controller.handle_delete_topics(DT(topic_names=["a", "a"]), h.now_ms)
    assert twice.records == ()
    assert {r.error_code for r in twice.response.responses} == {ErrorCode.INVALID_REQUEST}
    retried = h.commit(h.controller.handle_delete_topics(DT(topic_names=["a"]), h.now_ms))
    assert retried.responses[0].error_code == 0
    again = h.commit(h.controller.handle_delete_topics(DT(topic_names=["a"]), h.now_ms))
    assert again.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ---------------------------------------------------------------- CreatePartitions

CP = M.CreatePartitionsRequest


def create_partitions(h: Harness, name: str, count: int, assignments=None):
    request = CP(topics=[CP.CreatePartitionsTopic(
        name=name, count=count,
        assignments=None if assignments is None else
        [CP.CreatePartitionsAssignment(broker_ids=a) for a in assignments])])
    return h.commit(h.controller.handle_create_partitions(request, h.now_ms)).results[0]


def test_create_partitions_adds_balanced_partitions_with_the_same_rf() -> None:
    h = cluster()
    h.create_topic("t", partitions=2, replication_factor=2)
    result = create_partitions(h, "t", 5)
    assert (result.error_code, result.error_message) == (0, None)
    t = h.topic("t")
    assert sorted(t.partitions) == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in t.partitions.values())
    assert t.partitions[4].leader_epoch == 0


def test_create_partitions_refusals() -> None:
    h = cluster()
    h.create_topic("t", partitions=3, replication_factor=2)
    assert create_partitions(h, "nope", 4).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    same = create_partitions(h, "t", 3)
    assert (same.error_code, same.error_message) == \
        (ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    assert create_partitions(h, "t", 2).error_code == ErrorCode.INVALID_PARTITIONS
    assert create_partitions(h, "t", 5, [[1, 2]]).error_code == \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert create_partitions(h, "t", 4, [[1]]).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert create_partitions(h, "t", 4, [[1, 9]]).error_code == \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert create_partitions(h, "t", 2_000_000).error_code == ErrorCode.INVALID_PARTITIONS
    assert len(h.topic("t").partitions) == 3
    assert create_partitions(h, "t", 4, [[3, 1]]).error_code == 0
    assert h.partition("t", 3).replicas == (3, 1)


def test_create_partitions_validate_only() -> None:
    h = cluster()
    h.create_topic("t")
    request = CP(validate_only=True, topics=[CP.CreatePartitionsTopic(name="t", count=3)])
    result = h.controller.handle_create_partitions(request, h.now_ms)
    assert result.records == () and result.response.results[0].error_code == 0


def test_a_collision_is_found_among_many_topics_and_within_one_request() -> None:
    from quorum.controller.replication_control import (
        _COLLISION_LOOKUPS_MAX_SEPARATORS as MAX, _collision_key, _TopicNameCollisions,
    )
    rng = random.Random(7)
    existing = {"".join(rng.choice("ab._") for _ in range(rng.randint(1, 14))) for _ in range(3000)}
    existing = {n for n in existing if n not in {"", ".", ".."}}
    # Names past the lookup limit too: those scan.
    existing |= {"x" + "._" * 6, "y" + "." * (MAX + 2)}
    by_key: dict[str, set[str]] = {}
    for n in existing:
        by_key.setdefault(_collision_key(n), set()).add(n)
    asked = [*("".join(rng.choice("ab._") for _ in range(rng.randint(1, 14))) for _ in range(3000)),
             "x" + "_." * 6, "y" + "_" * (MAX + 2), "y" + "_" * (MAX + 1)]
    for name in asked:
        if name in existing:
            continue
        found = _TopicNameCollisions(dict.fromkeys(existing)).find(name)
        expected = by_key.get(_collision_key(name), set())
        assert (found in expected) if expected else found is None, (name, found, expected)
    # A topic created earlier in the same request counts.
    h = cluster()
    request = CT(topics=[CT.CreatableTopic(name="p.q", num_partitions=1, replication_factor=1),
                         CT.CreatableTopic(name="p_q", num_partitions=1, replication_factor=1)])
    response = h.commit(h.controller.handle_create_topics(request, h.now_ms))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("p.q", 0), ("p_q", ErrorCode.INVALID_TOPIC_EXCEPTION)]
