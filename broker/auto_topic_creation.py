"""Topics a broker creates on a client's behalf, through the active controller.

Kafka's ``AutoTopicCreationManager``: Metadata's auto-creation (``auto.create.topics.enable``,
``num.partitions``, ``default.replication.factor`` capped by the live brokers) and the
internal topics a coordinator needs on first use (``__consumer_offsets``). A created topic
counts as usable once this broker's metadata image shows a leader for every partition.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from broker.controller_channel import ControllerChannel, ControllerUnavailableError
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from metadata_log.image import MetadataImage

log = logging.getLogger(__name__)

__all__ = ["AutoTopicCreationManager"]


def topics_ready(names: list[str]) -> Callable[[MetadataImage], bool]:
    def ready(image: MetadataImage) -> bool:
        for n in names:
            topic = image.topics.get(n)
            if topic is None or any(p.leader < 0 for p in topic.partitions.values()):
                return False
        return True
    return ready


class AutoTopicCreationManager:
    def __init__(self, controller: ControllerChannel, image: Callable[[], MetadataImage],
                 wait_for_image: Callable[[Callable[[MetadataImage], bool], float], Any],
                 num_partitions: int, default_replication_factor: int) -> None:
        self.controller = controller
        self.image = image
        self.wait_for_image = wait_for_image
        self.num_partitions = num_partitions
        self.default_replication_factor = default_replication_factor

    def live_brokers(self) -> int:
        return sum(1 for b in self.image().cluster.brokers.values() if not b.fenced)

    async def wait_for_topics(self, names: list[str], timeout_s: float) -> bool:
        return await self.wait_for_image(topics_ready(names), timeout_s)

    async def create(self, topics: list[Any], timeout_s: float = 10.0) -> dict[str, int]:
        """CreateTopics through the controller, then wait for the image; the error per
        topic (NONE when usable, TOPIC_ALREADY_EXISTS counts as created)."""
        req = messages.CreateTopicsRequest(topics=topics, timeout_ms=int(timeout_s * 1000))
        names = [t.name for t in topics]
        try:
            _, resp = await self.controller.request(ApiKey.CREATE_TOPICS, (2, 7), req, timeout_s=timeout_s)
        except ControllerUnavailableError as e:
            log.warning("creating %s failed: %s", names, e)
            return {n: ErrorCode.LEADER_NOT_AVAILABLE for n in names}
        errors = {t.name: t.error_code for t in resp.topics
                  if t.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)}
        created = [n for n in names if n not in errors]
        await self.wait_for_topics(created, timeout_s / 2)
        image = self.image()
        return {n: errors.get(n, ErrorCode.NONE if topics_ready([n])(image) else ErrorCode.LEADER_NOT_AVAILABLE)
                for n in names}

    async def auto_create(self, names: list[str]) -> dict[str, int]:
        """Metadata's auto-creation: the Metadata error per topic that could not be made."""
        rf = max(1, min(self.default_replication_factor, self.live_brokers()))
        cls = messages.CreateTopicsRequest
        outcome = await self.create([cls.CreatableTopic(name=n, num_partitions=self.num_partitions,
                                                        replication_factor=rf) for n in names])
        return {n: (ErrorCode.INVALID_TOPIC_EXCEPTION if code == ErrorCode.INVALID_TOPIC_EXCEPTION
                    else ErrorCode.LEADER_NOT_AVAILABLE)
                for n, code in outcome.items() if code != ErrorCode.NONE}
