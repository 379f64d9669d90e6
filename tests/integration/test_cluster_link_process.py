"""Cluster links between two real clusters on 127.0.0.1 (issue 21): the link as the
destination's metadata, the link manager following the source's topics, partition counts,
configs and consumer group offsets, the CLI and HTTP surfaces, and a consumer group moved
to the destination. Each cluster is 1 controller and 1 broker.

The records themselves are copied by the mirror data path (broker/mirror, merged here from
the mirror branch); the last test needs it. The first test's offset check holds with or
without it: a synced offset is capped at the destination partition's high watermark.
"""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import urllib.error
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer, Producer as CKProducer

from clients.admin import (
    AlterConfigOp, ConfigResource, ConfigSource, NewPartitions, NewTopic, OffsetSpec,
)
from clients.cli._main import main
from clients.errors import KafkaApiError
from clients.producer import Producer
from clients.types import TopicPartition
from tests.integration.integration_helpers import STOP_TIMEOUT_S, admin_for, start_cluster, wait_until

pytestmark = [pytest.mark.process]

FAST_LINK = {"metadata.max.age.ms": "300", "topic.config.sync.ms": "300",
             "consumer.offset.sync.enable": "true", "consumer.offset.sync.groups": "app-.*",
             "consumer.offset.sync.ms": "300"}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory):
    source = start_cluster(tmp_path_factory, "link-source", controllers=1, brokers=1)
    try:
        destination = start_cluster(tmp_path_factory, "link-destination", controllers=1, brokers=1)
        try:
            yield source, destination
        finally:
            destination.stop(timeout_s=STOP_TIMEOUT_S)
    finally:
        source.stop(timeout_s=STOP_TIMEOUT_S)


def ketch(cluster, *args: str, rc: int = 0) -> subprocess.CompletedProcess:
    """``ketch ARGS --dir DIR`` run in this process (the same ``main`` as the command;
    a Python start per call would cost seconds on a loaded machine)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*args, "--dir", cluster.dir])
        except SystemExit as e:          # argparse's usage errors
            code = int(e.code or 0)
    proc = subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
    assert proc.returncode == rc, (args, proc.returncode, proc.stdout, proc.stderr)
    if rc == 1:       # a user error: one line, no traceback
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc


def ketch_json(cluster, *args: str) -> Any:
    return json.loads(ketch(cluster, *args, "--output", "json").stdout)


def topic_configs(admin, topic: str) -> dict[str, str | None]:
    entries = admin.describe_configs([ConfigResource.topic(topic)])[ConfigResource.topic(topic)]
    return {k: e.value for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG}


def test_a_link_follows_the_source_topics_partitions_configs_and_group_offsets(clusters) -> None:
    source, destination = clusters
    src, dst = admin_for(source), admin_for(destination)

    # Bad input first: one clear line, nothing created.
    out = ketch(destination, "link", "create", "east", "--source", "nohost", rc=1)
    assert "expected host:port" in out.stderr
    out = ketch(destination, "link", "create", "east", "--source", "127.0.0.1:1",
                "-c", "topics=[unclosed", rc=1)
    assert "not a regex" in out.stderr
    assert dst.list_cluster_links() == {}

    src.create_topics([NewTopic("orders", 3, 1, configs={"retention.ms": "123456",
                                                         "min.insync.replicas": "1"}),
                       NewTopic("other", 1, 1)])
    ketch(destination, "link", "create", "east", "--source", source.spec.bootstrap_servers,
          "--topics", "orders.*", *[a for k, v in FAST_LINK.items() for a in ("-c", f"{k}={v}")])
    out = ketch(destination, "link", "create", "east", "--source", "127.0.0.1:1", rc=1)
    assert "exists already" in out.stderr
    assert ketch_json(destination, "link", "list") == [
        {"link": "east", "bootstrap_servers": source.spec.bootstrap_servers}]

    # The matching topic appears as a mirror topic with the source's partition count and
    # configs; the other one does not.
    def mirrored() -> dict | None:
        if "orders" not in dst.list_topics():
            return None
        return topic_configs(dst, "orders")
    configs = wait_until(mirrored, 30, "the mirror topic on the destination")
    assert configs["retention.ms"] == "123456"
    assert configs["ketch.mirror.link"] == "east" and configs["ketch.mirror.source.topic"] == "orders"
    assert configs.get("ketch.mirror.state", "active") == "active"
    assert "min.insync.replicas" not in configs          # the destination's own choice
    assert len(dst.describe_topics(["orders"])["orders"].partitions) == 3
    assert "other" not in dst.list_topics()
    assert ketch_json(destination, "mirror", "list") == [
        {"topic": "orders", "link": "east", "source_topic": "orders", "state": "active"}]

    # Partitions added and configs changed on the source follow.
    src.create_partitions({"orders": NewPartitions(5)})
    src.incremental_alter_configs({ConfigResource.topic("orders"): [
        AlterConfigOp("retention.ms", "654321"), AlterConfigOp("cleanup.policy", "compact,delete")]})
    wait_until(lambda: len(dst.describe_topics(["orders"])["orders"].partitions) == 5, 30,
               "the added partitions on the destination")
    wait_until(lambda: topic_configs(dst, "orders").get("retention.ms") == "654321"
               and topic_configs(dst, "orders").get("cleanup.policy") == "compact,delete", 30,
               "the changed configs on the destination")

    # `ketch mirror create` adds a topic to the link's filter; the manager mirrors it.
    ketch(destination, "mirror", "create", "other", "--link", "east")
    wait_until(lambda: "other" in dst.list_topics(), 30, "the mirror of 'other'")
    assert dst.describe_cluster_link("east")["topics"].value == "orders.*,other"

    # A group's committed offsets on the source are committed on the destination, never
    # past the mirror partition's high watermark there.
    with Producer({"bootstrap.servers": source.spec.bootstrap_servers, "linger.ms": 0}) as p:
        for i in range(10):
            p.send("orders", value=b"r%d" % i, partition=0)
        p.flush()
    src.alter_consumer_group_offsets("app-billing", {TopicPartition("orders", 0): 7})
    src.alter_consumer_group_offsets("ignored", {TopicPartition("orders", 0): 3})

    def synced() -> int | None:
        try:
            got = dst.list_consumer_group_offsets("app-billing")
        except KafkaApiError:
            return None
        om = got.get(TopicPartition("orders", 0))
        hw = dst.list_offsets({TopicPartition("orders", 0): OffsetSpec.latest()})[
            TopicPartition("orders", 0)].offset
        return None if om is None or om.offset != min(7, hw) else om.offset + 1
    wait_until(synced, 30, "app-billing's offsets on the destination")
    assert dst.list_consumer_group_offsets("ignored") == {}

    # The link's configs, secrets hidden; refused deletion while the mirror is active.
    dst.alter_cluster_link("east", [AlterConfigOp("sasl.password", "s3cret")])
    view = ketch_json(destination, "link", "describe", "east")
    shown = {r["key"]: r["value"] for r in view["configs"]}
    assert shown["sasl.password"] == "(hidden)" and shown["topics"] == "orders.*,other"
    assert shown["consumer.offset.sync.ms"] == "300"
    assert view["mirror_topics"] == [
        {"topic": "orders", "link": "east", "source_topic": "orders", "state": "active"},
        {"topic": "other", "link": "east", "source_topic": "other", "state": "active"}]
    entry = dst.describe_cluster_link("east")["sasl.password"]
    assert entry.value is None and entry.sensitive
    out = ketch(destination, "link", "delete", "east", rc=1)
    assert "used by mirror topics (orders, other)" in out.stderr
    info = ketch_json(destination, "cluster", "info")
    assert [link["link"] for link in info["links"]] == ["east"]
    assert info["links"][0]["bootstrap_servers"] == source.spec.bootstrap_servers
    assert {(r["topic"], r["partition"]) for r in info["links"][0]["partition_lag"]} == {
        ("orders", p) for p in range(5)} | {("other", 0)}
    text = ketch(destination, "cluster", "info").stdout
    assert any(line.split()[:1] == ["east"] for line in text.splitlines()), text
    text = ketch(destination, "link", "describe", "east").stdout
    assert "sasl.password" in text and "s3cret" not in text

    # The source topic deleted: the mirror stops and stays; nothing deleted.
    src.delete_topics(["orders"])
    wait_until(lambda: topic_configs(dst, "orders").get("ketch.mirror.state") == "stopped", 30,
               "the mirror to stop")
    assert len(dst.describe_topics(["orders"])["orders"].partitions) == 5
    ketch(destination, "link", "delete", "east", rc=1)

    # Promoted, the topic no longer holds the link, which can go.
    out = ketch(destination, "mirror", "promote", "nosuch", rc=1)
    assert "not a mirror topic" in out.stderr
    ketch(destination, "mirror", "promote", "orders", "other")
    assert topic_configs(dst, "orders")["ketch.mirror.state"] == "promoted"
    ketch(destination, "link", "delete", "east")
    assert dst.list_cluster_links() == {}
    out = ketch(destination, "link", "describe", "east", rc=1)
    assert "does not exist" in out.stderr


def http(cluster, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{cluster.spec.brokers[0].http_port}{path}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_an_unreachable_source_is_reported_and_the_destination_keeps_serving(clusters) -> None:
    _, destination = clusters
    dst = admin_for(destination)
    # Through the HTTP API: bad input is a JSON error naming the problem.
    status, body = http(destination, "POST", "/v1/links", {"name": "nowhere", "configs": {"topics": ".*"}})
    assert (status, body["error"]) == (400, "INVALID_CONFIG") and "bootstrap.servers" in body["message"]
    status, body = http(destination, "GET", "/v1/links/nowhere")
    assert (status, body["error"]) == (404, "RESOURCE_NOT_FOUND")
    status, _ = http(destination, "POST", "/v1/links", {"name": "nowhere", "configs": {
        "bootstrap.servers": "127.0.0.1:1", "topics": ".*", "metadata.max.age.ms": "300"}})
    assert status == 201
    try:
        # The link manager (this cluster's only broker runs it) reports the failure.
        def reported() -> dict | None:
            _, links = http(destination, "GET", "/v1/links")
            # Not listed yet while the node's metadata image has not caught up with the create.
            status = next((link["status"] for link in links if link["name"] == "nowhere"), None)
            return status if status and status["state"] == "error" else None
        status = wait_until(reported, 30, "the link's error in /v1/links")
        assert status["last_error"]
        # The destination keeps serving.
        dst.create_topics([NewTopic("local", 1, 1)])
        assert "local" in dst.list_topics()
        code, body = http(destination, "POST", "/v1/mirror-topics/local/promote")
        assert (code, body["error"]) == (400, "INVALID_REQUEST") and "not a mirror" in body["message"]
        # The first test's promoted topic keeps its link's name; "local" is no mirror.
        assert http(destination, "GET", "/v1/mirror-topics") == (200, [
            {"topic": "orders", "link": "east", "source_topic": "orders", "state": "promoted"},
            {"topic": "other", "link": "east", "source_topic": "other", "state": "promoted"}])
    finally:
        assert http(destination, "DELETE", "/v1/links/nowhere")[0] == 200
    assert http(destination, "GET", "/v1/links") == (200, [])


def consume(bootstrap: str, group: str, topic: str, count: int, timeout_s: float = 30
            ) -> list[tuple[int, int, bytes]]:
    """``count`` records of ``topic`` read by a confluent-kafka (librdkafka) consumer in
    ``group``, committed, as (partition, offset, value); the consumer then leaves."""
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[tuple[int, int, bytes]] = []
    try:
        def read() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append((message.partition(), message.offset(), message.value()))
            return len(got) >= count
        wait_until(read, timeout_s, f"{count} records of {topic} in {group}", interval_s=0.01)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def test_a_consumer_moved_to_the_destination_resumes_where_it_was(clusters) -> None:
    """Needs the mirror data path (the records must reach the destination)."""
    source, destination = clusters
    src, dst = admin_for(source), admin_for(destination)
    src.create_topics([NewTopic("payments", 2, 1)])
    dst.create_cluster_link("dr", {"bootstrap.servers": source.spec.bootstrap_servers,
                                   "topics": "payments", **FAST_LINK})
    producer = CKProducer({"bootstrap.servers": source.spec.bootstrap_servers, "enable.idempotence": True})
    for i in range(200):
        producer.produce("payments", value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    del producer               # librdkafka's threads end with the object
    on_source = consume(source.spec.bootstrap_servers, "app-pay", "payments", 120)
    committed = src.list_consumer_group_offsets("app-pay")
    assert sum(om.offset for om in committed.values()) == 120
    source_ends = {tp: r.offset for tp, r in src.list_offsets(
        {TopicPartition("payments", p): OffsetSpec.latest() for p in (0, 1)}).items()}

    # The mirror has every record and the group's offsets are synced.
    wait_until(lambda: "payments" in dst.list_topics(), 30, "the mirror topic")
    wait_until(lambda: {tp: r.offset for tp, r in dst.list_offsets(
        {tp: OffsetSpec.latest() for tp in source_ends}).items()} == source_ends, 30,
        "every record on the destination")
    wait_until(lambda: {tp: om.offset for tp, om in dst.list_consumer_group_offsets("app-pay").items()}
               == {tp: om.offset for tp, om in committed.items()}, 30, "app-pay's offsets synced")

    # The consumer moves over: it resumes at the synced offsets, no record twice, none missed.
    on_destination = consume(destination.spec.bootstrap_servers, "app-pay", "payments", 80)
    first = {}
    for partition, offset, _ in on_destination:
        first.setdefault(partition, offset)
    # Each partition with records left starts at the offset committed on the source.
    assert first == {tp.partition: om.offset for tp, om in committed.items()
                     if om.offset < source_ends[tp]}
    values = [v for _, _, v in on_source + on_destination]
    assert len(values) == len(set(values)) == 200
    # Same records at the same offsets on both clusters.
    assert all(int(v) % 2 == p for p, _, v in on_destination)
    view = ketch_json(destination, "link", "describe", "dr")
    assert {(p["topic"], p["partition"]) for p in view["partitions"]} == {("payments", 0), ("payments", 1)}
    assert all(p["lag"] == 0 for p in view["partitions"])
