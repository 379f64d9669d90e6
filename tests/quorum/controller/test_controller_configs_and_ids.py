"""IncrementalAlterConfigs and producer id blocks."""
from __future__ import annotations

import pytest

from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from metadata_log import ConfigResourceType
from tests.quorum.controller.harness import Harness

IAC = M.IncrementalAlterConfigsRequest
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def alter(h: Harness, resource_type: int, name: str, *ops, validate_only: bool = False):
    request = IAC(validate_only=validate_only, resources=[IAC.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[IAC.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])
    result = h.controller.handle_incremental_alter_configs(request, h.now_ms)
    response = h.commit(result).responses[0]
    assert (response.resource_type, response.resource_name) == (resource_type, name)
    return response, result.records


def setup() -> Harness:
    h = Harness()
    h.start_broker(1)
    h.create_topic("t", configs={"retention.ms": "100"})
    return h


def test_set_and_delete_topic_configs() -> None:
    h = setup()
    response, records = alter(h, 2, "t", ("segment.bytes", SET, "2048"),
                              ("retention.ms", DELETE, None))
    assert (response.error_code, response.error_message) == (0, None)
    assert dict(h.image.configs.topic("t")) == {"segment.bytes": "2048"}
    assert [(r.name, r.value) for r in records] == [("retention.ms", None),
                                                    ("segment.bytes", "2048")]


def test_setting_the_current_value_writes_nothing() -> None:
    h = setup()
    response, records = alter(h, 2, "t", ("retention.ms", SET, "100"),
                              ("segment.ms", DELETE, None))
    assert response.error_code == 0 and records == ()


def test_append_and_subtract_on_list_configs() -> None:
    h = setup()
    alter(h, 2, "t", ("cleanup.policy", APPEND, "compact"))        # default "delete" + compact
    assert h.image.configs.topic("t")["cleanup.policy"] == "delete,compact"
    alter(h, 2, "t", ("cleanup.policy", SUBTRACT, "delete"))
    assert h.image.configs.topic("t")["cleanup.policy"] == "compact"
    emptied, _ = alter(h, 2, "t", ("cleanup.policy", SUBTRACT, "compact"))
    assert emptied.error_code == ErrorCode.INVALID_CONFIG
    assert h.image.configs.topic("t")["cleanup.policy"] == "compact"


def test_list_operations_on_other_types_are_invalid_configs() -> None:
    h = setup()
    response, _ = alter(h, 2, "t", ("retention.ms", APPEND, "5"))
    assert (response.error_code, response.error_message) == (
        ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")


def test_a_resource_is_altered_all_or_nothing() -> None:
    h = setup()
    response, records = alter(h, 2, "t", ("segment.bytes", SET, "2048"),
                              ("min.insync.replicas", SET, "0"))
    assert response.error_code == ErrorCode.INVALID_CONFIG
    assert "min.insync.replicas" in response.error_message
    assert records == () and dict(h.image.configs.topic("t")) == {"retention.ms": "100"}


@pytest.mark.parametrize("rtype, name, ops, code", [
    (2, "nope", [("retention.ms", SET, "1")], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (2, "t", [("retention.msec", SET, "1")], ErrorCode.INVALID_CONFIG),
    (2, "t", [("retention.ms", SET, None)], ErrorCode.INVALID_REQUEST),
    (2, "t", [("retention.ms", 7, "1")], ErrorCode.INVALID_REQUEST),
    (2, "t", [("retention.ms", SET, "1"), ("retention.ms", SET, "2")], ErrorCode.INVALID_REQUEST),
    (4, "x", [("log.retention.ms", SET, "1")], ErrorCode.INVALID_REQUEST),
    (4, "", [("retention.ms", SET, "1")], ErrorCode.INVALID_CONFIG),
    (8, "1", [("kafka.server", SET, "DEBUG")], ErrorCode.INVALID_REQUEST),
    (3, "t", [("retention.ms", SET, "1")], ErrorCode.INVALID_REQUEST),
])
def test_refusals(rtype, name, ops, code) -> None:
    h = setup()
    response, records = alter(h, rtype, name, *ops)
    assert response.error_code == code and response.error_message and records == ()


def test_broker_configs_per_broker_and_cluster_wide() -> None:
    h = setup()
    alter(h, 4, "", ("min.insync.replicas", SET, "2"))
    alter(h, 4, "1", ("log.retention.ms", SET, "-1"))
    assert h.image.configs.cluster_default() == {"min.insync.replicas": "2"}
    assert h.image.configs.get(ConfigResourceType.BROKER, "1") == {"log.retention.ms": "-1"}


def test_validate_only_writes_nothing() -> None:
    h = setup()
    response, records = alter(h, 2, "t", ("segment.bytes", SET, "2048"), validate_only=True)
    assert response.error_code == 0 and records == ()
    assert "segment.bytes" not in h.image.configs.topic("t")


def test_duplicate_resources_in_one_request() -> None:
    h = setup()
    resource = IAC.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
        IAC.AlterableConfig(name="retention.ms", config_operation=SET, value="1")])
    result = h.controller.handle_incremental_alter_configs(IAC(resources=[resource, resource]),
                                                           h.now_ms)
    assert result.records == ()
    assert [r.error_code for r in result.response.responses] == [ErrorCode.INVALID_REQUEST] * 2


# ---------------------------------------------------------------- producer ids

def test_producer_id_blocks_are_consecutive_thousands() -> None:
    h = setup()
    epoch = h.image.cluster.get(1).broker_epoch
    blocks = []
    for _ in range(3):
        response = h.commit(h.controller.allocate_producer_ids(1, epoch))
        blocks.append((response.error_code, response.producer_id_start, response.producer_id_len))
    assert blocks == [(0, 0, 1000), (0, 1000, 1000), (0, 2000, 1000)]
    assert h.image.producer_ids.next_producer_id == 3000
    via_request = h.commit(h.controller.handle_allocate_producer_ids(
        M.AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch), h.now_ms))
    assert via_request.producer_id_start == 3000


def test_producer_ids_need_a_current_broker_epoch() -> None:
    h = setup()
    assert h.controller.allocate_producer_ids(1, 12345).response.error_code == \
        ErrorCode.STALE_BROKER_EPOCH
    assert h.controller.allocate_producer_ids(9, 1).response.error_code == \
        ErrorCode.STALE_BROKER_EPOCH


def test_a_block_decided_twice_is_committed_once() -> None:
    """Two decisions on the same image (a shell that broke the one-write-in-flight rule, or
    a Raft retry): the second batch is refused on replay, so no block is handed out twice."""
    h = setup()
    epoch = h.image.cluster.get(1).broker_epoch
    first = h.controller.allocate_producer_ids(1, epoch)
    second = h.controller.allocate_producer_ids(1, epoch)
    assert first.records == second.records
    h.commit(first)
    outcome = h.controller.replay(second.records, h.next_offset)
    h.next_offset += 1
    assert outcome.error is not None
    assert h.image.producer_ids.next_producer_id == 1000
    retry = h.commit(h.controller.allocate_producer_ids(1, epoch))
    assert retry.producer_id_start == 1000


# ---------------------------------------------------------------- broker keys, legacy AlterConfigs

def test_read_only_broker_keys_are_refused_and_nothing_applies() -> None:
    h = setup()
    response, records = alter(h, 4, "1", ("message.max.bytes", SET, "5000"), ("node.id", SET, "7"))
    assert response.error_code == ErrorCode.INVALID_REQUEST        # Kafka's answer (KAFKA-13609)
    assert "Cannot update these configs dynamically: node.id" in response.error_message
    assert records == () and dict(h.image.configs.get(ConfigResourceType.BROKER, "1")) == {}


def test_dynamic_broker_keys_per_broker_and_as_cluster_default() -> None:
    h = setup()
    assert alter(h, 4, "1", ("log.retention.ms", SET, "1000"))[0].error_code == 0
    assert alter(h, 4, "", ("log.retention.ms", SET, "2000"))[0].error_code == 0
    assert h.image.configs.get(ConfigResourceType.BROKER, "1")["log.retention.ms"] == "1000"
    assert h.image.configs.cluster_default()["log.retention.ms"] == "2000"


def test_unknown_and_mistyped_broker_keys_name_the_key() -> None:
    h = setup()
    unknown, _ = alter(h, 4, "", ("log.retention.msec", SET, "1"))
    assert unknown.error_code == ErrorCode.INVALID_CONFIG and "log.retention.msec" in unknown.error_message
    bad, _ = alter(h, 4, "", ("message.max.bytes", SET, "lots"))
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "message.max.bytes" in bad.error_message


def test_listener_prefixed_keys_only_per_broker() -> None:
    h = setup()
    key = "listener.name.internal.ssl.keystore.location"
    at_default, _ = alter(h, 4, "", (key, SET, "/etc/ks.jks"))
    assert at_default.error_code == ErrorCode.INVALID_REQUEST and "broker id must be specified" in at_default.error_message
    unprefixed, _ = alter(h, 4, "1", ("ssl.keystore.location", SET, "/etc/ks.jks"))
    assert unprefixed.error_code == ErrorCode.INVALID_REQUEST and "listener prefix" in unprefixed.error_message
    assert alter(h, 4, "1", (key, SET, "/etc/ks.jks"))[0].error_code == 0


AC = M.AlterConfigsRequest


def legacy(h: Harness, resource_type: int, name: str, configs: dict[str, str],
           validate_only: bool = False):
    request = AC(validate_only=validate_only, resources=[AC.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[AC.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    result = h.controller.handle_alter_configs(request, h.now_ms)
    return h.commit(result).responses[0], result.records


def test_legacy_alter_configs_replaces_the_whole_set() -> None:
    h = setup()                                              # t has retention.ms=100
    response, records = legacy(h, 2, "t", {"segment.bytes": "4096", "cleanup.policy": "compact"})
    assert response.error_code == 0
    assert dict(h.image.configs.topic("t")) == {"segment.bytes": "4096", "cleanup.policy": "compact"}
    assert ("retention.ms", None) in [(r.name, r.value) for r in records]


def test_legacy_alter_configs_validates_like_the_incremental_form() -> None:
    h = setup()
    bad, records = legacy(h, 2, "t", {"segment.bytes": "4096", "min.insync.replicas": "0"})
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "min.insync.replicas" in bad.error_message
    assert records == () and dict(h.image.configs.topic("t")) == {"retention.ms": "100"}
    read_only, _ = legacy(h, 4, "1", {"log.dirs": "/elsewhere"})
    assert read_only.error_code == ErrorCode.INVALID_REQUEST and "log.dirs" in read_only.error_message
    missing, _ = legacy(h, 2, "nope", {"segment.bytes": "4096"})
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_legacy_validate_only_writes_nothing() -> None:
    h = setup()
    response, records = legacy(h, 2, "t", {"segment.bytes": "4096"}, validate_only=True)
    assert response.error_code == 0 and records == ()
    assert dict(h.image.configs.topic("t")) == {"retention.ms": "100"}


# ------------------------------------------------------------ client-metrics subscriptions (KIP-714)

CLIENT_METRICS = int(ConfigResourceType.CLIENT_METRICS)


def test_a_subscription_is_stored_listed_altered_and_deleted_as_config_records() -> None:
    h = setup()
    response, records = alter(h, CLIENT_METRICS, "producers",
                              ("metrics", SET, "org.apache.kafka.producer."),
                              ("interval.ms", SET, "1000"),
                              ("match", SET, "client_software_name=librdkafka,client_id=app-.*"))
    assert response.error_code == 0
    assert {(r.resource_type, r.resource_name) for r in records} == {(CLIENT_METRICS, "producers")}
    assert dict(h.image.configs.get(ConfigResourceType.CLIENT_METRICS, "producers")) == {
        "metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
        "match": "client_software_name=librdkafka,client_id=app-.*"}
    alter(h, CLIENT_METRICS, "producers", ("metrics", APPEND, "org.apache.kafka.consumer."))
    assert h.image.configs.get(ConfigResourceType.CLIENT_METRICS, "producers")["metrics"] == \
        "org.apache.kafka.producer.,org.apache.kafka.consumer."
    # Deleting every key deletes the subscription.
    alter(h, CLIENT_METRICS, "producers", ("metrics", DELETE, None), ("interval.ms", DELETE, None),
          ("match", DELETE, None))
    assert dict(h.image.configs.get(ConfigResourceType.CLIENT_METRICS, "producers")) == {}


@pytest.mark.parametrize("name, ops, code, says", [
    ("s", [("interval.ms", SET, "99")], ErrorCode.INVALID_REQUEST, "between 100 and 3600000"),
    ("s", [("interval.ms", SET, "3600001")], ErrorCode.INVALID_REQUEST, "between 100 and 3600000"),
    ("s", [("interval.ms", SET, "soon")], ErrorCode.INVALID_CONFIG, "interval.ms"),
    ("s", [("metric", SET, "*")], ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: metric"),
    ("s", [("match", SET, "client_colour=red")], ErrorCode.INVALID_CONFIG, "Illegal client matching pattern"),
    ("s", [("match", SET, "client_id")], ErrorCode.INVALID_CONFIG, "Illegal client matching pattern"),
    ("s", [("match", SET, "client_id=a=b")], ErrorCode.INVALID_CONFIG, "Illegal client matching pattern"),
    ("s", [("match", SET, "client_id=[unclosed")], ErrorCode.INVALID_CONFIG, "Illegal client matching pattern"),
    ("", [("metrics", SET, "*")], ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
])
def test_bad_subscriptions_are_refused_as_kafka_refuses_them(name, ops, code, says) -> None:
    h = setup()
    response, records = alter(h, CLIENT_METRICS, name, ("metrics", SET, "*"), *ops) if name else \
        alter(h, CLIENT_METRICS, name, *ops)
    assert response.error_code == code and says in response.error_message
    assert records == ()
    assert dict(h.image.configs.get(ConfigResourceType.CLIENT_METRICS, name)) == {}


def test_a_subscription_is_judged_whole_after_the_operations() -> None:
    h = setup()
    alter(h, CLIENT_METRICS, "s", ("metrics", SET, "*"), ("match", SET, "client_id=a"))
    # APPENDing a malformed pattern to a valid list is refused; the subscription stays.
    response, _ = alter(h, CLIENT_METRICS, "s", ("match", APPEND, "nonsense"))
    assert response.error_code == ErrorCode.INVALID_CONFIG
    assert h.image.configs.get(ConfigResourceType.CLIENT_METRICS, "s")["match"] == "client_id=a"
    response, _ = legacy(h, CLIENT_METRICS, "s", {"interval.ms": "50"})
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert dict(h.image.configs.get(ConfigResourceType.CLIENT_METRICS, "s")) == {
        "metrics": "*", "match": "client_id=a"}


def test_remote_storage_enable_needs_the_controllers_tiered_storage_switch() -> None:
    """KIP-405: Kafka's controller judges remote.storage.enable by its own
    remote.log.storage.system.enable; once on, a topic's tiering cannot be turned off."""
    from quorum.controller import ControllerConfig
    off = Harness()
    off.start_broker(1)
    created = off.create_topic("tiered", configs={"remote.storage.enable": "true"})
    assert created.error_code == ErrorCode.INVALID_CONFIG
    assert "Tiered Storage functionality is disabled" in created.error_message
    off.create_topic("plain")
    response, records = alter(off, 2, "plain", ("remote.storage.enable", SET, "true"))
    assert response.error_code == ErrorCode.INVALID_CONFIG and records == ()

    on = Harness(ControllerConfig(remote_log_storage_system_enable=True))
    on.start_broker(1)
    assert on.create_topic("tiered", configs={"remote.storage.enable": "true",
                                              "local.retention.ms": "1000"}).error_code == 0
    response, _ = alter(on, 2, "tiered", ("remote.storage.enable", SET, "false"))
    assert response.error_code == ErrorCode.INVALID_CONFIG
    response, _ = alter(on, 2, "tiered", ("local.retention.ms", SET, "999999999999"))
    assert response.error_code == ErrorCode.INVALID_CONFIG      # above retention.ms
    response, _ = alter(on, 2, "tiered", ("local.retention.bytes", SET, "1048576"))
    assert response.error_code == 0
    assert on.image.configs.topic("tiered")["local.retention.bytes"] == "1048576"
