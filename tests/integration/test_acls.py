"""ACLs end to end on a real cluster with the StandardAuthorizer on (issue 16): kafka-python's
admin creates and lists ACLs, and a kafka-python producer and consumer, connected as
User:ANONYMOUS (a plaintext listener authenticates nobody), meet them: a WRITE-only topic
takes records but refuses reads, a READ-only topic refuses the produce
(TOPIC_AUTHORIZATION_FAILED), a DENY beats an ALLOW, committing to another's group is refused
(GROUP_AUTHORIZATION_FAILED), Metadata hides a topic ANONYMOUS may
not describe, and ``ketch acl`` lists and removes what the admin made.

``allow.everyone.if.no.acl.found=true`` lets ANONYMOUS manage the cluster (it has no ACLs)
so that the test needs no authenticated super user; the pure tables
(tests/metadata_log/test_authorizer.py) cover super users and the default off."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, NewTopic,
    ResourcePattern, ResourcePatternFilter, ResourceType,
)
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from kafka.structs import OffsetAndMetadata

from integration_helpers import STOP_TIMEOUT_S, start_cluster, wait_until

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true", "auto.create.topics.enable": "false"}
ME = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    # The controller authorizes too: the broker's own requests (ANONYMOUS as well) pass
    # because the cluster resource has no ACLs.
    c = start_cluster(tmp_path_factory, "acls", broker_props=AUTHORIZER,
                      controller_props=AUTHORIZER, controllers=1, brokers=1)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def acl(principal: str, op: ACLOperation, perm: ACLPermissionType, topic: str,
        pattern: ACLResourcePatternType = ACLResourcePatternType.LITERAL) -> ACL:
    return ACL(principal, "*", op, perm, ResourcePattern(ResourceType.TOPIC, topic, pattern))


def test_acls_from_kafka_python_are_enforced_for_anonymous(cluster) -> None:
    bootstrap = cluster.spec.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(n, 1, 1) for n in
                             ("writes-only", "reads-only", "denied", "hidden", "orders-eu")])
        created = admin.create_acls([
            acl(ME, ACLOperation.WRITE, ACLPermissionType.ALLOW, "writes-only"),
            acl(ME, ACLOperation.READ, ACLPermissionType.ALLOW, "reads-only"),
            acl(ME, ACLOperation.ALL, ACLPermissionType.ALLOW, "denied"),
            acl(ME, ACLOperation.WRITE, ACLPermissionType.DENY, "denied"),
            acl("User:bob", ACLOperation.ALL, ACLPermissionType.ALLOW, "hidden"),
            acl(ME, ACLOperation.READ, ACLPermissionType.ALLOW, "orders-",
                ACLResourcePatternType.PREFIXED),
            ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.GROUP, "billing")),
        ])
        assert len(created["succeeded"]) == 7 and not created["failed"]
        everything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                               ResourcePatternFilter(ResourceType.ANY, None,
                                                     ACLResourcePatternType.ANY))
        # The broker answers from its own image, which applies the commit a moment later.
        acls = wait_until(lambda: len(admin.describe_acls(everything)[0]) == 7
                          and admin.describe_acls(everything)[0], 10, "the ACLs on the broker")
        assert {(a.resource_pattern.resource_name, a.operation, a.permission_type) for a in acls} >= {
            ("denied", ACLOperation.WRITE, ACLPermissionType.DENY),
            ("orders-", ACLOperation.READ, ACLPermissionType.ALLOW)}
        # Metadata hides the topic ANONYMOUS may not describe; the others it may.
        topics = set(admin.list_topics())
        assert "hidden" not in topics and {"writes-only", "reads-only", "orders-eu"} <= topics
    finally:
        admin.close()

    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, max_block_ms=10_000,
                             request_timeout_ms=10_000)
    try:
        assert producer.send("writes-only", b"ok").get(timeout=10).offset == 0
        for topic in ("reads-only", "denied"):           # READ only; a DENY beating an ALLOW
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send(topic, b"no").get(timeout=10)
    finally:
        producer.close(timeout=5)

    # WRITE does not give READ: the consumer is refused the topic it just wrote to.
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        consumer.assign([TopicPartition("writes-only", 0)])
        with pytest.raises(TopicAuthorizationFailedError):
            for _ in range(50):
                consumer.poll(timeout_ms=200)
    finally:
        consumer.close()

    # Committing needs READ on the group: "billing" is bob's, so ANONYMOUS is refused (at
    # FindCoordinator already, which needs DESCRIBE on the group).
    committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="billing",
                              enable_auto_commit=False, request_timeout_ms=10_000)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            committer.commit({TopicPartition("orders-eu", 0): OffsetAndMetadata(0, "", -1)})
    finally:
        committer.close()

    def ketch_acl(*args: str) -> list[dict]:
        out = subprocess.run([sys.executable, "-m", "clients.cli", "acl", *args, "-b", bootstrap,
                              "-o", "json"], capture_output=True, text=True, timeout=60, check=True)
        return json.loads(out.stdout)
    rows = ketch_acl("list", "--topic", "orders-eu", "--resource-pattern-type", "match")
    assert [(r["name"], r["pattern_type"], r["operation"]) for r in rows] == [
        ("orders-", "PREFIXED", "READ")]
    removed = ketch_acl("remove", "--topic", "denied", "--deny-principal", ME, "--operation", "Write")
    assert [(r["name"], r["permission"]) for r in removed] == [("denied", "DENY")]
