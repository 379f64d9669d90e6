"""Ketch's own client in five steps, against a running cluster:

    ketch up --dir ./ketch-data          # in another terminal; it prints bootstrap.servers
    python3 examples/quickstart.py 127.0.0.1:PORT

Creates a topic with a config, produces keyed records (the three sending modes), reads them
back in a consumer group, shows the group's lag, and changes a config on the live topic.
"""
from __future__ import annotations

import sys
import uuid

from clients import Admin, Consumer, Producer
from clients.admin import AlterConfigOp, ConfigResource, NewTopic


def main(bootstrap: str) -> None:
    topic, group = f"quickstart-{uuid.uuid4().hex[:6]}", "quickstart"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
        print(f"created {topic}:", admin.describe_topics([topic]))

        with Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}) as producer:
            producer.send(topic, b"fire and forget", key=b"a")                 # 1. fire-and-forget
            meta = producer.send(topic, b"synchronous", key=b"b").get(timeout=10)   # 2. synchronous
            print(f"acknowledged at partition {meta.partition} offset {meta.offset}")
            for i in range(8):                                                 # 3. asynchronous
                producer.send(topic, b"record %d" % i, key=b"k%d" % i,
                              callback=lambda m, e: e and print("failed:", e))
            producer.flush()

        with Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "auto.offset.reset": "earliest", "enable.auto.commit": False}) as consumer:
            consumer.subscribe([topic])
            seen = []
            while len(seen) < 10:
                seen += consumer.poll(timeout_ms=1000)
            for r in sorted(seen, key=lambda r: (r.partition, r.offset)):
                print(f"  {r.partition}/{r.offset} {r.key!r} {r.value!r}")
            consumer.commit()

        print("group lag:", admin.consumer_group_lag(group, [topic]))
        admin.incremental_alter_configs(
            {ConfigResource.topic(topic): [AlterConfigOp("retention.ms", "3600000")]})
        described = admin.describe_configs([ConfigResource.topic(topic)])
        entry = described[ConfigResource.topic(topic)]["retention.ms"]
        print(f"retention.ms is now {entry.value} (source {entry.source.name})")
        admin.delete_topics([topic])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092")
