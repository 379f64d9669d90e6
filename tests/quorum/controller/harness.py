"""A test context for one QuorumController over an in-memory committed log.

In the spirit of Kafka's RaftClientTestContext: a builder plus verbs. ``commit`` plays the
quorum: it gives a result's records the next offsets and replays them, as the server will
once the batch is committed. Every record also goes through ``encode_record`` /
``decode_record`` on the way, so tests exercise the real frame.
"""
from __future__ import annotations

import random
import uuid
from typing import Any

from clients.protocol import messages
from metadata_log import (
    MetadataImage, PartitionRegistration, TopicImage, decode_record, encode_record,
)
from quorum.controller import ControllerConfig, ControllerResult, QuorumController

M = messages


class Harness:
    def __init__(self, config: ControllerConfig | None = None, seed: int = 0,
                 now_ms: int = 1_000_000) -> None:
        self.config = config or ControllerConfig()
        self.controller = QuorumController(self.config, random.Random(seed))
        self.now_ms = now_ms
        self.next_offset = 0
        self.log: list[bytes] = []
        self.incarnations: dict[int, uuid.UUID] = {}
        self.uuid_rng = random.Random(seed + 1)
        self.controller.activate(now_ms)
        self.poll()                       # bootstraps metadata.version

    # ------------------------------------------------------------ the quorum's part

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def commit(self, result: ControllerResult) -> Any:
        if result.records:
            framed = [encode_record(r) for r in result.records]
            self.log += framed
            last = self.next_offset + len(framed) - 1
            self.next_offset = last + 1
            outcome = self.controller.replay([decode_record(b) for b in framed], last, epoch=1)
            assert outcome.error is None, outcome.error
        return result.response

    def poll(self) -> tuple[ControllerResult, int]:
        result, wait_ms = self.controller.poll(self.now_ms)
        self.commit(result)
        return result, wait_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def run_for(self, ms: int, heartbeating: list[int]) -> None:
        """Let ``ms`` pass in heartbeat intervals: the brokers heartbeat, the controller
        polls (and its periodic records are committed) at every step."""
        end = self.now_ms + ms
        while self.now_ms < end:
            self.now_ms = min(end, self.now_ms + self.config.broker_heartbeat_interval_ms)
            for b in heartbeating:
                self.heartbeat(b)
            self.poll()

    # ------------------------------------------------------------ brokers

    def registration_request(self, broker_id: int, rack: str | None = None,
                             incarnation: uuid.UUID | None = None, port: int | None = None):
        if incarnation is None:
            incarnation = self.incarnations.get(broker_id) or uuid.UUID(
                int=self.uuid_rng.getrandbits(128), version=4)
        self.incarnations[broker_id] = incarnation
        R = M.BrokerRegistrationRequest
        return R(broker_id=broker_id, cluster_id="", incarnation_id=incarnation,
                 listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1",
                                       port=port or 9000 + broker_id, security_protocol=0)],
                 features=[R.Feature(name="metadata.version", min_supported_version=1,
                                     max_supported_version=self.config.metadata_version)],
                 rack=rack)

    def register(self, broker_id: int, rack: str | None = None,
                 incarnation: uuid.UUID | None = None) -> Any:
        request = self.registration_request(broker_id, rack, incarnation)
        return self.commit(self.controller.handle_broker_registration(request, self.now_ms))

    def heartbeat(self, broker_id: int, *, offset: int | None = None, want_fence: bool = False,
                  want_shut_down: bool = False, epoch: int | None = None) -> Any:
        b = self.image.cluster.get(broker_id)
        request = M.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=epoch if epoch is not None else (b.broker_epoch if b else -1),
            current_metadata_offset=self.next_offset - 1 if offset is None else offset,
            want_fence=want_fence, want_shut_down=want_shut_down)
        return self.commit(self.controller.handle_broker_heartbeat(request, self.now_ms))

    def start_broker(self, broker_id: int, rack: str | None = None) -> None:
        """Register and heartbeat until unfenced."""
        self.register(broker_id, rack)
        response = self.heartbeat(broker_id)
        assert response.error_code == 0 and not response.is_fenced, response

    def start_brokers(self, racks: dict[int, str | None]) -> None:
        for broker_id, rack in racks.items():
            self.start_broker(broker_id, rack)

    # ------------------------------------------------------------ topics

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict[str, str] | None = None,
                     assignments: list[list[int]] | None = None) -> Any:
        R = M.CreateTopicsRequest
        topic = R.CreatableTopic(
            name=name,
            num_partitions=-1 if assignments else partitions,
            replication_factor=-1 if assignments else replication_factor,
            assignments=[R.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                         for i, b in enumerate(assignments or [])],
            configs=[R.CreatableTopicConfig(name=k, value=v)
                     for k, v in (configs or {}).items()])
        response = self.commit(self.controller.handle_create_topics(
            R(topics=[topic]), self.now_ms))
        return response.topics[0]

    def topic(self, name: str) -> TopicImage:
        t = self.image.topics.get(name)
        assert t is not None, name
        return t

    def partition(self, name: str, index: int = 0) -> PartitionRegistration:
        return self.topic(name).partitions[index]

    def alter_partition(self, name: str, index: int, new_isr: list[int], *,
                        broker_id: int | None = None, leader_epoch: int | None = None,
                        partition_epoch: int | None = None,
                        leader_recovery_state: int | None = None,
                        with_epochs: bool = True) -> Any:
        """AlterPartition as the current leader would send it; returns the partition result."""
        t = self.topic(name)
        p = t.partitions[index]
        R = M.AlterPartitionRequest
        isr_fields: dict[str, Any] = (
            {"new_isr_with_epochs": [R.BrokerState(broker_id=b, broker_epoch=self._epoch_of(b))
                                     for b in new_isr]}
            if with_epochs else {"new_isr": list(new_isr)})
        data = R.PartitionData(
            partition_index=index,
            leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
            partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
            leader_recovery_state=(int(p.leader_recovery_state)
                                   if leader_recovery_state is None else leader_recovery_state),
            **isr_fields)
        sender = p.leader if broker_id is None else broker_id
        request = R(broker_id=sender, broker_epoch=self._epoch_of(sender),
                    topics=[R.TopicData(topic_id=t.topic_id, partitions=[data])])
        response = self.commit(self.controller.handle_alter_partition(request, self.now_ms))
        assert response.error_code == 0, response
        return response.topics[0].partitions[0]

    def _epoch_of(self, broker_id: int) -> int:
        b = self.image.cluster.get(broker_id)
        return b.broker_epoch if b is not None else -1
