"""SIGKILL of a partition leader under an idempotent acks=all Ketch producer: every
acknowledged record is in the log exactly once and in send order (the issue's promise;
SCENARIOS.md N-class). Own module, own cluster: the test kills a broker."""
from __future__ import annotations

import asyncio

import pytest

from ketch_client_helpers import admin_cluster, create_topic_async, read_all
from integration_helpers import partition_states

from clients.aio import Producer
from clients.types import TopicPartition

pytestmark = [pytest.mark.process, pytest.mark.interop]

TOPIC = "failover"
PARTITIONS = 2
RECORDS = 6000
KILL_AFTER = 1500


def test_sigkill_of_the_leader_loses_and_duplicates_no_acked_record(cluster) -> None:
    boot = cluster.spec.bootstrap_servers
    acked: dict[int, tuple[int, int]] = {}     # index -> (partition, offset)
    failed: dict[int, BaseException] = {}

    async def go() -> int:
        admin = admin_cluster(boot)
        await admin.start()
        await create_topic_async(admin, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        victim, _ = await admin.leader_for(TopicPartition(TOPIC, 0))
        await admin.close()
        async with Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5,
                             "request.timeout.ms": 5000, "retry.backoff.ms": 50,
                             "batch.size": 4096}) as p:
            assert p.config["enable.idempotence"]
            futures = []

            def record(i: int):
                def done(f) -> None:
                    error = f.exception()
                    if error is None:
                        md = f.result()
                        acked[i] = (md.partition, md.offset)
                    else:
                        failed[i] = error
                return done

            kill: asyncio.Task | None = None
            for i in range(RECORDS):
                f = await p.send(TOPIC, b"%06d" % i, key=b"%d" % (i % 10))
                f.add_done_callback(record(i))
                futures.append(f)
                if i >= 1000:
                    await futures[i - 1000]        # a window of records always in flight
                if kill is None and len(acked) >= KILL_AFTER:
                    # Kill while requests are in flight, and keep sending meanwhile.
                    kill = asyncio.get_running_loop().create_task(
                        asyncio.to_thread(cluster.kill_node, victim))
            await p.flush()
            assert kill is not None
            await kill
        return victim
    victim = asyncio.run(go())
    assert not failed, f"{len(failed)} records failed, e.g. {next(iter(failed.values()))!r}"
    assert len(acked) == RECORDS
    records = read_all(boot, TOPIC, PARTITIONS, RECORDS)
    values = [int(r[3]) for r in records]
    assert len(values) == len(set(values)), "duplicates in the log"
    assert set(values) >= set(acked), "acknowledged records missing"
    for partition in range(PARTITIONS):
        in_log = [(r[1], int(r[3])) for r in records if r[0] == partition]
        assert [v for _, v in in_log] == sorted(v for _, v in in_log), "order within a key"
        assert {v: o for o, v in in_log} == {i: o for i, (p, o) in acked.items()
                                             if p == partition}
    # The kill hit the leader: partition 0 is led by another broker now.
    leader = partition_states(cluster, TOPIC)[0].leader
    assert leader not in (victim, -1)
