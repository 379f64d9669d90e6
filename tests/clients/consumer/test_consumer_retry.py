"""Retry topics and dead letters on a real cluster (issue 18): a RetryingConsumer whose
handler fails on every 10th record for good and on every 10th-plus-5 once. The failing
records pass through ``payments.retry.1`` and ``.retry.2`` no earlier than their
backoffs, the hopeless ones land in ``payments.dlq`` with their attempts and errors, the
others are handled once and committed; then ``ketch dlq list`` shows the dead letters
and ``ketch dlq replay`` re-drives them, once."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from clients._core import retry
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
    assert stats["retried"] == 2 * len(hopeless) + len(flaky) and stats["waits"] > 0

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
