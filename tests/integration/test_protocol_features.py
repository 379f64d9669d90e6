"""Protocol features of issue 20 against a real broker, on the wire and through real clients:
incremental fetch sessions (KIP-227; kafka-python opens sessions by default), the
authorized operations of Metadata, DescribeCluster and DescribeGroups (KIP-430), and
finalized features moved by UpdateFeatures (KIP-584, KIP-778).

One broker, so that it leads every partition: each fetch below goes to the leader."""
from __future__ import annotations

import dataclasses
import uuid

import pytest

from clients.admin import NewTopic
from clients.protocol import ApiKey, _schemas, messages
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch
from integration_helpers import STOP_TIMEOUT_S, admin_for, roundtrip, start_cluster, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

TOPIC = "sessions"
PARTITIONS = 20
F = messages.FetchRequest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "ketch-sessions", controllers=1, brokers=1)
    try:
        admin_for(c).create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        wait_until(lambda: len(_full_fetch(c).responses[0].partitions) == PARTITIONS and
                   all(p.error_code == 0 for p in _full_fetch(c).responses[0].partitions),
                   60, "every partition led")
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def _port(cluster) -> int:
    return cluster.spec.brokers[0].port


def _fetch(cluster, session_id: int, epoch: int, partitions: dict[int, int],
           forget: list[int] = (), max_wait_ms: int = 0) -> messages.FetchResponse:
    req = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
            isolation_level=0, session_id=session_id, session_epoch=epoch,
            topics=[F.FetchTopic(topic=TOPIC, partitions=[
                F.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 16)
                for p, o in partitions.items()])] if partitions else [],
            forgotten_topics_data=[F.ForgottenTopic(topic=TOPIC, partitions=list(forget))]
            if forget else [])
    return roundtrip(_port(cluster), ApiKey.FETCH, 12, req)


def _full_fetch(cluster) -> messages.FetchResponse:
    return _fetch(cluster, 0, -1, {p: 0 for p in range(PARTITIONS)})


def _produce(cluster, partition: int, values: list[bytes]) -> None:
    P = messages.ProduceRequest
    batch = build_batch([Record(i, 0, None, v) for i, v in enumerate(values)])
    resp = roundtrip(_port(cluster), ApiKey.PRODUCE, 9, P(acks=-1, timeout_ms=10_000, topic_data=[
        P.TopicProduceData(name=TOPIC, partition_data=[P.PartitionProduceData(index=partition, records=batch)])]))
    assert resp.responses[0].partition_responses[0].error_code == 0


def _answered(resp: messages.FetchResponse) -> dict[int, messages.FetchResponse.PartitionData]:
    return {p.partition_index: p for t in resp.responses for p in t.partitions}


def test_an_idle_session_answers_nothing_and_then_only_what_changed(cluster) -> None:
    full = _fetch(cluster, 0, 0, {p: 0 for p in range(PARTITIONS)})
    sid = full.session_id
    assert full.error_code == 0 and sid > 0 and len(_answered(full)) == PARTITIONS
    hw = {p: d.high_watermark for p, d in _answered(full).items()}
    idle = _fetch(cluster, sid, 1, {})
    assert (idle.error_code, idle.session_id, _answered(idle)) == (0, sid, {})
    _produce(cluster, 7, [b"a", b"b"])
    busy = _fetch(cluster, sid, 2, {})
    assert list(_answered(busy)) == [7]
    assert _answered(busy)[7].high_watermark == hw[7] + 2
    # The fetcher moves on past what it read and forgets a partition.
    after = _fetch(cluster, sid, 3, {7: hw[7] + 2}, forget=[3])
    assert _answered(after) == {}
    # Bad epochs and ids are refused as Kafka does, and change nothing.
    assert _fetch(cluster, sid, 3, {}).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert _fetch(cluster, sid + 1, 1, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert _fetch(cluster, sid, 4, {}).error_code == 0
    # Closing it: a sessionless full fetch again.
    closed = _fetch(cluster, sid, -1, {0: 0})
    assert closed.session_id == 0 and list(_answered(closed)) == [0]
    assert _fetch(cluster, sid, 5, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_kafka_python_reads_everything_once_through_incremental_sessions(cluster) -> None:
    from kafka import KafkaConsumer, TopicPartition as KTP

    topic_base = {p: d.high_watermark for p, d in _answered(_full_fetch(cluster)).items()}
    consumer = KafkaConsumer(bootstrap_servers=cluster.spec.bootstrap_servers,
                             enable_incremental_fetch_sessions=True, fetch_max_wait_ms=50,
                             consumer_timeout_ms=200)
    try:
        tps = [KTP(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, topic_base[tp.partition])
        seen: list[tuple[int, bytes]] = []
        sent: list[tuple[int, bytes]] = []
        for round_ in range(5):             # bursts on a few partitions, idle ones between
            for p in (round_ * 3 % PARTITIONS, (round_ * 3 + 1) % PARTITIONS):
                values = [b"r%d-p%d-%d" % (round_, p, i) for i in range(3)]
                _produce(cluster, p, values)
                sent += [(p, v) for v in values]
            wait_until(lambda: seen.extend((m.partition, m.value) for m in consumer) or
                       len(seen) >= len(sent), 30, f"round {round_} read")
        assert sorted(seen) == sorted(sent)
        # It read through a session of ours, well past its first (full) fetch. (kafka-python
        # exposes its session state only on its fetcher's handlers.)
        handlers = consumer._fetcher._session_handlers.values()
        assert any(h.next_metadata.session_id > 0 and h.next_metadata.epoch > 5 for h in handlers), \
            [(h.next_metadata.session_id, h.next_metadata.epoch) for h in handlers]
    finally:
        consumer.close()


def test_authorized_operations_are_every_supported_one_without_an_authorizer(cluster) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation as Op, AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.spec.bootstrap_servers})
    cluster_ops = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster_ops.authorized_operations) == {
        Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
        Op.ALTER, Op.DESCRIBE}
    (topic,) = admin.describe_topics(TopicCollection([TOPIC]),
                                     include_authorized_operations=True).values()
    assert set(topic.result(30).authorized_operations) == {
        Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS}
    # Not asked: none are reported.
    assert admin.describe_cluster().result(30).authorized_operations is None
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers,
                         "group.id": "ops-group", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([TOPIC])
        wait_until(lambda: consumer.poll(0.2) is not None or consumer.assignment(), 60,
                   "the consumer's assignment")
        (group,) = admin.describe_consumer_groups(["ops-group"],
                                                  include_authorized_operations=True).values()
        assert set(group.result(30).authorized_operations) == {
            Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
    finally:
        consumer.close()


def test_describe_producers_shows_an_idempotent_producer_and_refuses_unknown_partitions(cluster) -> None:
    port = _port(cluster)
    init = roundtrip(port, ApiKey.INIT_PRODUCER_ID, 4, messages.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0
    P = messages.ProduceRequest
    batch = build_batch([Record(i, 1_700_000_000_000 + i, None, b"x") for i in range(4)],
                        producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                        base_sequence=0)
    resp = roundtrip(port, ApiKey.PRODUCE, 9, P(acks=-1, timeout_ms=10_000, topic_data=[
        P.TopicProduceData(name=TOPIC, partition_data=[P.PartitionProduceData(index=11, records=batch)])]))
    assert resp.responses[0].partition_responses[0].error_code == 0
    D = messages.DescribeProducersRequest
    out = roundtrip(port, ApiKey.DESCRIBE_PRODUCERS, 0, D(topics=[
        D.TopicRequest(name=TOPIC, partition_indexes=[11, 12, PARTITIONS]),
        D.TopicRequest(name="no-such-topic", partition_indexes=[0])]))
    (mine, idle, missing), (unknown,) = (t.partitions for t in out.topics)
    assert [(p.producer_id, p.producer_epoch, p.last_sequence) for p in mine.active_producers] == \
        [(init.producer_id, init.producer_epoch, 3)]
    assert mine.active_producers[0].last_timestamp == 1_700_000_000_003
    assert (idle.error_code, idle.active_producers) == (0, [])
    assert missing.error_code == unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_topic_partitions_pages_with_a_cursor(cluster) -> None:
    D = messages.DescribeTopicPartitionsRequest
    port = _port(cluster)

    def ask(limit: int, cursor=None, names=(TOPIC,)):
        return roundtrip(port, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, D(
            topics=[D.TopicRequest(name=n) for n in names], response_partition_limit=limit,
            cursor=cursor))

    seen, cursor, pages = [], None, 0
    while True:
        page = ask(7, cursor)
        pages += 1
        (topic,) = page.topics
        assert topic.error_code == 0 and topic.topic_authorized_operations > 0
        seen += [p.partition_index for p in topic.partitions]
        assert all(p.leader_id == 1 and p.isr_nodes == [1] for p in topic.partitions)
        if page.next_cursor is None:
            break
        cursor = D.Cursor(topic_name=page.next_cursor.topic_name,
                          partition_index=page.next_cursor.partition_index)
    assert seen == list(range(PARTITIONS)) and pages == 3
    missing = ask(100, names=("no-such-topic", TOPIC))
    assert [(t.name, t.error_code) for t in missing.topics] == [
        ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (TOPIC, 0)]
    bad = ask(100, D.Cursor(topic_name="elsewhere", partition_index=0))
    assert [t.error_code for t in bad.topics] == [ErrorCode.INVALID_REQUEST]


def test_api_versions_reports_supported_and_finalized_features(cluster) -> None:
    from metadata_log.features import METADATA_VERSION

    resp = roundtrip(_port(cluster), ApiKey.API_VERSIONS, 3, messages.ApiVersionsRequest(
        client_software_name="ketch-it", client_software_version="1"))
    assert [(f.name, f.min_version, f.max_version) for f in resp.supported_features] == \
        [("eligible.leader.replicas.version", 0, 1), ("metadata.version", 1, METADATA_VERSION)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in resp.finalized_features] == \
        [("eligible.leader.replicas.version", 1, 1),
         ("metadata.version", METADATA_VERSION, METADATA_VERSION)]
    assert resp.finalized_features_epoch > 0
    served = {k.api_key for k in resp.api_keys}
    assert {ApiKey.DESCRIBE_PRODUCERS, ApiKey.DESCRIBE_TOPIC_PARTITIONS} <= served


def test_update_features_moves_the_finalized_level_that_api_versions_reports(cluster) -> None:
    """UpdateFeatures through Ketch's admin client (forwarded by the broker to the active
    controller): a refused downgrade changes nothing, a safe one and the upgrade back are
    seen in the broker's ApiVersions with a later finalized features epoch."""
    from clients.admin import FeatureUpdate, UpgradeType
    from clients.errors import KafkaApiError
    from metadata_log.features import METADATA_VERSION

    admin = admin_for(cluster)

    def finalized_at(level: int):
        def probe():
            resp = roundtrip(_port(cluster), ApiKey.API_VERSIONS, 3, messages.ApiVersionsRequest(
                client_software_name="ketch-it", client_software_version="1"))
            levels = {f.name: f.max_version_level for f in resp.finalized_features}
            return resp if levels.get("metadata.version") == level else None
        return wait_until(probe, 15, f"ApiVersions reports metadata.version {level}")

    ELR = "eligible.leader.replicas.version"
    before = admin.describe_features()
    assert before.finalized_features == {"metadata.version": METADATA_VERSION, ELR: 1}
    with pytest.raises(KafkaApiError, match="might delete metadata information") as refused:
        admin.update_features({"metadata.version": FeatureUpdate(16, UpgradeType.SAFE_DOWNGRADE)})
    assert refused.value.error_code == ErrorCode.INVALID_UPDATE_VERSION
    admin.update_features({"metadata.version": FeatureUpdate(18, UpgradeType.SAFE_DOWNGRADE)},
                          validate_only=True)
    assert admin.describe_features().finalized_features["metadata.version"] == METADATA_VERSION
    try:
        admin.update_features({"metadata.version": FeatureUpdate(18, UpgradeType.SAFE_DOWNGRADE)})
        down = finalized_at(18)
        assert down.finalized_features_epoch > before.finalized_features_epoch
    finally:
        admin.update_features({"metadata.version": FeatureUpdate(METADATA_VERSION)})
    up = finalized_at(METADATA_VERSION)
    assert up.finalized_features_epoch > down.finalized_features_epoch
    # Eligible leader replicas (KIP-966) can be switched off and on again.
    try:
        admin.update_features({ELR: FeatureUpdate(0, UpgradeType.SAFE_DOWNGRADE)})
        wait_until(lambda: ELR not in admin.describe_features().finalized_features, 15,
                   "eligible leader replicas off")
    finally:
        admin.update_features({ELR: FeatureUpdate(1)})
    wait_until(lambda: admin.describe_features().finalized_features.get(ELR) == 1, 15,
               "eligible leader replicas on again")


def _alter_quotas(cluster, client_id: str, key: str, value: float, remove: bool = False):
    A = messages.AlterClientQuotasRequest
    return roundtrip(_port(cluster), ApiKey.ALTER_CLIENT_QUOTAS, 1, A(entries=[A.EntryData(
        entity=[A.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[A.OpData(key=key, value=value, remove=remove)])], validate_only=False))


def _described(cluster, client_id: str) -> dict[str, float]:
    D = messages.DescribeClientQuotasRequest
    resp = roundtrip(_port(cluster), ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, D(components=[
        D.ComponentData(entity_type="client-id", match_type=0, match=client_id)], strict=True))
    assert resp.error_code == 0, resp
    return {v.key: v.value for e in resp.entries for v in e.values}


def _produce_as(cluster, client_id: str, size: int) -> int:
    """One acks=1 Produce of ``size`` value bytes as ``client_id``; its throttle time."""
    from clients import connection

    P = messages.ProduceRequest
    batch = build_batch([Record(0, 0, None, b"q" * size)])
    resp = connection.roundtrip("127.0.0.1", _port(cluster), ApiKey.PRODUCE, 9, P(
        acks=1, timeout_ms=10_000, topic_data=[P.TopicProduceData(name=TOPIC, partition_data=[
            P.PartitionProduceData(index=19, records=batch)])]), client_id=client_id)
    assert resp.responses[0].partition_responses[0].error_code == 0
    return resp.throttle_time_ms


def test_a_produce_quota_throttles_its_client_id_and_no_other(cluster) -> None:
    assert _alter_quotas(cluster, "slow", "producer_byte_rate", -1).entries[0].error_code == \
        ErrorCode.INVALID_REQUEST
    assert _alter_quotas(cluster, "slow", "producer_byte_rate", 20_000).entries[0].error_code == 0
    wait_until(lambda: _described(cluster, "slow") == {"producer_byte_rate": 20_000.0}, 30,
               "the quota in the broker's image")
    # 300 KB at once is 30 KB/s over the 10 s window: 1.5x the bound, throttled ~5 s.
    throttles = [_produce_as(cluster, "slow", 100_000) for _ in range(3)]
    assert throttles[0] == 0 and throttles[-1] > 0, throttles
    assert _produce_as(cluster, "fast", 300_000) == 0
    _alter_quotas(cluster, "slow", "producer_byte_rate", 0, remove=True)
    wait_until(lambda: _described(cluster, "slow") == {}, 30, "the quota removed")
    assert _produce_as(cluster, "slow", 100_000) == 0


def _metadata_as(cluster, client_id: str) -> int:
    from clients import connection

    resp = connection.roundtrip("127.0.0.1", _port(cluster), ApiKey.METADATA, 12,
                                messages.MetadataRequest(topics=None), client_id=client_id)
    return resp.throttle_time_ms


def test_a_request_percentage_quota_throttles_by_handling_time(cluster) -> None:
    # 0.01% of a thread: 0.1 ms of handling per second, 1 ms over the measured 10 s window.
    assert _alter_quotas(cluster, "chatty", "request_percentage", 0.01).entries[0].error_code == 0
    wait_until(lambda: _described(cluster, "chatty") == {"request_percentage": 0.01}, 30,
               "the quota in the broker's image")
    throttles = [_metadata_as(cluster, "chatty") for _ in range(20)]
    assert throttles[-1] > 0, throttles
    assert all(_metadata_as(cluster, "quiet") == 0 for _ in range(20))
    _alter_quotas(cluster, "chatty", "request_percentage", 0, remove=True)
    wait_until(lambda: _described(cluster, "chatty") == {}, 30, "the quota removed")


def _ketch(cluster, *args: str, rc: int = 0):
    import os
    import subprocess
    import sys

    root = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-m", "clients.cli", *args,
                           "--bootstrap", cluster.spec.bootstrap_servers],
                          cwd=root, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == rc, (args, proc.stdout, proc.stderr)
    return proc


def test_quotas_through_the_admin_client_and_the_cli(cluster) -> None:
    import json

    from clients.admin import ANY_NAME, client_quota_entity

    admin = admin_for(cluster)
    entity = client_quota_entity({"user": None, "client-id": "cli-app"})
    admin.alter_client_quotas({entity: {"consumer_byte_rate": 2_000_000}})
    wait_until(lambda: admin.describe_client_quotas({"client-id": "cli-app", "user": None},
                                                    strict=True) == {entity: {"consumer_byte_rate": 2e6}},
               30, "the quota described")
    assert entity in admin.describe_client_quotas({"user": ANY_NAME})
    _ketch(cluster, "quota", "set", "--client-id", "cli-app", "producer_byte_rate=5000")
    rows = wait_until(lambda: json.loads(_ketch(cluster, "quota", "get", "--client-id", "cli-app",
                                                "--output", "json").stdout), 30, "the CLI's quota")
    assert rows == [{"entity": "client-id=cli-app", "key": "producer_byte_rate", "value": 5000.0}]
    bad = _ketch(cluster, "quota", "set", "--client-id", "cli-app", "producer_byte_rate=-1", rc=1)
    assert "INVALID_REQUEST" in bad.stderr or "must be positive" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    _ketch(cluster, "quota", "delete", "--client-id", "cli-app", "producer_byte_rate")
    wait_until(lambda: json.loads(_ketch(cluster, "quota", "get", "--client-id", "cli-app",
                                         "--output", "json").stdout) == [], 30, "the quota removed")


def test_features_and_client_metrics_subscriptions_through_the_cli(cluster) -> None:
    import json

    from metadata_log.features import METADATA_VERSION

    rows = json.loads(_ketch(cluster, "feature", "describe", "--output", "json").stdout)
    assert [(r["feature"], r["supported_min"], r["supported_max"], r["finalized"]) for r in rows] \
        == [("eligible.leader.replicas.version", 0, 1, 1),
            ("metadata.version", 1, METADATA_VERSION, METADATA_VERSION)]
    refused = _ketch(cluster, "feature", "downgrade", "metadata.version=16", "--dry-run", rc=1)
    assert "might delete metadata information" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    _ketch(cluster, "config", "set", "--client-metrics", "cli-subscription", "metrics=*",
           "interval.ms=60000")
    def described():
        try:     # until the broker's image has it, `get` says there is no such subscription
            return json.loads(_ketch(cluster, "config", "get", "--client-metrics",
                                     "cli-subscription", "--output", "json").stdout)
        except AssertionError:
            return None
    rows = wait_until(described, 30, "the subscription described")
    assert [(r["name"], r["value"], r["source"]) for r in rows] == [
        ("interval.ms", "60000", "client_metrics"), ("metrics", "*", "client_metrics")]
    # ListClientMetricsResources names it, through Ketch's admin client.
    assert "cli-subscription" in admin_for(cluster).list_client_metrics_resources()
    bad = _ketch(cluster, "config", "set", "--client-metrics", "cli-subscription",
                 "match=colour=red", rc=1)
    assert "Illegal client matching pattern" in bad.stderr


# ---------------------------------------------------------------- Fetch v13-v17, ApiVersions

def _topic_id(cluster) -> uuid.UUID:
    M = messages.MetadataRequest
    (topic,) = roundtrip(_port(cluster), ApiKey.METADATA, 12,
                         M(topics=[M.MetadataRequestTopic(name=TOPIC)])).topics
    return topic.topic_id


def _fetch_by_id(cluster, version: int, session_id: int, epoch: int,
                 partitions: dict[uuid.UUID, dict[int, int]], replica_id: int = -1,
                 forget: dict[uuid.UUID, list[int]] | None = None) -> messages.FetchResponse:
    replica = (dict(replica_state=F.ReplicaState(replica_id=replica_id, replica_epoch=1))
               if version >= 15 else dict(replica_id=replica_id))
    req = F(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            session_id=session_id, session_epoch=epoch, **replica,
            topics=[F.FetchTopic(topic_id=topic_id, partitions=[
                F.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 16)
                for p, o in ps.items()]) for topic_id, ps in partitions.items()],
            forgotten_topics_data=[F.ForgottenTopic(topic_id=t, partitions=ps)
                                   for t, ps in (forget or {}).items()])
    return roundtrip(_port(cluster), ApiKey.FETCH, version, req)


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
def test_fetch_names_topics_by_id_from_v13(cluster, version: int) -> None:
    topic_id, unknown = _topic_id(cluster), uuid.uuid4()
    _produce(cluster, 4, [b"by-id"])
    resp = _fetch_by_id(cluster, version, 0, -1, {topic_id: {4: 0}, unknown: {0: 0, 1: 0}})
    answered = {t.topic_id: {p.partition_index: p for p in t.partitions} for t in resp.responses}
    assert set(answered) == {topic_id, unknown} and all(t.topic == "" for t in resp.responses)
    assert answered[topic_id][4].error_code == 0 and answered[topic_id][4].records
    assert {p: d.error_code for p, d in answered[unknown].items()} == \
        {0: ErrorCode.UNKNOWN_TOPIC_ID, 1: ErrorCode.UNKNOWN_TOPIC_ID}


def test_a_fetch_session_by_topic_id_answers_changes_and_refuses_a_fetch_by_name(cluster) -> None:
    topic_id = _topic_id(cluster)
    hw = {p: d.high_watermark for p, d in _answered(_full_fetch(cluster)).items()}
    full = _fetch_by_id(cluster, 17, 0, 0, {topic_id: dict(hw)})
    sid = full.session_id
    assert sid > 0 and len(full.responses[0].partitions) == PARTITIONS
    assert _answered(_fetch_by_id(cluster, 17, sid, 1, {})) == {}
    _produce(cluster, 9, [b"news"])
    busy = _fetch_by_id(cluster, 17, sid, 2, {}, forget={topic_id: [3]})
    assert [t.topic_id for t in busy.responses] == [topic_id] and list(_answered(busy)) == [9]
    # Kafka's FETCH_SESSION_TOPIC_ID_ERROR: a v12 fetch cannot name this session's partitions.
    assert _fetch(cluster, sid, 3, {}).error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert _fetch_by_id(cluster, 17, sid, 3, {}).error_code == 0


def test_a_session_by_topic_id_learns_of_its_topics_deletion_but_not_of_other_changes(cluster) -> None:
    """A session resolves its topic ids again only when a topic came or went (at 100k
    partitions, every leader or ISR change made each follower session resolve ~33,000):
    a produce elsewhere keeps the resolution; a deletion answers UNKNOWN_TOPIC_ID."""
    admin = admin_for(cluster)
    admin.create_topics([NewTopic("doomed", num_partitions=1, replication_factor=1)])
    M = messages.MetadataRequest

    def doomed_id() -> uuid.UUID | None:
        (topic,) = roundtrip(_port(cluster), ApiKey.METADATA, 12,
                             M(topics=[M.MetadataRequestTopic(name="doomed")],
                               allow_auto_topic_creation=False)).topics
        return topic.topic_id if topic.error_code == 0 and topic.partitions and \
            topic.partitions[0].leader_id >= 0 else None
    wait_until(lambda: doomed_id() is not None, 60, "doomed led")
    doomed = doomed_id()
    full = _fetch_by_id(cluster, 13, 0, 0, {doomed: {0: 0}})
    sid = full.session_id
    assert sid > 0 and _answered(full)[0].error_code == 0
    _produce(cluster, 2, [b"elsewhere"])        # a change to another topic's partition
    assert _answered(_fetch_by_id(cluster, 13, sid, 1, {})) == {}
    admin.delete_topics(["doomed"])
    wait_until(lambda: doomed_id() is None, 60, "doomed deleted")
    gone = _answered(_fetch_by_id(cluster, 13, sid, 2, {}))
    assert gone[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_a_delta_bigger_than_one_turns_worth_is_applied_whole_over_several_turns(cluster) -> None:
    """broker.APPLY_CHANGES_PER_TURN: a topic of more partitions than one turn applies is
    led in full, its last partitions too, and a consumer group works alongside."""
    from broker.broker import APPLY_CHANGES_PER_TURN
    count = 2 * APPLY_CHANGES_PER_TURN + 100
    admin_for(cluster).create_topics([NewTopic("wide", num_partitions=count, replication_factor=1)])
    P = messages.ProduceRequest
    batch = build_batch([Record(0, 0, None, b"w")])

    def produced(partition: int) -> bool:
        resp = roundtrip(_port(cluster), ApiKey.PRODUCE, 9, P(acks=-1, timeout_ms=10_000, topic_data=[
            P.TopicProduceData(name="wide", partition_data=[P.PartitionProduceData(index=partition,
                                                                                  records=batch)])]))
        return resp.responses[0].partition_responses[0].error_code == 0
    for partition in (0, APPLY_CHANGES_PER_TURN + 1, count - 1):
        wait_until(lambda: produced(partition), 60, f"wide-{partition} led")


def test_v15_reads_the_follower_from_replica_state_and_v16_names_the_leader(cluster) -> None:
    topic_id = _topic_id(cluster)
    # Broker 99 is no replica of the partition: a follower fetch from it is refused, which
    # shows that v15's ReplicaState (not the v14 ReplicaId it replaces) named the fetcher.
    v15 = _fetch_by_id(cluster, 15, 0, -1, {topic_id: {0: 0}}, replica_id=99)
    assert _answered(v15)[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _answered(v15)[0].current_leader.leader_id == -1 and v15.node_endpoints == []
    # KIP-951 (v16): the answer names the current leader and how to reach it.
    v16 = _fetch_by_id(cluster, 16, 0, -1, {topic_id: {0: 0}}, replica_id=99)
    leader = _answered(v16)[0].current_leader
    broker = cluster.spec.brokers[0]
    assert (leader.leader_id, leader.leader_epoch >= 0) == (1, True)
    assert [(n.node_id, n.port) for n in v16.node_endpoints] == [(1, broker.port)]


def _default_body(api_key: int, version: int):
    (name,) = [n for n, entry in _schemas.SCHEMAS.items() if entry[:2] == (api_key, "request")]
    body = getattr(messages, name)()
    if api_key == ApiKey.PRODUCE:
        return dataclasses.replace(body, acks=1)          # acks=0 is answered by silence
    if api_key == ApiKey.API_VERSIONS and version >= 3:
        return dataclasses.replace(body, client_software_name="ketch-it",
                                   client_software_version="1")
    return body


def _error_codes(value) -> list[int]:
    """Every error_code in a response, at any depth."""
    if dataclasses.is_dataclass(value):
        found = [value.error_code] if hasattr(value, "error_code") else []
        return found + [c for f in dataclasses.fields(value) for c in _error_codes(getattr(value, f.name))]
    if isinstance(value, list):
        return [c for item in value for c in _error_codes(item)]
    return []


def test_every_advertised_version_is_answered(cluster) -> None:
    """ApiVersions advertises exactly what is served: a request of every advertised
    version is decoded and answered (no UNSUPPORTED_VERSION, no closed connection)."""
    port = _port(cluster)
    advertised = roundtrip(port, ApiKey.API_VERSIONS, 3, _default_body(ApiKey.API_VERSIONS, 3))
    assert advertised.error_code == 0 and len(advertised.api_keys) > 30
    refused = []
    for entry in advertised.api_keys:
        for version in range(entry.min_version, entry.max_version + 1):
            resp = roundtrip(port, entry.api_key, version, _default_body(entry.api_key, version))
            if ErrorCode.UNSUPPORTED_VERSION in _error_codes(resp):
                refused.append((ApiKey(entry.api_key).name, version))
    assert refused == []


def test_metadata_v12_looks_topics_up_by_id(cluster) -> None:
    M = messages.MetadataRequest
    topic_id, unknown = _topic_id(cluster), uuid.uuid4()
    resp = roundtrip(_port(cluster), ApiKey.METADATA, 12, M(topics=[
        M.MetadataRequestTopic(topic_id=topic_id, name=None),
        M.MetadataRequestTopic(topic_id=unknown, name=None)]))
    by_id = {t.topic_id: t for t in resp.topics}
    assert (by_id[topic_id].error_code, by_id[topic_id].name) == (0, TOPIC)
    assert len(by_id[topic_id].partitions) == PARTITIONS
    assert (by_id[unknown].error_code, by_id[unknown].name) == (ErrorCode.UNKNOWN_TOPIC_ID, None)
    # Before v12 the fields exist but the feature does not: refused, as Kafka does.
    (refused,) = roundtrip(_port(cluster), ApiKey.METADATA, 11, M(topics=[
        M.MetadataRequestTopic(topic_id=topic_id, name=None)])).topics
    assert refused.error_code == ErrorCode.INVALID_REQUEST
