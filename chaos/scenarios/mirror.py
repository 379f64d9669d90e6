"""N16 of SCENARIOS.md (issue 21): a mirror topic on a second cluster.

A source cluster (3 controllers, 3 brokers) and a destination cluster (3 controllers,
3 brokers); a cluster link on the destination and a 6-partition mirror topic of the
source's topic (RF 3 on both sides, min.insync.replicas 2). Producers write to the source;
the source partition leader of partition 0 is SIGKILLed mid-mirror (``--repeats`` times,
each brought back); then the producers stop, the mirror catches up, and:

- every partition's batches on the destination leader are byte-identical, at the same
  offsets, to the source leader's (segment files), with no gap: figure ``identical``;
- the whole source cluster is SIGKILLed, the mirror promoted, a producer writes to the
  destination; ``read_back`` on the destination then judges the whole history (source
  and destination acknowledgements): nothing acknowledged on the source is missing.
"""
from __future__ import annotations

import time

from chaos.checker import Expect
from chaos.cluster import roundtrip, wait_until
from chaos.faults import Kill, KillMany, Restart
from chaos.scenarios.base import Context, Scenario, elapsed
from chaos.scenarios.no_loss import only_retriable_errors, start_producers, stop_all, wait_acks
from chaos.workload import KetchProducer, replica_batches
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode

__all__ = ["MIRROR_SCENARIOS"]

LINK = "n16"
CLUSTER_LINK = 64
TOPIC_RESOURCE = 2
PARTITIONS = list(range(6))


def _alter(cluster, resource_type: int, name: str, configs: dict[str, str]) -> int:
    IAC = messages.IncrementalAlterConfigsRequest
    req = IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[IAC.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])])
    resp = roundtrip(cluster.port(cluster.alive_brokers()[0]), ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, req,
                     timeout_s=30)
    return resp.responses[0].error_code


def _leader_batches(cluster, topic: str, partition: int, upto: int) -> list[bytes]:
    leader = cluster.leader_of(topic, partition)
    return [b.raw for b in replica_batches(cluster.node(leader).data_dir, topic, partition)
            if b.base_offset < upto]


def n16(ctx: Context) -> None:
    topic = "n16"
    src = ctx.cluster("source")
    dst = ctx.cluster("destination")
    src.create_topic(topic, len(PARTITIONS), 3, {"min.insync.replicas": "2"})
    code = _alter(dst, CLUSTER_LINK, LINK, {"bootstrap.servers": src.bootstrap_servers,
                                            "metadata.max.age.ms": "1000"})
    ctx.check("the cluster link was created", code == ErrorCode.NONE, f"error {code}")
    code = dst.create_topic(topic, len(PARTITIONS), 3, {"min.insync.replicas": "2",
                                                        "ketch.mirror.link": LINK})
    ctx.check("the mirror topic was created", code == ErrorCode.NONE, f"error {code}")
    producers = start_producers(ctx, src, topic, PARTITIONS)
    wait_acks(ctx, 300)
    for _ in range(ctx.profile.repeats):
        victim = src.leader_of(topic, 0)
        before = src.latest_view(topic, 0)
        ctx.inject(src, Kill(victim))
        src.wait_partition(topic, 0, lambda s: s.leader not in (-1, victim)
                           and s.leader_epoch > before.leader_epoch, 30, "a new source leader")
        wait_acks(ctx, 200)
        ctx.inject(src, Restart(victim))
        src.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, f"broker {victim} back in the ISR")
        wait_acks(ctx, 100)
    stop_all(producers)
    only_retriable_errors(ctx)

    source_hw = {p: src.high_watermark(topic, p) for p in PARTITIONS}
    t0 = time.monotonic()
    try:
        wait_until(lambda: all(dst.high_watermark(topic, p) == source_hw[p] for p in PARTITIONS),
                   90, "the mirror at the source's high watermarks")
        ctx.note(f"mirror caught up {elapsed(t0)} s after the producers stopped")
    except Exception as e:      # the checks below say what is missing
        ctx.note(f"mirror not caught up: {e}")
    identical = 0
    for p in PARTITIONS:
        a = _leader_batches(src, topic, p, source_hw[p])
        b = _leader_batches(dst, topic, p, source_hw[p])
        same = a == b
        identical += same
        ctx.check(f"{topic}-{p}: {len(b)} batches byte-identical to the source's below HW "
                  f"{source_hw[p]}", same, "" if same else f"source has {len(a)} batches")
    ctx.extra["identical_partitions"] = identical

    ctx.inject(src, KillMany(tuple(src.broker_ids)))
    code = _alter(dst, TOPIC_RESOURCE, topic, {"ketch.mirror.state": "promoted"})
    ctx.check("the mirror was promoted", code == ErrorCode.NONE, f"error {code}")
    writer = KetchProducer(dst, ctx.history, topic, "after-promote", acks=-1, idempotent=True,
                           records_per_batch=5)
    ctx.closing(writer.close)
    writer.start(PARTITIONS, interval_s=0.02)
    wait_acks(ctx, 100, producer="after-promote")
    writer.stop()
    ctx.read_back(dst, topic, PARTITIONS)


MIRROR_SCENARIOS = [
    Scenario("N16", "a mirror topic on a second cluster: SIGKILL the source partition's leader "
             "mid-mirror; then stop the source cluster and promote the mirror",
             Expect(), n16),
]
