"""Cluster links (issue 21) as config resources: created, altered, judged whole, deleted,
and not deleted while a mirror topic uses them."""
from __future__ import annotations

import pytest

from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from metadata_log import ConfigResourceType
from metadata_log.cluster_links import cluster_link, cluster_links
from metadata_log.snapshot import image_to_records, records_to_image
from quorum.controller import ControllerResult
from tests.quorum.controller.harness import Harness
from tests.quorum.controller.test_controller_configs_and_ids import (
    APPEND, DELETE, SET, alter, legacy,
)

LINK = int(ConfigResourceType.CLUSTER_LINK)


def setup() -> Harness:
    h = Harness()
    h.start_broker(1)
    return h


def create_link(h: Harness, name: str = "east", **extra: str):
    configs = {"bootstrap.servers": "127.0.0.1:9092", "topics": "orders,audit-.*", **extra}
    return alter(h, LINK, name, *[(k, SET, v) for k, v in configs.items()])


def test_a_link_is_created_altered_and_deleted_as_config_records() -> None:
    h = setup()
    response, records = create_link(h)
    assert response.error_code == 0, response.error_message
    assert {(r.resource_type, r.resource_name) for r in records} == {(LINK, "east")}
    assert dict(cluster_link(h.image, "east") or {}) == {
        "bootstrap.servers": "127.0.0.1:9092", "topics": "orders,audit-.*"}
    alter(h, LINK, "east", ("topics", APPEND, "payments"))
    assert cluster_link(h.image, "east")["topics"] == "orders,audit-.*,payments"
    create_link(h, "west")
    assert list(cluster_links(h.image)) == ["east", "west"]
    # Deleting every key deletes the link.
    response, _ = alter(h, LINK, "east", ("bootstrap.servers", DELETE, None), ("topics", DELETE, None))
    assert response.error_code == 0
    assert cluster_link(h.image, "east") is None
    assert list(cluster_links(h.image)) == ["west"]


def test_a_link_survives_a_snapshot() -> None:
    h = setup()
    create_link(h, **{"sasl.password": "secret", "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "PLAIN", "sasl.username": "u"})
    image = records_to_image(image_to_records(h.image), h.image.provenance)
    assert cluster_links(image) == cluster_links(h.image)
    assert cluster_link(image, "east")["sasl.password"] == "secret"


@pytest.mark.parametrize("ops, code, says", [
    ([("topics", SET, "x")], ErrorCode.INVALID_CONFIG, "needs bootstrap.servers"),
    ([("bootstrap.servers", SET, "nohost")], ErrorCode.INVALID_CONFIG, "expected host:port"),
    ([("bootstrap.servers", SET, "h:1"), ("topic", SET, "x")], ErrorCode.INVALID_CONFIG,
     "Unknown cluster link config name: topic"),
    ([("bootstrap.servers", SET, "h:1"), ("topics", SET, "[unclosed")], ErrorCode.INVALID_CONFIG,
     "not a regex"),
    ([("bootstrap.servers", SET, "h:1"), ("consumer.offset.sync.ms", SET, "10")],
     ErrorCode.INVALID_CONFIG, "consumer.offset.sync.ms"),
    ([("bootstrap.servers", SET, "h:1"), ("consumer.offset.sync.enable", SET, "yes")],
     ErrorCode.INVALID_CONFIG, "true or false"),
    ([("bootstrap.servers", SET, "h:1"), ("security.protocol", SET, "SASL_SSL")],
     ErrorCode.INVALID_CONFIG, "needs sasl.mechanism"),
    ([("bootstrap.servers", SET, "h:1"), ("security.protocol", SET, "SASL_SSL"),
      ("sasl.mechanism", SET, "PLAIN")], ErrorCode.INVALID_CONFIG, "needs sasl.username"),
    ([("bootstrap.servers", SET, "h:1"), ("security.protocol", SET, "TLS")],
     ErrorCode.INVALID_CONFIG, "security.protocol"),
])
def test_bad_links_are_refused_and_nothing_is_written(ops, code, says) -> None:
    h = setup()
    response, records = alter(h, LINK, "east", *ops)
    assert response.error_code == code and says in response.error_message, response.error_message
    assert records == ()
    assert cluster_link(h.image, "east") is None


def test_an_unnamed_link_is_refused() -> None:
    h = setup()
    response, records = alter(h, LINK, "", ("bootstrap.servers", SET, "h:1"))
    assert response.error_code == ErrorCode.INVALID_REQUEST and records == ()


def test_a_link_is_judged_whole_after_the_operations() -> None:
    h = setup()
    create_link(h)
    # Removing the required key from an existing link is refused; the link stays as it was.
    response, _ = alter(h, LINK, "east", ("bootstrap.servers", DELETE, None))
    assert response.error_code == ErrorCode.INVALID_CONFIG
    response, _ = legacy(h, LINK, "east", {"topics": "x"})
    assert response.error_code == ErrorCode.INVALID_CONFIG
    assert cluster_link(h.image, "east")["bootstrap.servers"] == "127.0.0.1:9092"


def set_topic_configs(h: Harness, topic: str, configs: dict[str, str]) -> None:
    # The ketch.mirror.* topic configs are defined (and checked on create/alter) by the
    # mirror data path; written as plain records here so this test needs only the link side.
    h.commit(ControllerResult(tuple(
        M.ConfigRecord(resource_type=int(ConfigResourceType.TOPIC), resource_name=topic,
                       name=k, value=v) for k, v in configs.items()), None))


@pytest.mark.parametrize("state, refused", [
    (None, True), ("active", True), ("stopped", True), ("promoted", False)])
def test_a_link_in_use_by_a_mirror_topic_is_not_deleted(state, refused) -> None:
    h = setup()
    create_link(h)
    h.create_topic("orders")
    configs = {"ketch.mirror.link": "east"}
    if state is not None:
        configs["ketch.mirror.state"] = state
    set_topic_configs(h, "orders", configs)
    response, records = legacy(h, LINK, "east", {})
    if refused:
        assert response.error_code == ErrorCode.INVALID_REQUEST
        assert "used by mirror topics (orders)" in response.error_message
        assert "promote" in response.error_message
        assert records == () and cluster_link(h.image, "east") is not None
    else:
        assert response.error_code == 0 and cluster_link(h.image, "east") is None
    # Altering a link in use is fine.
    if refused:
        response, _ = alter(h, LINK, "east", ("topics", APPEND, "more"))
        assert response.error_code == 0


def test_a_mirror_of_another_link_does_not_hold_this_one() -> None:
    h = setup()
    create_link(h)
    create_link(h, "west")
    h.create_topic("orders")
    set_topic_configs(h, "orders", {"ketch.mirror.link": "west"})
    response, _ = legacy(h, LINK, "east", {})
    assert response.error_code == 0
