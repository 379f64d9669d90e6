"""The committed-log side of QuorumController: encoded batches, skips, snapshots."""
from __future__ import annotations

import random

from clients.protocol import messages as M
from metadata_log import (
    Provenance, TopicCreated, encode_record, image_to_records, records_to_image,
)
from quorum.controller import ControllerConfig, QuorumController
from tests.quorum.controller.harness import Harness


def test_replay_encoded_applies_framed_records_and_reports_changes() -> None:
    h = Harness()
    h.start_broker(1)
    result = h.controller.handle_create_topics(M.CreateTopicsRequest(topics=[
        M.CreateTopicsRequest.CreatableTopic(name="t", num_partitions=2,
                                             replication_factor=1)]), h.now_ms)
    last = h.next_offset + len(result.records) - 1
    outcome = h.controller.replay_encoded([encode_record(r) for r in result.records], last, 3)
    assert outcome.error is None
    assert outcome.changes[0] == TopicCreated("t", result.records[0].topic_id)
    assert h.image.provenance == Provenance(last, 3)
    assert len(h.topic("t").partitions) == 2


def test_an_undecodable_batch_is_skipped_whole_and_the_offset_advances() -> None:
    h = Harness()
    h.start_broker(1)
    before = h.image
    good = encode_record(M.TopicRecord(name="x", topic_id=before.cluster.get(1).incarnation_id))
    outcome = h.controller.replay_encoded([good, b"\x01\x63\x00\x00"], 500, 2)
    assert outcome.error is not None and "undecodable" in str(outcome.error)
    assert h.image.topics is before.topics
    assert h.image.provenance == Provenance(500, 2)


def test_a_contradicting_batch_is_skipped_and_a_retried_decision_sees_the_truth() -> None:
    """Two CreateTopics for one name decided on the same image: the second batch is
    skipped on replay, and deciding again answers TOPIC_ALREADY_EXISTS."""
    h = Harness()
    h.start_broker(1)
    request = M.CreateTopicsRequest(topics=[M.CreateTopicsRequest.CreatableTopic(
        name="t", num_partitions=1, replication_factor=1)])
    first = h.controller.handle_create_topics(request, h.now_ms)
    second = h.controller.handle_create_topics(request, h.now_ms)
    h.commit(first)
    outcome = h.controller.replay(second.records, h.next_offset + 1)
    assert outcome.error is not None
    assert h.topic("t").topic_id == first.records[0].topic_id
    again = h.controller.handle_create_topics(request, h.now_ms)
    assert again.records == () and again.response.topics[0].error_code == 36


def test_after_loading_a_snapshot_a_broker_must_reach_the_snapshot_offset() -> None:
    h = Harness()
    h.register(1)
    registered_at = h.controller.registration_offset(1)
    b = h.image.cluster.get(1)
    h.commit(h.controller.allocate_producer_ids(1, b.broker_epoch))    # the log moves on
    image = records_to_image(image_to_records(h.image), h.image.provenance)
    fresh = QuorumController(ControllerConfig(), random.Random(1))
    fresh.load_image(image)
    fresh.activate(h.now_ms)
    assert fresh.registration_offset(1) == image.provenance.offset > registered_at
    b = image.cluster.get(1)
    behind = fresh.handle_broker_heartbeat(M.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=b.broker_epoch, current_metadata_offset=registered_at),
        h.now_ms)
    assert behind.records == () and not behind.response.is_caught_up
    there = fresh.handle_broker_heartbeat(M.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=b.broker_epoch,
        current_metadata_offset=image.provenance.offset), h.now_ms)
    assert there.response.is_caught_up and len(there.records) == 1


def test_an_empty_log_is_bootstrapped_once_with_metadata_version() -> None:
    controller = QuorumController(ControllerConfig(), random.Random(0))
    controller.activate(0)
    result, _ = controller.poll(0)
    # Eligible leader replicas on, as in Kafka 4.1's new clusters (KIP-966).
    assert [(r.name, r.feature_level) for r in result.records] == [
        ("metadata.version", 21), ("eligible.leader.replicas.version", 1)]
    controller.replay(result.records, 0)
    result, _ = controller.poll(1)
    assert result.records == ()
    assert controller.image.features.metadata_version == 21
    without = QuorumController(ControllerConfig(eligible_leader_replicas_version=0), random.Random(0))
    without.activate(0)
    assert [r.name for r in without.poll(0)[0].records] == ["metadata.version"]
