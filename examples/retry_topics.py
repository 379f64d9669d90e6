"""Retry topics and a dead-letter topic with Ketch's RetryingConsumer:

    ketch up --dir ./ketch-data          # in another terminal; it prints bootstrap.servers
    python3 examples/retry_topics.py 127.0.0.1:PORT
    ketch dlq list payments-XXXX         # the dead letters it left
    ketch dlq replay payments-XXXX       # and back into the topic

Writes 30 payments; the handler rejects amounts above 900 for good and fails once, as a
flaky downstream would, on every 7th record. The flaky ones succeed from
``<topic>.retry.1`` a second later; the rejected ones reach ``<topic>.dlq`` after two
retries (1 s, then 3 s).
"""
from __future__ import annotations

import asyncio
import sys
import uuid

from clients import Admin, Producer
from clients.admin import NewTopic
from clients.aio import RetryingConsumer, RetryPolicy


def main(bootstrap: str) -> None:
    topic = f"payments-{uuid.uuid4().hex[:4]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])
    with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
        for i in range(30):
            producer.send(topic, str(i * 37 % 1000).encode(), key=f"order-{i}".encode())
    seen: set[bytes] = set()

    def pay(record) -> None:
        amount = int(record.value)
        if amount > 900:
            raise ValueError(f"amount {amount} above the limit")
        if record.offset % 7 == 0 and record.key not in seen:
            seen.add(record.key)
            raise ConnectionError("payment service busy")
        print(f"paid {amount} for {record.key.decode()} (from {record.topic})")

    async def consume() -> None:
        config = {"bootstrap.servers": bootstrap, "group.id": f"{topic}-payer",
                  "auto.offset.reset": "earliest"}
        async with RetryingConsumer(config, topic, pay, RetryPolicy((1000, 3000))) as rc:
            while rc.stats.handled + rc.stats.dead < 30:
                await rc.process()
            print(f"done: {rc.stats.as_dict()}; see `ketch dlq list {topic}`")
    asyncio.run(consume())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092")
