"""The first things a Kafka user does against `ketch up`."""
from __future__ import annotations

import uuid

import pytest

pytestmark = [pytest.mark.process, pytest.mark.interop]


def test_kafka_python_creates_produces_and_reads_back(cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.spec.bootstrap_servers, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.spec.bootstrap_servers, acks="all")
    futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                             headers=[("h", b"x")], partition=i % 6) for i in range(60)]
    producer.flush(30)
    offsets = [f.get(timeout=30) for f in futures]
    producer.close()
    assert len(offsets) == 60
    consumer = KafkaConsumer(bootstrap_servers=cluster.spec.bootstrap_servers,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10000)
    consumer.assign([TopicPartition(topic, p) for p in range(6)])
    seen = {}
    for msg in consumer:
        seen[(msg.partition, msg.offset)] = (msg.key, msg.value, msg.headers)
        if len(seen) == 60:
            break
    consumer.close()
    assert len(seen) == 60
    assert seen[(0, 0)] == (b"k0", b"v0", [("h", b"x")])
