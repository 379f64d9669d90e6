"""MetadataDelta: record semantics, typed changes, refusals, batches, structural sharing."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.protocol import messages as M
from metadata_log import (
    EMPTY_IMAGE, BrokerControlledShutdown, BrokerFenced, BrokerRegistered, BrokerUnfenced,
    ConfigChange, ConfigResourceType, IsrChange, LeaderChange, LeaderRecoveryChange,
    LeaderRecoveryState, MetadataDelta, MetadataReplayError, PartitionCreated,
    ProducerIdsAllocated, Provenance, ReplicasChange, TopicCreated, TopicDeleted,
    replay_batch,
)
from tests.metadata_log.builders import (
    change, histories, image_of, partition, register, tid, topic,
)

BASE = [register(1, 10), register(2, 20), register(3, 30), topic("t", 1),
        partition(1, 0, [1, 2, 3]), partition(1, 1, [2, 3, 1])]


def base_image():
    return image_of(BASE)


def test_replay_builds_brokers_topics_and_partitions() -> None:
    image = base_image()
    assert image.provenance == Provenance(len(BASE) - 1, 1)
    assert sorted(image.cluster.brokers) == [1, 2, 3]
    assert image.cluster.brokers[2].broker_epoch == 20
    t = image.topics.get("t")
    assert t is image.topics.get_by_id(tid(1))
    p = t.partitions[0]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == \
        ((1, 2, 3), (1, 2, 3), 1, 0, 0)
    assert image.topics.partition_count() == 2


def test_leader_change_bumps_leader_and_partition_epochs() -> None:
    delta = MetadataDelta(base_image())
    delta.replay(change(1, 0, leader=2, isr=[2, 3]))
    image = delta.apply(Provenance(100, 2))
    p = image.topics.get("t").partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (2, 1, 1, (2, 3))
    assert delta.changes == [IsrChange("t", tid(1), 0, (2, 3), 1),
                             LeaderChange("t", tid(1), 0, 2, 1)]


def test_leader_unchanged_keeps_leader_epoch_but_bumps_partition_epoch() -> None:
    delta = MetadataDelta(base_image())
    delta.replay(change(1, 0, isr=[1, 2]))          # Leader defaults to -2
    p = delta.apply(Provenance(100, 2)).topics.get("t").partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (1, 0, 1, (1, 2))
    assert delta.changes == [IsrChange("t", tid(1), 0, (1, 2), 1)]


def test_same_leader_named_again_bumps_the_leader_epoch() -> None:
    # Kafka's PartitionRegistration.merge: any Leader other than -2 is a new leadership.
    delta = MetadataDelta(base_image())
    delta.replay(change(1, 0, leader=1))
    p = delta.apply(Provenance(100, 2)).topics.get("t").partitions[0]
    assert (p.leader, p.leader_epoch) == (1, 1)


def test_no_leader_and_recovery_state_changes() -> None:
    delta = MetadataDelta(base_image())
    delta.replay(change(1, 1, leader=-1))
    delta.replay(change(1, 1, leader=3, isr=[3], leader_recovery_state=1))
    p = delta.apply(Provenance(100, 2)).topics.get("t").partitions[1]
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (3, 2, 2)
    assert p.leader_recovery_state is LeaderRecoveryState.RECOVERING
    assert delta.changes[0] == LeaderChange("t", tid(1), 1, -1, 1)
    assert LeaderRecoveryChange("t", tid(1), 1, LeaderRecoveryState.RECOVERING) in delta.changes


def test_replica_change_resets_directories_and_reports_it() -> None:
    delta = MetadataDelta(base_image())
    delta.replay(change(1, 0, replicas=[1, 2, 3, 4], adding_replicas=[4]))
    p = delta.apply(Provenance(100, 2)).topics.get("t").partitions[0]
    assert p.replicas == (1, 2, 3, 4) and p.adding_replicas == (4,)
    assert delta.changes == [ReplicasChange("t", tid(1), 0, (1, 2, 3, 4), (4,), ())]


def test_broker_state_records() -> None:
    delta = MetadataDelta(base_image())
    delta.replay(M.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1))
    delta.replay(M.UnfenceBrokerRecord(id=1, epoch=10))
    delta.replay(M.FenceBrokerRecord(id=2, epoch=20))
    delta.replay(M.BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=30,
                                                  in_controlled_shutdown=1))
    delta.replay(M.UnregisterBrokerRecord(broker_id=2, broker_epoch=20))
    image = delta.apply(Provenance(100, 2))
    assert not image.cluster.brokers[1].fenced
    assert 2 not in image.cluster.brokers
    assert image.cluster.brokers[3].in_controlled_shutdown
    assert not image.cluster.is_active(3)
    assert delta.changes[:4] == [BrokerFenced(1, 10), BrokerUnfenced(1, 10), BrokerFenced(2, 20),
                                 BrokerControlledShutdown(3, 30)]


def test_reregistration_replaces_the_old_incarnation() -> None:
    delta = MetadataDelta(base_image())
    delta.replay(register(1, 50, fenced=True, incarnation=77))
    b = delta.apply(Provenance(100, 2)).cluster.brokers[1]
    assert (b.broker_epoch, b.fenced, b.incarnation_id.int) == (50, True, 77)
    assert delta.changes == [BrokerRegistered(1, 50, b.incarnation_id, True)]


def test_remove_topic_drops_partitions_configs_and_frees_the_name() -> None:
    image = image_of(BASE + [M.ConfigRecord(resource_type=2, resource_name="t",
                                            name="retention.ms", value="5")])
    assert image.configs.topic("t") == {"retention.ms": "5"}
    delta = MetadataDelta(image)
    delta.replay(M.RemoveTopicRecord(topic_id=tid(1)))
    delta.replay(topic("t", 2))
    delta.replay(partition(2, 0, [3]))
    after = delta.apply(Provenance(100, 2))
    assert after.topics.get("t").topic_id == tid(2)
    assert tid(1) not in after.topics.by_id
    assert after.configs.topic("t") == {}
    assert delta.changes[:2] == [TopicDeleted("t", tid(1)), TopicCreated("t", tid(2))]
    assert isinstance(delta.changes[2], PartitionCreated)


def test_configs_producer_ids_and_features() -> None:
    delta = MetadataDelta(base_image())
    delta.replay(M.ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas",
                                value="2"))
    delta.replay(M.ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas",
                                value=None))
    delta.replay(M.ConfigRecord(resource_type=2, resource_name="t", name="segment.bytes",
                                value="1024"))
    delta.replay(M.ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000))
    delta.replay(M.FeatureLevelRecord(name="metadata.version", feature_level=21))
    image = delta.apply(Provenance(100, 2))
    # Deleting the only key of a resource drops the resource (ConfigsImage invariant).
    assert image.configs.cluster_default() == {}
    assert all(image.configs.resources.values())
    assert image.configs.topic("t") == {"segment.bytes": "1024"}
    assert image.producer_ids.next_producer_id == 1000
    assert image.features.metadata_version == 21
    assert ConfigChange(ConfigResourceType.BROKER, "", "min.insync.replicas", None) \
        in delta.changes
    assert ProducerIdsAllocated(1, 10, 1000) in delta.changes
    delta2 = MetadataDelta(image)
    delta2.replay(M.FeatureLevelRecord(name="metadata.version", feature_level=0))
    assert delta2.apply(Provenance(101, 2)).features.levels == {}


@pytest.mark.parametrize("record, why", [
    (partition(9, 0, [1]), "unknown topic"),
    (partition(1, 0, [1]), "partition exists"),
    (partition(1, 2, [], leader=-1), "no replicas"),
    (partition(1, 2, [1, 1]), "duplicate replicas"),
    (partition(1, 2, [1, 2], isr=[3]), "isr outside replicas"),
    (partition(1, 2, [1, 2], isr=[1], leader=2), "leader outside isr"),
    (change(9, 0, leader=1), "unknown topic"),
    (change(1, 7, leader=1), "unknown partition"),
    (change(1, 0, isr=[]), "empty isr"),
    (change(1, 0, isr=[1, 4]), "isr outside replicas"),
    (change(1, 0, leader=-3), "bad leader"),
    (change(1, 0, leader_recovery_state=5), "bad recovery state"),
    (topic("t", 5), "duplicate name"),
    (topic("u", 1), "duplicate id"),
    (M.TopicRecord(name="z"), "zero topic id"),
    (register(1, 9), "older broker epoch"),
    (register(1, 10, incarnation=5), "two incarnations, one epoch"),
    (M.FenceBrokerRecord(id=1, epoch=11), "stale fence"),
    (M.UnfenceBrokerRecord(id=9, epoch=1), "unknown broker"),
    (M.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=3), "bad fenced"),
    (M.UnregisterBrokerRecord(broker_id=1, broker_epoch=3), "stale unregister"),
    (M.RemoveTopicRecord(topic_id=tid(9)), "unknown topic"),
    (M.ConfigRecord(resource_type=3, resource_name="x", name="k", value="v"), "bad type"),
    (M.ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=-5), "negative"),
    (M.FeatureLevelRecord(name="f", feature_level=-1), "negative level"),
    (M.AccessControlEntryRecord(), "zero acl id"),
    (M.AccessControlEntryRecord(id=tid(7), resource_type=2, resource_name="t", pattern_type=1,
                                principal="User:a", host="*", operation=3, permission_type=3),
     "a filter-only pattern type (ANY) stored"),
    (M.RemoveAccessControlEntryRecord(id=tid(7)), "unknown acl id"),
    (M.RegisterControllerRecord(), "not modelled"),
])
def test_contradicting_records_are_refused_without_changing_the_delta(record, why) -> None:
    image = base_image()
    delta = MetadataDelta(image)
    delta.replay(change(1, 1, isr=[2, 3]))
    before = delta.apply(Provenance(50, 1))
    with pytest.raises(MetadataReplayError):
        delta.replay(record)
    assert delta.apply(Provenance(50, 1)) == before
    assert len(delta.changes) == 1


def test_producer_ids_never_go_back() -> None:
    image = image_of(BASE + [M.ProducerIdsRecord(broker_id=1, broker_epoch=10,
                                                 next_producer_id=2000)])
    for next_id in (2000, 1000):
        with pytest.raises(MetadataReplayError):
            MetadataDelta(image).replay(M.ProducerIdsRecord(broker_id=1, broker_epoch=10,
                                                            next_producer_id=next_id))


def test_replay_batch_is_all_or_nothing() -> None:
    image = base_image()
    good = [topic("u", 2), partition(2, 0, [1])]
    outcome = replay_batch(image, good + [topic("t", 3)], Provenance(10, 2))
    assert outcome.error is not None and "already exists" in str(outcome.error)
    assert outcome.changes == ()
    assert outcome.image.topics is image.topics
    assert outcome.image.provenance == Provenance(10, 2)
    ok = replay_batch(image, good, Provenance(10, 2))
    assert ok.error is None and ok.image.topics.get("u") is not None
    assert [type(c) for c in ok.changes] == [TopicCreated, PartitionCreated]


def test_a_duplicated_create_topic_batch_is_skipped() -> None:
    """The Raft retry case: the same batch committed twice applies once."""
    batch = [topic("u", 2), partition(2, 0, [1]), partition(2, 1, [2])]
    first = replay_batch(base_image(), batch, Provenance(10, 2))
    second = replay_batch(first.image, batch, Provenance(13, 2))
    assert second.error is not None
    assert second.image.topics == first.image.topics


def test_apply_shares_what_did_not_change() -> None:
    records = [register(b, b) for b in range(3)]
    for n in range(20):
        records.append(topic(f"t{n}", n))
        records += [partition(n, i, [i % 3]) for i in range(10)]
    image = image_of(records)
    delta = MetadataDelta(image)
    delta.replay(change(7, 3, leader=-1))
    delta.partition(tid(8), 0)                   # a look is not a change
    after = delta.apply(Provenance(image.provenance.offset + 1, 1))
    assert after.cluster is image.cluster and after.configs is image.configs
    changed = after.topics.get("t7")
    assert changed is not image.topics.get("t7")
    assert changed.partitions[3].leader == -1
    for i in range(10):
        if i != 3:
            assert changed.partitions[i] is image.topics.get("t7").partitions[i]
    for n in range(20):
        if n != 7:
            assert after.topics.get(f"t{n}") is image.topics.get(f"t{n}")
    # the old image is untouched
    assert image.topics.get("t7").partitions[3].leader == 0


def test_images_are_read_only() -> None:
    image = base_image()
    with pytest.raises(TypeError):
        image.topics.by_name["x"] = None          # type: ignore[index]
    with pytest.raises(TypeError):
        image.topics.get("t").partitions[5] = None  # type: ignore[index]
    with pytest.raises(AttributeError):
        image.provenance = Provenance(1, 1)       # type: ignore[misc]


def test_100k_partitions_one_change_copies_one_topic() -> None:
    """100 topics x 1000 partitions, then one partition changes."""
    records = [register(b, b) for b in range(3)]
    for n in range(100):
        records.append(topic(f"t{n}", n))
        for i in range(1000):
            records.append(partition(n, i, [i % 3, (i + 1) % 3, (i + 2) % 3]))
    image = image_of(records)
    assert image.topics.partition_count() == 100_000
    delta = MetadataDelta(image)
    delta.replay(change(42, 999, isr=[0, 1], leader=-2))
    after = delta.apply(Provenance(image.provenance.offset + 1, 1))
    assert after.topics.partition(tid(42), 999).isr == (0, 1)
    assert after.topics.partition(tid(42), 999).partition_epoch == 1
    shared = sum(after.topics.by_id[t] is image.topics.by_id[t] for t in image.topics.by_id)
    assert shared == 99
    assert after.topics.by_id[tid(42)].partitions[0] is image.topics.by_id[tid(42)].partitions[0]
    assert image.topics.partition(tid(42), 999).isr == (0, 1, 2)


def test_one_topic_of_100k_partitions() -> None:
    records = [register(b, b) for b in range(3)] + [topic("big", 1)]
    records += [partition(1, i, [i % 3]) for i in range(100_000)]
    image = image_of(records)
    delta = MetadataDelta(image)
    delta.replay(change(1, 54_321, leader=-1))
    after = delta.apply(Provenance(image.provenance.offset + 1, 1))
    t = after.topics.get("big")
    assert len(t.partitions) == 100_000
    assert t.partitions[54_321].leader == -1 and t.partitions[54_320].leader == 54_320 % 3
    assert t.partitions[0] is image.topics.get("big").partitions[0]


@given(records=histories(), cuts=st.lists(st.integers(0, 200), max_size=4))
def test_splitting_a_history_into_deltas_does_not_change_the_image(records, cuts) -> None:
    """apply is associative: one delta over everything == a chain of smaller deltas."""
    whole = image_of(records)
    image = EMPTY_IMAGE
    bounds = sorted({min(c, len(records)) for c in cuts} | {0, len(records)})
    for start, end in zip(bounds, bounds[1:]):
        delta = MetadataDelta(image)
        for r in records[start:end]:
            delta.replay(r)
        image = delta.apply(Provenance(end - 1, 1))
    assert image == whole


def test_equal_replica_sets_and_isrs_are_one_shared_tuple() -> None:
    # Memory per partition at 100k: 3 brokers make 6 replica orders, not 100k tuples.
    image = image_of([*BASE, partition(1, 2, [1, 2, 3])])
    ps = image.topics.get("t").partitions
    assert ps[2].replicas is ps[0].replicas and ps[0].isr is ps[0].replicas
    delta = MetadataDelta(image)
    delta.replay(change(1, 1, isr=[1, 2, 3]))
    assert delta.apply(Provenance(100, 2)).topics.get("t").partitions[1].isr is ps[0].replicas
