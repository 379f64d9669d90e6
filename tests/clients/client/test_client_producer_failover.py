"""A partition leader dies or steps down under an idempotent acks=all Ketch producer:
every acknowledged record is in the log exactly once, in send order, at the offset it
was acknowledged with (the issue's promise). Own module, own cluster: the tests stop
brokers. SIGKILL: in-flight requests break (NETWORK_EXCEPTION retries after metadata
refreshes). SIGTERM: a controlled shutdown moves leadership first (NOT_LEADER_OR_FOLLOWER
retries)."""
from __future__ import annotations

import asyncio
import signal

import pytest

from integration_helpers import partition_states
from ketch_client_helpers import admin_cluster, create_topic_async, read_all

from clients.aio import Producer
from clients.types import TopicPartition

pytestmark = [pytest.mark.process, pytest.mark.interop]

PARTITIONS = 2
RECORDS = 6000
STOP_AFTER = 1500


def _produce_through_a_stop(cluster, topic: str, how: int) -> tuple[dict, dict, int, dict]:
    """Send RECORDS keyed records; once STOP_AFTER are acked, stop partition 0's leader
    with signal `how` while requests are in flight, and keep sending."""
    boot = cluster.spec.bootstrap_servers
    acked: dict[int, tuple[int, int]] = {}     # index -> (partition, offset)
    failed: dict[int, BaseException] = {}

    async def go() -> tuple[int, dict]:
        admin = admin_cluster(boot)
        await admin.start()
        await create_topic_async(admin, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
        victim, _ = await admin.leader_for(TopicPartition(topic, 0))
        await admin.close()
        async with Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5,
                             "request.timeout.ms": 5000, "retry.backoff.ms": 50,
                             "batch.size": 4096}) as p:
            assert p.config["enable.idempotence"]

            def record(i: int):
                def done(f) -> None:
                    error = f.exception()
                    if error is None:
                        md = f.result()
                        acked[i] = (md.partition, md.offset)
                    else:
                        failed[i] = error
                return done

            futures = []
            stop: asyncio.Task | None = None
            for i in range(RECORDS):
                f = await p.send(topic, b"%06d" % i, key=b"%d" % (i % 10))
                f.add_done_callback(record(i))
                futures.append(f)
                if i >= 1000:
                    await futures[i - 1000]        # a window of records always in flight
                if stop is None and len(acked) >= STOP_AFTER:
                    stop = asyncio.get_running_loop().create_task(asyncio.to_thread(
                        cluster.stop_node, victim, 30, how))
            await p.flush()
            assert stop is not None
            await stop
            return victim, dict(p.metrics["retries_by_error"])
    victim, retries = asyncio.run(go())
    return acked, failed, victim, retries


def _check_log(boot: str, topic: str, acked: dict, failed: dict) -> None:
    assert not failed, f"{len(failed)} records failed, e.g. {next(iter(failed.values()))!r}"
    assert len(acked) == RECORDS
    records = read_all(boot, topic, PARTITIONS, RECORDS)
    values = [int(r[3]) for r in records]
    assert len(values) == len(set(values)), "duplicates in the log"
    assert set(values) >= set(acked), "acknowledged records missing"
    for partition in range(PARTITIONS):
        in_log = [(r[1], int(r[3])) for r in records if r[0] == partition]
        assert [v for _, v in in_log] == sorted(v for _, v in in_log), "send order"
        assert {v: o for o, v in in_log} == {i: o for i, (p, o) in acked.items()
                                             if p == partition}


def test_sigkill_of_the_leader_loses_and_duplicates_no_acked_record(cluster) -> None:
    acked, failed, victim, retries = _produce_through_a_stop(cluster, "failover-kill",
                                                             signal.SIGKILL)
    _check_log(cluster.spec.bootstrap_servers, "failover-kill", acked, failed)
    assert partition_states(cluster, "failover-kill")[0].leader not in (victim, -1)
    assert retries, "the kill broke no request in flight: nothing was tested"
    cluster.start_node(victim)               # for the next test: three brokers again
    cluster.wait_until_ready(60)


def test_controlled_shutdown_of_the_leader_loses_and_duplicates_no_acked_record(cluster) -> None:
    acked, failed, victim, retries = _produce_through_a_stop(cluster, "failover-term",
                                                             signal.SIGTERM)
    _check_log(cluster.spec.bootstrap_servers, "failover-term", acked, failed)
    assert partition_states(cluster, "failover-term")[0].leader not in (victim, -1)
    assert retries, "the shutdown broke no request in flight: nothing was tested"
    cluster.start_node(victim)
    cluster.wait_until_ready(60)


def test_records_to_a_stuck_leader_fail_after_delivery_timeout(cluster) -> None:
    """Retries go on within delivery.timeout.ms, and then the records fail with a timeout
    (Kafka's rule: no record waits forever, none fails before its time)."""
    boot = cluster.spec.bootstrap_servers

    async def go() -> None:
        admin = admin_cluster(boot)
        await admin.start()
        await create_topic_async(admin, "stuck", 1, 1)
        leader, _ = await admin.leader_for(TopicPartition("stuck", 0))
        await admin.close()
        async with Producer({"bootstrap.servers": boot, "linger.ms": 0,
                             "request.timeout.ms": 1000, "delivery.timeout.ms": 3000,
                             "retry.backoff.ms": 50}) as p:
            await p.send_and_wait("stuck", b"before")
            cluster.signal_node(leader, signal.SIGSTOP)
            try:
                futures = [await p.send("stuck", b"r%d" % i) for i in range(10)]
                for f in futures:
                    with pytest.raises(TimeoutError):
                        await f
                assert p.metrics["record-error-total"] == 10
            finally:
                cluster.signal_node(leader, signal.SIGCONT)
    asyncio.run(go())
    cluster.wait_until_ready(60)
