"""The client's metadata view (clients/_core/metadata.py): KIP-951 leader updates (pure)."""
from __future__ import annotations

import uuid

from clients._core.metadata import BrokerMetadata, ClusterMetadata
from clients.protocol import messages
from clients.types import TopicPartition

M = messages.MetadataResponse


def view() -> ClusterMetadata:
    return ClusterMetadata.from_response(M(
        brokers=[M.MetadataResponseBroker(node_id=1, host="h1", port=1),
                 M.MetadataResponseBroker(node_id=2, host="h2", port=2)],
        cluster_id="c", controller_id=1,
        topics=[M.MetadataResponseTopic(name="t", topic_id=uuid.UUID(int=5), partitions=[
            M.MetadataResponsePartition(partition_index=i, leader_id=1, leader_epoch=4,
                                        replica_nodes=[1, 2, 3], isr_nodes=[1, 2, 3])
            for i in range(2)])]), now_ms=0)


def test_a_newer_leader_named_by_a_response_replaces_the_partitions_and_adds_its_endpoint() -> None:
    before = view()
    after = before.with_current_leaders(
        {TopicPartition("t", 0): (3, 5), TopicPartition("t", 1): (2, 4),      # not newer
         TopicPartition("gone", 0): (2, 9)},                                   # unknown topic
        [BrokerMetadata(3, "h3", 3, "r3")])
    assert after.leader_for(TopicPartition("t", 0)) == (3, 5)
    assert after.broker(3) == BrokerMetadata(3, "h3", 3, "r3")
    assert after.leader_for(TopicPartition("t", 1)) == (1, 4)
    assert before.leader_for(TopicPartition("t", 0)) == (1, 4)               # a new view
    # A leader nobody says how to reach is not adopted; nothing new: the same view.
    assert before.with_current_leaders({TopicPartition("t", 0): (9, 6)}, []) is before
