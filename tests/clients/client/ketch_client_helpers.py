"""Helpers for the tests of Ketch's own client: a real cluster per module, topics created
through Ketch's `Cluster` (CreateTopics to the controller), and a reader that uses an
independent client (confluent-kafka) so the producer is checked by someone else's eyes."""
from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "integration"))

from integration_helpers import (  # noqa: E402
    FAST_BROKER, FAST_CONTROLLER, STOP_TIMEOUT_S, start_cluster, wait_until,
)

from clients._core.config import parse_config  # noqa: E402
from clients.aio import Cluster  # noqa: E402
from clients.errors import for_code  # noqa: E402
from clients.protocol import ApiKey, messages  # noqa: E402

__all__ = ["FAST_BROKER", "FAST_CONTROLLER", "STOP_TIMEOUT_S", "start_cluster", "wait_until",
           "create_topic", "read_all", "admin_cluster"]


def admin_cluster(bootstrap: str, **props: Any) -> Cluster:
    return Cluster(parse_config("admin", {"bootstrap.servers": bootstrap, **props}))


async def create_topic_async(cluster: Cluster, name: str, partitions: int, replication_factor: int,
                             configs: dict[str, str] | None = None) -> None:
    T = messages.CreateTopicsRequest.CreatableTopic
    C = T.CreatableTopicConfig
    body = messages.CreateTopicsRequest(topics=[T(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        configs=[C(name=k, value=v) for k, v in (configs or {}).items()])], timeout_ms=30000)
    for _ in range(50):
        _, resp = await cluster.request(await cluster.controller(), ApiKey.CREATE_TOPICS, body,
                                        versions=(2, 7))
        (t,) = resp.topics
        if t.error_code == 0:
            break
        err = for_code(t.error_code)(t.error_message)
        if not err.retriable:
            raise err
        await asyncio.sleep(0.2)
    # Until every partition has a leader in the metadata view.
    for _ in range(200):
        meta = await cluster.refresh_metadata([name])
        if len(meta.available_partitions(name)) == partitions:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"topic {name} has no leaders after creation")


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                 configs: dict[str, str] | None = None) -> None:
    async def go() -> None:
        c = admin_cluster(bootstrap)
        await c.start()
        try:
            await create_topic_async(c, name, partitions, replication_factor, configs)
        finally:
            await c.close()
    asyncio.run(go())


def read_all(bootstrap: str, topic: str, partitions: int, expected: int,
             timeout_s: float = 60.0) -> list[Any]:
    """Every record of the topic, read from the beginning with confluent-kafka (assign,
    no group): a list of (partition, offset, key, value, headers, timestamp)."""
    import time

    from confluent_kafka import Consumer, TopicPartition as CTP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ketch-client-tests-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": False})
    try:
        consumer.assign([CTP(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error():
                    raise AssertionError(f"reader: {m.error()}")
                out.append((m.partition(), m.offset(), m.key(), m.value(),
                            tuple(m.headers() or ()), m.timestamp()[1]))
        # Anything beyond `expected` (duplicates) must show too: one more short poll.
        for m in consumer.consume(1000, 1.0):
            if not m.error():
                out.append((m.partition(), m.offset(), m.key(), m.value(),
                            tuple(m.headers() or ()), m.timestamp()[1]))
        return out
    finally:
        consumer.close()
