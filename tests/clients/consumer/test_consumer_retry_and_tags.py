"""Issue 18 on a real cluster (one module, one cluster).

Retry topics and dead letters: a RetryingConsumer whose
handler fails on every 10th record for good and on every 10th-plus-5 once. The failing
records pass through ``payments.retry.1`` and ``.retry.2`` no earlier than their
backoffs, the hopeless ones land in ``payments.dlq`` with their attempts and errors, the
others are handled once and committed; then ``ketch dlq list`` shows the dead letters
and ``ketch dlq replay`` re-drives them, once.

Tag filtering: a Ketch consumer that asks for one tag gets exactly the records carrying it
while kafka-python gets all; the broker itself drops the others (a raw Fetch with and
without Ketch's tag field compares the bytes sent)."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from clients._core.retry import RetryPolicy
from clients.aio.retry import RetryingConsumer
from clients.types import TopicPartition as TP
from groups_helpers import committed_offsets, create_topic, produce

pytestmark = [pytest.mark.process]

BACKOFFS_MS = (300, 600)


def ketch(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clients.cli", *args, "--bootstrap", bootstrap],
                          capture_output=True, text=True, timeout=120)


def test_failed_records_go_through_the_retry_topics_to_the_dead_letter_topic(cluster, bootstrap) -> None:
    create_topic(cluster, "payments", partitions=3)
    produced = produce(bootstrap, "payments", per_partition=20, partitions=3, tag="pay")
    values = sorted(produced.values())
    number = {v: i for i, v in enumerate(values)}       # every 10th fails for good, every 10th+5 once
    hopeless = {v for v in values if number[v] % 10 == 0}
    flaky = {v for v in values if number[v] % 10 == 5}
    attempts: dict[str, list[tuple[str, float]]] = {}

    def handle(record) -> None:
        v = record.value.decode()
        attempts.setdefault(v, []).append((record.topic, time.time()))
        if v in hopeless or (v in flaky and record.topic == "payments"):
            raise ValueError(f"cannot pay {v}")

    async def run() -> dict:
        config = {"bootstrap.servers": bootstrap, "group.id": "payer", "fetch.max.wait.ms": 100,
                  "auto.offset.reset": "earliest"}
        async with RetryingConsumer(config, "payments", handle, RetryPolicy(BACKOFFS_MS)) as rc:
            deadline = time.monotonic() + 90
            while rc.stats.dead < len(hopeless) or rc.stats.handled < len(values) - len(hopeless):
                assert time.monotonic() < deadline, f"stuck: {rc.stats.as_dict()}"
                await rc.process(200)
            return rc.stats.as_dict()
    stats = asyncio.run(run())
    assert stats["handled"] == len(values) - len(hopeless) and stats["dead"] == len(hopeless)
    # waits == 0: the broker parks the forwarded records until their ketch.deliver.at
    # (delayed delivery), so the consumer never meets one early and never pauses for it.
    assert stats["retried"] == 2 * len(hopeless) + len(flaky) and stats["waits"] == 0

    for v in values:
        seen = [topic for topic, _ in attempts[v]]
        if v in hopeless:
            assert seen == ["payments", "payments.retry.1", "payments.retry.2"], (v, seen)
            times = [t for _, t in attempts[v]]
            # Handled no earlier than due (the due time is set when the failure is routed,
            # a little after the failed attempt began).
            assert times[1] - times[0] >= BACKOFFS_MS[0] / 1000 - 0.05
            assert times[2] - times[1] >= BACKOFFS_MS[1] / 1000 - 0.05
        elif v in flaky:
            assert seen == ["payments", "payments.retry.1"], (v, seen)
        else:
            assert seen == ["payments"], (v, seen)      # handled once

    for topic, n in (("payments", 20), ("payments.retry.1", None), ("payments.retry.2", None)):
        done = committed_offsets(cluster, "payer", topic, 3)
        if n is not None:
            assert done == {p: n for p in range(3)}

    listed = ketch(bootstrap, "dlq", "list", "payments", "--output", "json")
    assert listed.returncode == 0, listed.stderr
    letters = json.loads(listed.stdout)
    assert sorted(d["value"] for d in letters) == sorted(hopeless)
    for d in letters:
        p, o = next(k for k, v in produced.items() if v == d["value"])
        assert (d["original_topic"], d["original_partition"], d["original_offset"]) == ("payments", p, o)
        assert d["attempts"] == 3 and d["error"] == f"ValueError: cannot pay {d['value']}"

    dry = ketch(bootstrap, "dlq", "replay", "payments", "--dry-run", "--output", "json")
    assert dry.returncode == 0 and json.loads(dry.stdout)["replayed"] == len(hopeless), dry.stderr
    done = ketch(bootstrap, "dlq", "replay", "payments", "--output", "json")
    assert done.returncode == 0 and json.loads(done.stdout)["replayed"] == len(hopeless), done.stderr
    again = ketch(bootstrap, "dlq", "replay", "payments", "--output", "json")
    assert again.returncode == 0 and json.loads(again.stdout)["replayed"] == 0, again.stderr

    from clients import Consumer
    with Consumer({"bootstrap.servers": bootstrap, "fetch.max.wait.ms": 100}) as c:
        tps = [TP("payments", p) for p in range(3)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 20)
        back: list = []
        deadline = time.monotonic() + 30
        while len(back) < len(hopeless) and time.monotonic() < deadline:
            back += c.poll(500)
    assert sorted(r.value.decode() for r in back) == sorted(hopeless)
    for r in back:
        assert not any(k.startswith("ketch.") for k, _ in r.headers)    # starts over
        assert (r.partition, r.offset >= 20) == (next(k for k, v in produced.items()
                                                      if v == r.value.decode())[0], True)
    missing = ketch(bootstrap, "dlq", "list", "no-such-topic")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1, missing.stderr


def test_a_tag_filter_reads_only_tagged_records_and_the_broker_sends_less(cluster, bootstrap) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    from clients import Consumer
    from clients.protocol import ApiKey, messages
    from clients.protocol.tag_filter import FETCH_TAG_FILTER, encode_tag_filter
    from clients.records import decode_batches
    from clients.records.tags import TAG_HEADER
    from integration_helpers import roundtrip
    create_topic(cluster, "events", partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50,
                         "batch.num.messages": 100})
    for i in range(1000):
        tag = "vip" if i % 100 == 7 else ("std" if i % 2 else None)
        producer.produce("events", value=b"%04d" % i + b"." * 96, partition=0,
                         headers=[(TAG_HEADER, tag.encode())] if tag else None)
    assert producer.flush(30) == 0
    vip = [b"%04d" % i for i in range(1000) if i % 100 == 7]

    with Consumer({"bootstrap.servers": bootstrap, "fetch.max.wait.ms": 100}) as c:
        c.set_tag_filter("events", ["vip"])
        c.assign([TP("events", 0)])
        c.seek(TP("events", 0), 0)
        got: list = []
        deadline = time.monotonic() + 30
        while c.position(TP("events", 0)) < 1000:
            assert time.monotonic() < deadline, f"position {c.position(TP('events', 0))}"
            got += c.poll(300)
    assert [r.value[:4] for r in got] == vip
    assert all((TAG_HEADER, b"vip") in r.headers for r in got)

    everyone = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        everyone.assign([KTP("events", 0)])
        everyone.seek_to_beginning()
        assert len(list(everyone)) == 1000
    finally:
        everyone.close()

    # The broker's part: the same Fetch with and without the field.
    leader = cluster.spec.node(_leader(bootstrap))
    cls = messages.FetchRequest

    def fetch(filtered: bool) -> bytes:
        extra = ((FETCH_TAG_FILTER, encode_tag_filter({"events": frozenset({b"vip"})})),) if filtered else ()
        req = cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, unknown_tagged_fields=extra,
                  topics=[cls.FetchTopic(topic="events", partitions=[cls.FetchTopic.FetchPartition(
                      partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                      partition_max_bytes=8 << 20)])])
        resp = roundtrip(leader.port, ApiKey.FETCH, 12, req)
        return bytes(resp.responses[0].partitions[0].records)
    whole, filtered = fetch(False), fetch(True)
    assert sum(len(b.records) for b in decode_batches(whole)) == 1000
    assert [r.value[:4] for b in decode_batches(filtered) for r in b.records] == vip
    assert decode_batches(filtered)[-1].header.last_offset == 999
    assert len(filtered) < 0.1 * len(whole), (len(filtered), len(whole))


def _leader(bootstrap: str) -> int:
    from clients import Admin
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return admin.describe_topics(["events"])["events"].partitions[0].leader
