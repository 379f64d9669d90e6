"""The link manager's decisions (broker/link_manager/core.py) as tables: destination
metadata and a source snapshot in, actions out."""
from __future__ import annotations

import pytest

from broker.link_manager.core import (
    AddPartitions, AlterMirrorConfigs, CommitGroupOffsets, CreateMirrorTopic, DestinationGroup,
    LinkSchedule, SourceMetadata, SourceTopic, StopMirror, link_manager_broker, plan_offsets,
    plan_topics,
)
from clients.protocol import messages as M
from clients.types import TopicPartition as TP
from metadata_log import ConfigResourceType, MetadataImage
from metadata_log.cluster_links import ClusterLink, parse_link
from quorum.controller import ControllerResult
from tests.quorum.controller.harness import Harness

MIRROR = {"ketch.mirror.link": "east", "ketch.mirror.source.topic": None, "ketch.mirror.state": None}


def link(**configs: str) -> ClusterLink:
    parsed, problem = parse_link("east", {"bootstrap.servers": "src:9092", "topics": "orders,audit-.*",
                                          **configs})
    assert parsed is not None, problem
    return parsed


def destination(topics: dict[str, tuple[int, dict[str, str]]]) -> MetadataImage:
    """A destination image with ``topics`` (name -> (partitions, configs)). The configs go
    in as plain records: the ketch.mirror.* definitions belong to the mirror data path."""
    h = Harness()
    h.start_broker(1)
    for name, (partitions, configs) in topics.items():
        h.create_topic(name, partitions=partitions)
        h.commit(ControllerResult(tuple(
            M.ConfigRecord(resource_type=int(ConfigResourceType.TOPIC), resource_name=name,
                           name=k, value=v) for k, v in configs.items()), None))
    return h.image


def mirror(state: str | None = None, link_name: str = "east", source: str | None = None,
           **configs: str) -> dict[str, str]:
    out = {"ketch.mirror.link": link_name, **configs}
    if state is not None:
        out["ketch.mirror.state"] = state
    if source is not None:
        out["ketch.mirror.source.topic"] = source
    return out


def src(**topics: int | tuple[int, dict[str, str]]) -> SourceMetadata:
    out = {}
    for name, spec in topics.items():
        name = name.replace("_", "-")
        out[name] = SourceTopic(spec) if isinstance(spec, int) else SourceTopic(*spec)
    return SourceMetadata(out)


ACTIVE_CONFIGS = {"ketch.mirror.link": "east", "ketch.mirror.source.topic": "orders",
                  "ketch.mirror.state": "active"}

TOPIC_CASES = [
    ("a matching source topic is created as a mirror with its partitions and configs",
     {}, src(orders=(6, {"retention.ms": "1000", "min.insync.replicas": "2"})),
     [CreateMirrorTopic("orders", 6, {"retention.ms": "1000", **ACTIVE_CONFIGS})]),
    ("regexes match in full; unmatched and internal topics are not mirrored",
     {}, src(audit_eu=1, orders2=1, __consumer_offsets=50, payments=3),
     [CreateMirrorTopic("audit-eu", 1, {**ACTIVE_CONFIGS, "ketch.mirror.source.topic": "audit-eu"})]),
    ("an up-to-date mirror needs nothing",
     {"orders": (6, mirror())}, src(orders=6), []),
    ("partitions added on the source are added to the mirror",
     {"orders": (3, mirror())}, src(orders=6), [AddPartitions("orders", 6)]),
    ("a source topic gone stops its active mirror, nothing is deleted",
     {"orders": (3, mirror())}, src(),
     [StopMirror("orders", "source topic orders no longer exists on link east's cluster")]),
    ("a stopped or promoted mirror is left alone, even when its source comes back",
     {"orders": (3, mirror("stopped")), "audit-x": (1, mirror("promoted"))},
     src(orders=6, audit_x=(2, {"retention.ms": "5"})), []),
    ("a normal destination topic of the same name is not touched",
     {"orders": (1, {})}, src(orders=6), []),
    ("another link's mirror is not this link's business",
     {"orders": (1, mirror(link_name="west"))}, src(), []),
    ("a mirror keeps following its source after the filter stops matching it",
     {"legacy": (2, mirror())}, src(legacy=2), []),
    ("configs are synced: changed set, removed deleted, excluded and mirror keys kept",
     {"orders": (1, mirror(**{"retention.ms": "1", "cleanup.policy": "compact",
                               "min.insync.replicas": "2"}))},
     src(orders=(1, {"retention.ms": "2", "segment.bytes": "1048576", "min.insync.replicas": "3",
                     "ketch.mirror.link": "other"})),
     [AlterMirrorConfigs("orders", {"retention.ms": "2", "segment.bytes": "1048576"},
                         ("cleanup.policy",))]),
    ("configs not read this round are not synced",
     {"orders": (1, mirror(**{"retention.ms": "1"}))}, src(orders=1), []),
    ("a mirror under another name follows its source topic",
     {"orders-dr": (2, mirror(source="orders"))}, src(orders=4), [AddPartitions("orders-dr", 4)]),
]


@pytest.mark.parametrize("why, topics, source, expected", TOPIC_CASES, ids=[c[0] for c in TOPIC_CASES])
def test_plan_topics(why, topics, source, expected) -> None:
    assert plan_topics(destination(topics), link(), source) == expected


OFFSETS_IMAGE = {"orders": (2, mirror()), "audit-x": (1, mirror("promoted")), "plain": (1, {})}
HW = {TP("orders", 0): 100, TP("orders", 1): 50, TP("audit-x", 0): 10, TP("plain", 0): 10}
SYNC = {"consumer.offset.sync.enable": "true", "consumer.offset.sync.groups": "app-.*"}

OFFSET_CASES = [
    ("a group without a destination twin gets the source's offsets",
     {"app-1": {TP("orders", 0): 40, TP("orders", 1): 20}}, {},
     [CommitGroupOffsets("app-1", {TP("orders", 0): 40, TP("orders", 1): 20})]),
    ("never past the mirror's high watermark",
     {"app-1": {TP("orders", 0): 140}}, {}, [CommitGroupOffsets("app-1", {TP("orders", 0): 100})]),
    ("a group with members on the destination is left alone",
     {"app-1": {TP("orders", 0): 40}}, {"app-1": DestinationGroup("Stable")}, []),
    ("a rebalancing group is left alone too",
     {"app-1": {TP("orders", 0): 40}}, {"app-1": DestinationGroup("PreparingRebalance")}, []),
    ("an empty group is synced, never backwards",
     {"app-1": {TP("orders", 0): 40, TP("orders", 1): 20}},
     {"app-1": DestinationGroup("Empty", {TP("orders", 0): 60, TP("orders", 1): 10})},
     [CommitGroupOffsets("app-1", {TP("orders", 1): 20})]),
    ("nothing new: nothing committed",
     {"app-1": {TP("orders", 0): 40}}, {"app-1": DestinationGroup("Empty", {TP("orders", 0): 40})}, []),
    ("groups not matching, promoted mirrors and normal topics are not synced",
     {"other": {TP("orders", 0): 1}, "app-2": {TP("audit-x", 0): 5, TP("plain", 0): 5}}, {}, []),
    ("a partition whose high watermark is unknown is skipped",
     {"app-1": {TP("orders", 0): 5, TP("orders", 7): 5}}, {},
     [CommitGroupOffsets("app-1", {TP("orders", 0): 5})]),
]


@pytest.mark.parametrize("why, source_offsets, groups, expected", OFFSET_CASES,
                         ids=[c[0] for c in OFFSET_CASES])
def test_plan_offsets(why, source_offsets, groups, expected) -> None:
    image = destination(OFFSETS_IMAGE)
    assert plan_offsets(image, link(**SYNC), source_offsets, groups, HW) == expected


def test_offsets_are_not_synced_when_the_link_does_not_enable_it() -> None:
    image = destination(OFFSETS_IMAGE)
    assert plan_offsets(image, link(**{"consumer.offset.sync.groups": ".*"}),
                        {"app-1": {TP("orders", 0): 5}}, {}, HW) == []


def test_the_lowest_active_broker_runs_the_manager() -> None:
    h = Harness()
    assert link_manager_broker(h.image) is None
    for b in (3, 2, 5):
        h.start_broker(b)
    assert link_manager_broker(h.image) == 2
    h.heartbeat(2, want_fence=True)
    h.poll()
    assert link_manager_broker(h.image) == 3


def test_schedule_runs_each_job_once_per_period() -> None:
    east = link(**{"metadata.max.age.ms": "1000", "topic.config.sync.ms": "3000",
                   "consumer.offset.sync.enable": "true", "consumer.offset.sync.ms": "500"})
    s = LinkSchedule()
    s.retain({"east": east})
    assert s.metadata_due("east", 0) and s.configs_due("east", 0) and s.offsets_due("east", 0)
    s.ran_metadata(east, 0, with_configs=True)
    s.ran_offsets(east, 0)
    assert s.poll({"east": east}, 0) == 500
    assert not s.metadata_due("east", 999) and s.metadata_due("east", 1000)
    s.ran_metadata(east, 1000, with_configs=False)
    assert not s.configs_due("east", 2999) and s.configs_due("east", 3000)
    s.retain({})
    assert s.poll({}, 0) == 60_000
