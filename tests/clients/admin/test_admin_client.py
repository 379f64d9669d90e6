"""Ketch's admin client against a real 3+3 cluster, checked by other clients' eyes.

Every operation round-trips, and what it reports agrees with kafka-python's
KafkaAdminClient or confluent-kafka's AdminClient asking the same cluster. Bad input
raises the typed KafkaApiError with a message naming the topic, group, key or partition.
"""
from __future__ import annotations

import asyncio
import signal
import time
import uuid

import pytest

from clients.admin import (
    Admin, AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigSource, NewPartitions,
    NewTopic, OffsetReset, OffsetSpec,
)
from clients.aio import Admin as AsyncAdmin
from clients.errors import (
    ConfigError, GroupIdNotFoundError, InvalidConfigError, InvalidPartitionsError,
    InvalidReplicationFactorError, KafkaApiError, KafkaTimeoutError, NonEmptyGroupError,
    OffsetOutOfRangeError, TopicAlreadyExistsError, UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from clients.protocol import ApiKey, messages
from clients.types import OffsetAndMetadata, TopicPartition
from clients.waiting import RETRY_ON
from integration_helpers import alive_broker_ports, partition_states, roundtrip, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def admin(cluster):
    a = Admin({"bootstrap.servers": cluster.spec.bootstrap_servers, "client.id": "ketch-admin-it"})
    try:
        yield a
    finally:
        a.close()


@pytest.fixture(scope="module")
def kp_admin(cluster):
    from kafka.admin import KafkaAdminClient
    a = KafkaAdminClient(bootstrap_servers=cluster.spec.bootstrap_servers, request_timeout_ms=30000)
    try:
        yield a
    finally:
        a.close()


@pytest.fixture(scope="module")
def ck_admin(cluster):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": cluster.spec.bootstrap_servers})


def _described(cluster, admin, topic: str, partitions: int):
    """The topic once every live broker's metadata image has caught up with the controller's
    decision, so that any client, whichever broker it asks, sees the same (metadata reaches
    brokers asynchronously, in Kafka as in Ketch): until then a broker may answer
    UNKNOWN_TOPIC_OR_PARTITION, which here means "not yet"."""
    def every_broker_has_it() -> bool:
        images = [partition_states(cluster, topic, port) for port in alive_broker_ports(cluster)]
        return all(len(i) == partitions and all(p.leader >= 0 for p in i.values())
                   for i in images)

    wait_until(every_broker_has_it, 30, f"every broker's image of {topic} with {partitions} "
               "partitions")
    return wait_until(lambda: (lambda d: len(d.partitions) == partitions and
                               all(p.leader >= 0 for p in d.partitions) and d)(
        admin.describe_topics([topic])[topic]), 30, f"{topic} with {partitions} partitions",
        retry_on=RETRY_ON + (UnknownTopicOrPartitionError,))


def _configs(admin, resource, predicate, **kwargs):
    """The resource's configs once ``predicate`` holds for them (config changes reach
    brokers asynchronously)."""
    return wait_until(lambda: (lambda c: predicate(c) and c)(
        admin.describe_configs([resource], **kwargs)[resource]), 30, f"configs of {resource}")


def _produce(cluster, topic: str, per_partition: int, partitions: int,
             timestamps: dict[int, list[int]] | None = None) -> None:
    """``per_partition`` records into each partition, acks=all (confluent-kafka)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "acks": "all",
                  "linger.ms": 5})
    errors: list[str] = []
    for part in range(partitions):
        for i in range(per_partition):
            kwargs = {}
            if timestamps is not None:
                kwargs["timestamp"] = timestamps[part][i]
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part,
                      on_delivery=lambda err, msg: err and errors.append(str(err)), **kwargs)
    assert p.flush(60) == 0 and not errors, errors[:3]


def test_unknown_config_key_is_refused_naming_it(cluster) -> None:
    with pytest.raises(ConfigError, match="linger.ms"):
        Admin({"bootstrap.servers": cluster.spec.bootstrap_servers, "linger.ms": 5})
    with pytest.raises(ConfigError, match="request.timeout.ms"):
        Admin({"bootstrap.servers": cluster.spec.bootstrap_servers, "request.timeout.ms": "soon"})


# ------------------------------------------------------------------ topics


def test_created_topic_is_described_alike_by_ketch_confluent_and_kafka_python(
        cluster, admin, ck_admin, kp_admin) -> None:
    from confluent_kafka import TopicCollection
    topic = _name("adm-topic")
    created = admin.create_topics([NewTopic(topic, 4, 3, configs={"retention.ms": "3600000"})])
    assert created[topic].num_partitions == 4 and created[topic].replication_factor == 3
    assert created[topic].configs["retention.ms"] == "3600000"
    assert created[topic].topic_id.int != 0

    desc = _described(cluster, admin, topic, 4)
    assert desc.topic_id == created[topic].topic_id and not desc.is_internal
    assert [p.partition for p in desc.partitions] == [0, 1, 2, 3]
    for p in desc.partitions:
        assert len(p.replicas) == 3 and p.leader in p.replicas and set(p.isr) <= set(p.replicas)
        assert p.leader_epoch >= 0 and p.offline_replicas == ()

    theirs = ck_admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    msb, lsb = (theirs.topic_id.get_most_significant_bits() % 2**64,
                theirs.topic_id.get_least_significant_bits() % 2**64)
    assert uuid.UUID(int=msb << 64 | lsb) == desc.topic_id
    assert {p.id: (p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr])
            for p in theirs.partitions} == {
        p.partition: (p.leader, list(p.replicas), list(p.isr)) for p in desc.partitions}

    (kp,) = kp_admin.describe_topics([topic])
    assert kp["topic_id"] == str(desc.topic_id)
    assert {p["partition_index"]: (p["leader_id"], p["leader_epoch"], p["replica_nodes"], p["isr_nodes"])
            for p in kp["partitions"]} == {
        p.partition: (p.leader, p.leader_epoch, list(p.replicas), list(p.isr)) for p in desc.partitions}

    listed = admin.list_topics()
    assert topic in listed and listed[topic].topic_id == desc.topic_id
    assert set(listed) == set(kp_admin.list_topics()) - {"__consumer_offsets"}
    assert "__consumer_offsets" not in listed or listed["__consumer_offsets"].is_internal
    internal = admin.list_topics(include_internal=True)
    assert set(internal) >= set(listed)
    assert all(t.is_internal == t.name.startswith("__") for t in internal.values())


def test_explicit_assignments_and_validate_only(cluster, admin) -> None:
    brokers = [b.node_id for b in admin.describe_cluster().brokers]
    topic = _name("adm-assign")
    placement = {0: [brokers[2], brokers[0]], 1: [brokers[1], brokers[2]]}
    admin.create_topics([NewTopic(topic, replica_assignments=placement)])
    desc = _described(cluster, admin, topic, 2)
    assert {p.partition: list(p.replicas) for p in desc.partitions} == placement

    dry = _name("adm-dry")
    result = admin.create_topics([NewTopic(dry, 2, 3)], validate_only=True)
    assert result[dry].num_partitions == 2
    assert dry not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError, match=dry):
        admin.describe_topics([dry])


def test_bad_topic_creations_name_the_topic_and_keep_the_good_ones(admin) -> None:
    existing, good, bad_rf = _name("adm-exists"), _name("adm-good"), _name("adm-rf")
    admin.create_topics([NewTopic(existing, 1, 1)])
    with pytest.raises(TopicAlreadyExistsError, match=existing) as info:
        admin.create_topics([NewTopic(existing, 1, 1), NewTopic(good, 1, 1)])
    assert info.value.results[good].name == good                    # the other one was created
    assert good in admin.list_topics()
    with pytest.raises(InvalidReplicationFactorError, match=bad_rf):
        admin.create_topics([NewTopic(bad_rf, 1, 7)])
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        admin.create_topics([NewTopic(_name("adm-cfg"), 1, 1, configs={"retention.ms": "soon"})])


def test_create_partitions_grows_a_topic_and_never_shrinks_it(cluster, admin, ck_admin) -> None:
    from confluent_kafka import TopicCollection
    topic = _name("adm-grow")
    admin.create_topics([NewTopic(topic, 2, 3)])
    admin.create_partitions({topic: NewPartitions(3)}, validate_only=True)
    admin.create_partitions({topic: NewPartitions(5)})
    desc = _described(cluster, admin, topic, 5)
    theirs = ck_admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    assert {p.id: [r.id for r in p.replicas] for p in theirs.partitions} == {
        p.partition: list(p.replicas) for p in desc.partitions}
    with pytest.raises(InvalidPartitionsError, match=topic):
        admin.create_partitions({topic: NewPartitions(3)})
    with pytest.raises(UnknownTopicOrPartitionError, match="adm-never"):
        admin.create_partitions({"adm-never": NewPartitions(3)})


def test_deleted_topic_is_gone_for_every_client(admin, ck_admin) -> None:
    topic = _name("adm-delete")
    admin.create_topics([NewTopic(topic, 1, 3)])
    admin.delete_topics([topic])
    wait_until(lambda: topic not in admin.list_topics(), 30, f"{topic} gone from Ketch's listing")
    wait_until(lambda: topic not in ck_admin.list_topics(timeout=10).topics, 30,
               f"{topic} gone from librdkafka's metadata")
    with pytest.raises(UnknownTopicOrPartitionError, match=topic):
        admin.delete_topics([topic])


# ------------------------------------------------------------------ configs


def test_topic_configs_agree_with_confluent_and_alter_incrementally(cluster, admin, ck_admin) -> None:
    from confluent_kafka.admin import ConfigResource as CkResource
    topic = _name("adm-cfg")
    admin.create_topics([NewTopic(topic, 1, 3, configs={"retention.ms": "7200000"})])
    _described(cluster, admin, topic, 1)
    resource = ConfigResource.topic(topic)
    ours = admin.describe_configs([resource], include_synonyms=True)[resource]
    theirs = ck_admin.describe_configs([CkResource("topic", topic)])[CkResource("topic", topic)].result(30)
    assert {k: e.value for k, e in ours.items()} == {k: e.value for k, e in theirs.items()}
    assert ours["retention.ms"].value == "7200000"
    assert ours["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not ours["retention.ms"].is_default
    assert ours["segment.bytes"].is_default or ours["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG
    for name, entry in ours.items():
        assert entry.source == ConfigSource(int(theirs[name].source)), name
        assert (entry.read_only, entry.sensitive) == (theirs[name].is_read_only, theirs[name].is_sensitive)
    assert ours["retention.ms"].synonyms[0].name == "retention.ms"   # the topic's own value first

    admin.incremental_alter_configs({resource: [
        AlterConfigOp("retention.ms", None, AlterConfigOpType.DELETE),
        AlterConfigOp("cleanup.policy", "compact", AlterConfigOpType.APPEND),
        AlterConfigOp("max.message.bytes", "200000"),
    ]})
    after = _configs(admin, resource, lambda c: c["max.message.bytes"].value == "200000")
    assert after["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG   # back to a default
    assert set(after["cleanup.policy"].value.split(",")) == {"delete", "compact"}
    assert after["max.message.bytes"].value == "200000"
    admin.incremental_alter_configs({resource: [
        AlterConfigOp("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)]})
    _configs(admin, resource, lambda c: c["cleanup.policy"].value == "compact")

    admin.incremental_alter_configs({resource: [AlterConfigOp("max.message.bytes", "100")]},
                                    validate_only=True)
    assert admin.describe_configs([resource])[resource]["max.message.bytes"].value == "200000"
    theirs = ck_admin.describe_configs([CkResource("topic", topic)])[CkResource("topic", topic)].result(30)
    assert theirs["max.message.bytes"].value == "200000"


def test_bad_config_changes_name_the_key_or_topic(admin) -> None:
    topic = _name("adm-badcfg")
    admin.create_topics([NewTopic(topic, 1, 1)])
    resource = ConfigResource.topic(topic)
    with pytest.raises(InvalidConfigError, match="no.such.key"):
        admin.incremental_alter_configs({resource: [AlterConfigOp("no.such.key", "1")]})
    with pytest.raises(InvalidConfigError, match="min.insync.replicas"):
        admin.incremental_alter_configs({resource: [AlterConfigOp("min.insync.replicas", "-3")]})
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        admin.incremental_alter_configs({resource: [
            AlterConfigOp("retention.ms", "1", AlterConfigOpType.APPEND)]})
    missing = ConfigResource.topic("adm-nowhere")
    with pytest.raises(UnknownTopicOrPartitionError, match="adm-nowhere"):
        admin.describe_configs([missing])
    with pytest.raises(UnknownTopicOrPartitionError, match="adm-nowhere"):
        admin.incremental_alter_configs({missing: [AlterConfigOp("retention.ms", "1")]})


def test_broker_and_cluster_default_configs(admin, ck_admin) -> None:
    from confluent_kafka.admin import ConfigResource as CkResource
    broker_id = admin.describe_cluster().brokers[0].node_id
    broker = ConfigResource.broker(broker_id)
    ours = admin.describe_configs([broker], include_synonyms=True, include_documentation=True)[broker]
    theirs = ck_admin.describe_configs([CkResource("broker", str(broker_id))])[
        CkResource("broker", str(broker_id))].result(30)
    assert {k: e.value for k, e in ours.items()} == {k: e.value for k, e in theirs.items()}
    assert ours["node.id"].value == str(broker_id) and ours["node.id"].read_only
    # Documentation and types as the broker itself answers DescribeConfigs v4.
    D = messages.DescribeConfigsRequest
    port = next(b.port for b in admin.describe_cluster().brokers if b.node_id == broker_id)
    raw = roundtrip(port, ApiKey.DESCRIBE_CONFIGS, 4, D(
        include_synonyms=True, include_documentation=True, resources=[D.DescribeConfigsResource(
            resource_type=4, resource_name=str(broker_id), configuration_keys=None)]))
    assert {c.name: (c.documentation, c.config_type, len(c.synonyms)) for c in raw.results[0].configs} \
        == {k: (e.documentation, int(e.type), len(e.synonyms)) for k, e in ours.items()}
    assert ours["log.retention.ms"].documentation and ours["log.retention.ms"].type.name == "LONG"
    plain = admin.describe_configs([broker])[broker]
    assert plain["log.retention.ms"].documentation is None and plain["log.retention.ms"].synonyms == ()

    # One broker's own dynamic value: that broker reports it as DYNAMIC_BROKER_CONFIG.
    admin.incremental_alter_configs({broker: [AlterConfigOp("log.retention.ms", "43200000")]})
    try:
        entry = _configs(admin, broker, lambda c: c["log.retention.ms"].value == "43200000")["log.retention.ms"]
        assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG
        theirs = ck_admin.describe_configs([CkResource("broker", str(broker_id))])[
            CkResource("broker", str(broker_id))].result(30)
        assert theirs["log.retention.ms"].value == "43200000"
    finally:
        admin.incremental_alter_configs({broker: [
            AlterConfigOp("log.retention.ms", None, AlterConfigOpType.DELETE)]})
    with pytest.raises(KafkaApiError, match="broker 'one'"):
        admin.describe_configs([ConfigResource.broker("one")])

    default = ConfigResource.broker()                  # the cluster-wide default
    admin.incremental_alter_configs({default: [AlterConfigOp("log.retention.ms", "86400000")]})
    try:
        def applied() -> bool:
            entry = admin.describe_configs([broker], include_synonyms=True)[broker]["log.retention.ms"]
            return entry.value == "86400000" and \
                entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        wait_until(applied, 30, "the cluster default on the broker")
        described = admin.describe_configs([default])[default]
        assert described["log.retention.ms"].value == "86400000"
        assert described["log.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    finally:
        admin.incremental_alter_configs({default: [
            AlterConfigOp("log.retention.ms", None, AlterConfigOpType.DELETE)]})


def test_legacy_alter_configs_replaces_every_dynamic_value(cluster, admin, kp_admin) -> None:
    topic = _name("adm-legacy")
    admin.create_topics([NewTopic(topic, 1, 1, configs={"retention.ms": "7200000",
                                                         "max.message.bytes": "300000"})])
    resource = ConfigResource.topic(topic)
    _described(cluster, admin, topic, 1)
    admin.alter_configs({resource: {"segment.ms": "3600000"}})
    after = _configs(admin, resource, lambda c: c["segment.ms"].value == "3600000")
    dynamic = {k for k, e in after.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG}
    assert dynamic == {"segment.ms"}                       # the others went back to defaults
    assert after["segment.ms"].value == "3600000"
    from kafka.admin import ConfigResource as KpResource, ConfigResourceType as KpType
    kp = kp_admin.describe_configs([KpResource(KpType.TOPIC, topic)], config_filter="all")["topic"][topic]
    assert {k: v["value"] for k, v in kp.items()} == {k: e.value for k, e in after.items()}
    assert {k for k, v in kp.items() if v["config_source"] == "DYNAMIC_TOPIC_CONFIG"} == {"segment.ms"}


# ------------------------------------------------------------------ cluster and quorum


def test_describe_cluster_agrees_with_confluent(cluster, admin, ck_admin) -> None:
    ours = admin.describe_cluster()
    theirs = ck_admin.describe_cluster().result(30)
    assert ours.cluster_id == theirs.cluster_id == cluster.spec.cluster_id
    # KRaft brokers name themselves as the controller (KIP-590: they forward admin
    # requests), so each client sees the broker it asked; both are live brokers.
    assert {ours.controller_id, theirs.controller.id} <= {b.node_id for b in ours.brokers}
    assert [(b.node_id, b.host, b.port, b.rack) for b in ours.brokers] == sorted(
        (n.id, n.host, n.port, n.rack) for n in theirs.nodes)
    assert {(b.node_id, b.port) for b in ours.brokers} == {(b.id, b.port) for b in cluster.spec.brokers}


def test_describe_quorum_through_a_broker_matches_the_controllers(cluster, admin, kp_admin) -> None:
    info = admin.describe_quorum()
    controllers = {c.id: c.port for c in cluster.spec.controllers}
    assert info.leader_id in controllers and info.leader_epoch >= 1
    assert [v.replica_id for v in info.voters] == sorted(controllers)
    assert info.nodes == {i: ("127.0.0.1", port) for i, port in controllers.items()}
    leader = next(v for v in info.voters if v.replica_id == info.leader_id)
    assert leader.log_end_offset >= info.high_watermark > 0 and leader.lag == 0
    for v in info.voters:
        # Followers' positions may be unknown (-1): then there is no lag to report.
        assert (v.lag is None) == (v.log_end_offset < 0)

    # The active controller's own answer, asked directly on its listener.
    D = messages.DescribeQuorumRequest
    direct = roundtrip(controllers[info.leader_id], ApiKey.DESCRIBE_QUORUM, 1, D(topics=[D.TopicData(
        topic_name="__cluster_metadata", partitions=[D.PartitionData(partition_index=0)])]))
    p = direct.topics[0].partitions[0]
    assert (p.leader_id, p.leader_epoch) == (info.leader_id, info.leader_epoch)
    assert p.high_watermark >= info.high_watermark

    theirs = kp_admin.describe_metadata_quorum()
    part = theirs["topics"][0]["partitions"][0]
    assert (part["leader_id"], part["leader_epoch"]) == (info.leader_id, info.leader_epoch)
    assert sorted(v["replica_id"] for v in part["current_voters"]) == sorted(controllers)

    # The high watermark moves with metadata writes.
    admin.create_topics([NewTopic(_name("adm-quorum"), 1, 1)])
    assert admin.describe_quorum().high_watermark > info.high_watermark


def test_the_asyncio_admin_does_the_same(cluster) -> None:
    async def go() -> None:
        async with AsyncAdmin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as a:
            topic = _name("adm-aio")
            await a.create_topics([NewTopic(topic, 2, 3)])
            desc = (await a.describe_topics([topic]))[topic]
            assert len(desc.partitions) == 2
            tps = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(2)}
            assert {tp: r.offset for tp, r in (await a.list_offsets(tps)).items()} == dict.fromkeys(tps, 0)
            assert (await a.describe_cluster()).cluster_id == cluster.spec.cluster_id
            await a.delete_topics([topic])
    asyncio.run(go())


# ------------------------------------------------------------------ offsets and records


def test_list_offsets_and_delete_records_agree_with_confluent(cluster, admin, ck_admin) -> None:
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import OffsetSpec as CkSpec
    topic = _name("adm-offsets")
    admin.create_topics([NewTopic(topic, 2, 3)])
    base = 1_700_000_000_000
    stamps = {p: [base + 1000 * i + p for i in range(10)] for p in range(2)}
    stamps[1][4] = base + 999_999                      # the largest timestamp sits at offset 4
    _produce(cluster, topic, 10, 2, stamps)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max": OffsetSpec.max_timestamp(), "time": OffsetSpec.for_timestamp(base + 3500)}
    ck_specs = {"earliest": CkSpec.earliest(), "latest": CkSpec.latest(),
                "max": CkSpec.max_timestamp(), "time": CkSpec.for_timestamp(base + 3500)}
    for key, spec in specs.items():
        ours = admin.list_offsets({t0: spec, t1: spec})
        futures = ck_admin.list_offsets({CkTP(topic, 0): ck_specs[key], CkTP(topic, 1): ck_specs[key]})
        theirs = {tp.partition: f.result(30) for tp, f in futures.items()}
        for tp in (t0, t1):
            assert ours[tp].offset == theirs[tp.partition].offset, (key, tp)
            if key in ("max", "time"):
                assert ours[tp].timestamp == theirs[tp.partition].timestamp, (key, tp)
    assert admin.list_offsets({t0: OffsetSpec.latest()})[t0].offset == 10
    assert admin.list_offsets({t1: OffsetSpec.max_timestamp()})[t1].offset == 4
    assert admin.list_offsets({t0: OffsetSpec.for_timestamp(base + 3500)})[t0].offset == 4
    assert admin.list_offsets({t0: OffsetSpec.for_timestamp(base + 10**9)})[t0].offset == -1

    assert admin.delete_records({t0: 6, t1: -1}) == {t0: 6, t1: 10}     # -1: the high watermark
    assert admin.list_offsets({t0: OffsetSpec.earliest()})[t0].offset == 6
    theirs = ck_admin.list_offsets({CkTP(topic, 0): CkSpec.earliest()})[CkTP(topic, 0)].result(30)
    assert theirs.offset == 6
    with pytest.raises(OffsetOutOfRangeError, match=f"{topic}-0"):
        admin.delete_records({t0: 50})
    with pytest.raises(UnknownTopicOrPartitionError, match="adm-absent"):
        admin.list_offsets({TopicPartition("adm-absent", 0): OffsetSpec.latest()})
    with pytest.raises(UnknownTopicOrPartitionError, match=topic):
        admin.list_offsets({TopicPartition(topic, 9): OffsetSpec.latest()})


# ------------------------------------------------------------------ consumer groups


def _member(cluster, group: str, topic: str):
    """A confluent-kafka group member (range assignor) polled until it owns partitions."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": group,
                  "client.id": f"{group}-member", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 300, "partition.assignment.strategy": "range"})
    c.subscribe([topic])
    deadline = time.monotonic() + 60
    while not c.assignment():
        assert time.monotonic() < deadline, "the member never got an assignment"
        c.poll(0.2)
    return c


def test_consumer_group_lifecycle_agrees_with_kafka_python(cluster, admin, kp_admin) -> None:
    from kafka import TopicPartition as KpTP
    topic, group = _name("adm-grp"), _name("adm-group")
    admin.create_topics([NewTopic(topic, 3, 3)])
    _produce(cluster, topic, 10, 3)
    tps = [TopicPartition(topic, p) for p in range(3)]
    member = _member(cluster, group, topic)
    try:
        member.commit(offsets=[__import__("confluent_kafka").TopicPartition(topic, p, 2 + p)
                               for p in range(3)], asynchronous=False)
        wait_until(lambda: admin.describe_consumer_groups([group])[group].state == "Stable", 30,
                   f"{group} Stable")
        desc = admin.describe_consumer_groups([group])[group]
        assert desc.protocol_type == "consumer" and desc.protocol == "range"
        (m,) = desc.members
        assert m.client_id == f"{group}-member" and m.subscription == (topic,)
        assert set(m.assignment) == {TopicPartition(tp.topic, tp.partition) for tp in member.assignment()}
        assert desc.coordinator in {b.id for b in cluster.spec.brokers}
        kp = kp_admin.describe_groups([group])[group]
        assert (kp["group_state"], kp["protocol_type"], kp["protocol_data"]) == (
            desc.state, desc.protocol_type, desc.protocol)
        (kp_member,) = kp["members"]
        assert kp_member["member_id"] == m.member_id and kp_member["client_host"] == m.host
        assert sorted(TopicPartition(a["topic"], p) for a in
                      kp_member["member_assignment"]["assigned_partitions"] for p in a["partitions"]) \
            == list(m.assignment)
        assert [(g["group_id"], g["group_state"]) for g in kp_admin.list_groups()
                if g["group_id"] == group] == [(group, "Stable")]

        listed = {g.group_id: g for g in admin.list_consumer_groups()}
        assert listed[group].state == "Stable" and listed[group].protocol_type == "consumer"
        assert [g.group_id for g in admin.list_consumer_groups(states=["Stable"])].count(group) == 1
        assert group not in {g.group_id for g in admin.list_consumer_groups(states=["Empty"])}

        # A live member: the group's offsets stay where its member put them.
        with pytest.raises(NonEmptyGroupError, match=group):
            admin.reset_consumer_group_offsets(group, OffsetReset.to_earliest())
        with pytest.raises(UnknownMemberIdError, match=group):
            admin.alter_consumer_group_offsets(group, {tps[0]: 0})
        with pytest.raises(NonEmptyGroupError, match=group):
            admin.delete_consumer_groups([group])
    finally:
        member.close()
    wait_until(lambda: admin.describe_consumer_groups([group])[group].state == "Empty", 30,
               f"{group} Empty")

    committed = admin.list_consumer_group_offsets(group)
    assert committed == {tps[p]: OffsetAndMetadata(2 + p, "", committed[tps[p]].leader_epoch)
                         for p in range(3)}
    kp_offsets = kp_admin.list_group_offsets({group: None})[group]
    assert {TopicPartition(tp.topic, tp.partition): o.offset for tp, o in kp_offsets.items()} == {
        tp: o.offset for tp, o in committed.items()}

    lag = admin.consumer_group_lag(group)
    assert {tp: (l.committed, l.log_end_offset, l.lag) for tp, l in lag.items()} == {
        tps[p]: (2 + p, 10, 8 - p) for p in range(3)}

    # Resets: each moves the committed offsets where kafka-consumer-groups would.
    plan = admin.reset_consumer_group_offsets(group, OffsetReset.to_latest(), dry_run=True)
    assert plan == dict.fromkeys(tps, 10)
    assert {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()} == {
        tps[p]: 2 + p for p in range(3)}                           # a dry run changes nothing
    assert admin.reset_consumer_group_offsets(group, OffsetReset.shift_by(-3)) == {
        tps[0]: 0, tps[1]: 0, tps[2]: 1}
    assert admin.reset_consumer_group_offsets(group, OffsetReset.to_offset(7),
                                              partitions=[tps[1]]) == {tps[1]: 7}
    assert admin.reset_consumer_group_offsets(group, OffsetReset.to_latest(), topics=[topic]) == \
        dict.fromkeys(tps, 10)
    admin.delete_records({tps[2]: 4})
    assert admin.reset_consumer_group_offsets(group, OffsetReset.to_earliest()) == {
        tps[0]: 0, tps[1]: 0, tps[2]: 4}
    assert admin.reset_consumer_group_offsets(group, OffsetReset.to_timestamp(4 * 10**12)) == \
        dict.fromkeys(tps, 10)                                  # nothing that recent: the end
    assert admin.reset_consumer_group_offsets(group, OffsetReset.to_timestamp(0)) == {
        tps[0]: 0, tps[1]: 0, tps[2]: 4}                        # all newer: the first record
    admin.reset_consumer_group_offsets(group, OffsetReset.to_latest())
    kp_offsets = kp_admin.list_group_offsets({group: None})[group]
    assert {tp.partition: o.offset for tp, o in kp_offsets.items()} == {0: 10, 1: 10, 2: 10}

    admin.alter_consumer_group_offsets(group, {tps[0]: OffsetAndMetadata(5, "by admin")})
    assert admin.list_consumer_group_offsets(group, [tps[0]]) == {
        tps[0]: OffsetAndMetadata(5, "by admin", -1)}
    admin.delete_consumer_group_offsets(group, [tps[0]])
    assert set(admin.list_consumer_group_offsets(group)) == {tps[1], tps[2]}
    assert KpTP(topic, 0) not in kp_admin.list_group_offsets({group: None})[group]

    admin.delete_consumer_groups([group])
    with pytest.raises(GroupIdNotFoundError, match=group):
        admin.describe_consumer_groups([group])
    assert group not in {g.group_id for g in admin.list_consumer_groups()}
    assert admin.list_consumer_group_offsets(group) == {}
    with pytest.raises(GroupIdNotFoundError, match=group):
        admin.delete_consumer_groups([group])


def test_shift_without_committed_offsets_is_refused_naming_the_partition(admin) -> None:
    topic, group = _name("adm-shift"), _name("adm-nogroup")
    admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(ValueError, match=f"{topic}-0"):
        admin.reset_consumer_group_offsets(group, OffsetReset.shift_by(1), topics=[topic])
    with pytest.raises(UnknownTopicOrPartitionError, match="adm-unknown-topic"):
        admin.reset_consumer_group_offsets(group, OffsetReset.to_earliest(),
                                           topics=["adm-unknown-topic"])


# ------------------------------------------------------------------ deadlines (last: it pauses a broker)


def test_a_call_past_its_deadline_names_what_was_unanswered(cluster, admin) -> None:
    """A paused (SIGSTOP) coordinator answers nothing: the call ends at its own deadline
    with KafkaTimeoutError naming the group, and works again once the broker resumes."""
    topic, group = _name("adm-late"), _name("adm-late-group")
    admin.create_topics([NewTopic(topic, 1, 3)])
    admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 0})
    coordinator = admin.describe_consumer_groups([group])[group].coordinator
    cluster.signal_node(coordinator, signal.SIGSTOP)
    try:
        with pytest.raises(KafkaTimeoutError, match=group):
            admin.describe_consumer_groups([group], timeout_ms=1500)
    finally:
        cluster.signal_node(coordinator, signal.SIGCONT)
    wait_until(lambda: admin.describe_consumer_groups([group], timeout_ms=5000)[group].state == "Empty",
               60, f"{group} answered again")
