"""Record builders and a hypothesis strategy for valid metadata record histories."""
from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from clients.protocol import messages as M
from metadata_log import EMPTY_IMAGE, MetadataDelta, MetadataImage, Provenance


def tid(n: int) -> uuid.UUID:
    return uuid.UUID(int=(n << 64) | 0x4000_0000_0000_0001)


def register(broker_id: int, epoch: int = 1, rack: str | None = None, fenced: bool = False,
             incarnation: int | None = None) -> Any:
    return M.RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=incarnation or broker_id * 1000 + epoch),
        broker_epoch=epoch, rack=rack, fenced=fenced,
        end_points=[M.RegisterBrokerRecord.BrokerEndpoint(
            name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id, security_protocol=0)])


def topic(name: str, n: int) -> Any:
    return M.TopicRecord(name=name, topic_id=tid(n))


def partition(topic_n: int, index: int, replicas: list[int], isr: list[int] | None = None,
              leader: int | None = None, leader_epoch: int = 0,
              partition_epoch: int = 0) -> Any:
    isr = list(replicas) if isr is None else isr
    return M.PartitionRecord(partition_id=index, topic_id=tid(topic_n), replicas=replicas,
                             isr=isr, leader=(isr[0] if isr else -1) if leader is None else leader,
                             leader_epoch=leader_epoch, partition_epoch=partition_epoch)


def change(topic_n: int, index: int, **kw: Any) -> Any:
    return M.PartitionChangeRecord(partition_id=index, topic_id=tid(topic_n), **kw)


def image_of(records: list[Any], offset: int | None = None, base: MetadataImage = EMPTY_IMAGE
             ) -> MetadataImage:
    delta = MetadataDelta(base)
    for r in records:
        delta.replay(r)
    last = base.provenance.offset + len(records) if offset is None else offset
    return delta.apply(Provenance(last, 1))


@st.composite
def histories(draw: st.DrawFn, max_brokers: int = 5, max_topics: int = 4,
              max_partitions: int = 4) -> list[Any]:
    """A valid record history: features, brokers (some re-registered, fenced, shutting
    down or unregistered), topics with partitions and changes, configs, producer ids,
    and topic deletions. Every record in it replays on the empty image."""
    records: list[Any] = []
    records.append(M.FeatureLevelRecord(name="metadata.version",
                                        feature_level=draw(st.integers(1, 21))))
    n_brokers = draw(st.integers(1, max_brokers))
    racks = draw(st.lists(st.sampled_from([None, "a", "b"]), min_size=n_brokers,
                          max_size=n_brokers))
    epochs = {}
    for b in range(n_brokers):
        epochs[b] = draw(st.integers(0, 100))
        records.append(register(b, epochs[b], racks[b], fenced=draw(st.booleans())))
    for b in range(n_brokers):
        action = draw(st.sampled_from(["none", "fence", "unfence", "shutdown", "reregister"]))
        if action == "fence":
            records.append(M.BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=epochs[b],
                                                            fenced=1))
        elif action == "unfence":
            records.append(M.UnfenceBrokerRecord(id=b, epoch=epochs[b]))
        elif action == "shutdown":
            records.append(M.BrokerRegistrationChangeRecord(
                broker_id=b, broker_epoch=epochs[b], in_controlled_shutdown=1))
        elif action == "reregister":
            epochs[b] += draw(st.integers(1, 10))
            records.append(register(b, epochs[b], racks[b], incarnation=7000 + b))
    brokers = list(range(n_brokers))
    n_topics = draw(st.integers(0, max_topics))
    names = draw(st.lists(st.text("abcxyz._-", min_size=1, max_size=6), min_size=n_topics,
                          max_size=n_topics, unique=True))
    for n, name in enumerate(names):
        records.append(topic(name, n))
        for index in range(draw(st.integers(1, max_partitions))):
            replicas = draw(st.lists(st.sampled_from(brokers), min_size=1,
                                     max_size=len(brokers), unique=True))
            isr = draw(st.lists(st.sampled_from(replicas), min_size=1,
                                max_size=len(replicas), unique=True))
            leader = draw(st.sampled_from(isr + [-1]))
            records.append(partition(n, index, replicas, isr, leader))
            for _ in range(draw(st.integers(0, 2))):
                new_isr = draw(st.lists(st.sampled_from(replicas), min_size=1,
                                        max_size=len(replicas), unique=True))
                new_leader = draw(st.sampled_from(new_isr + [-1, -2]))
                if new_leader == -2 and leader not in new_isr and leader != -1:
                    new_leader = -1        # keep "leader in ISR" true
                records.append(change(n, index, isr=new_isr, leader=new_leader,
                                      leader_recovery_state=draw(st.sampled_from([-1, 0, 1]))))
                if new_leader != -2:
                    leader = new_leader
        for key in draw(st.lists(st.sampled_from(["retention.ms", "cleanup.policy"]),
                                 unique=True)):
            records.append(M.ConfigRecord(resource_type=2, resource_name=name, name=key,
                                          value=str(draw(st.integers(1, 99)))))
    for n, name in enumerate(names):
        if draw(st.booleans()) and draw(st.booleans()):
            records.append(M.RemoveTopicRecord(topic_id=tid(n)))
    if draw(st.booleans()):
        records.append(M.ConfigRecord(resource_type=4, resource_name="",
                                      name="unclean.leader.election.enable", value="true"))
    next_id = -1
    for _ in range(draw(st.integers(0, 3))):
        next_id = max(next_id, 0) + 1000
        records.append(M.ProducerIdsRecord(broker_id=0, broker_epoch=epochs[0],
                                           next_producer_id=next_id))
    if draw(st.booleans()):
        records.append(M.UnregisterBrokerRecord(broker_id=n_brokers - 1,
                                                broker_epoch=epochs[n_brokers - 1]))
    return records
