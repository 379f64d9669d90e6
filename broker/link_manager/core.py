"""The link manager's decisions (issue 21), pure: what to do on the destination cluster so
that it follows each cluster link's source, given what the source looks like.

Theory of operation
-------------------
Exactly one broker runs the link manager: the lowest-id active broker in the image
(``link_manager_broker``). Every broker computes the same answer from the same image, so
no election is needed; when that broker is fenced or shuts down, the next one takes
over with the next image. Everything the manager does is idempotent (a decision is a
difference between the source and the destination's committed metadata), so two
brokers briefly both acting, around a change of image, do no harm: the second
CreateTopics gets TOPIC_ALREADY_EXISTS.

For each link, three periodic jobs (``LinkSchedule``, periods from the link's configs):

- topic discovery, every ``metadata.max.age.ms``: the source's topic list and partition
  counts (``SourceMetadata``); ``plan_topics`` creates a mirror topic for each matching
  source topic the destination lacks (same name and partition count, the destination's
  default replication factor, the source topic's own configs and the three
  ``ketch.mirror.*`` configs), adds partitions to a mirror whose source grew, and stops
  (``ketch.mirror.state=stopped``) an active mirror whose source topic is gone. Nothing
  on the destination is ever deleted, and a destination topic that is not an active
  mirror of this link (a normal topic, a promoted mirror, another link's) is left alone;
- topic config sync, every ``topic.config.sync.ms``: the same plan with the source's
  configs, which sets and deletes the syncable configs of active mirrors to match;
- consumer group offset sync, every ``consumer.offset.sync.ms`` when enabled:
  ``plan_offsets`` commits on the destination the source's committed offsets of the
  matching groups for the partitions of active mirror topics. Offsets are the same on
  both clusters (mirror topics keep offsets), so there is no translation. A group with
  members on the destination is never touched (its consumers own their offsets), an
  offset is never past the mirror partition's high watermark (a consumer moved over
  must not skip records not yet mirrored), and never moves a destination commit
  backwards (a consumer that already moved over and advanced keeps its place).

A failed job (source unreachable, a refusal) is retried at its next period; the shell
records the error per link.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from clients.types import TopicPartition
from metadata_log.cluster_links import (
    MIRROR_LINK, MIRROR_SOURCE_TOPIC, MIRROR_STATE, MIRROR_STATE_ACTIVE, MIRROR_STATE_STOPPED,
    ClusterLink,
)
from metadata_log.config_defs import TOPIC_CONFIGS
from metadata_log.image import MetadataImage

__all__ = [
    "AddPartitions", "AlterMirrorConfigs", "CommitGroupOffsets", "CreateMirrorTopic",
    "DestinationGroup", "LinkSchedule", "SourceMetadata", "SourceTopic", "StopMirror",
    "TopicAction", "link_manager_broker", "mirror_configs", "plan_offsets", "plan_topics",
    "syncable_config", "INACTIVE_GROUP_STATES",
]

# Topic configs never copied from the source: the destination's own durability and
# replication choices (as MirrorMaker 2's DefaultConfigPropertyFilter), and the mirror
# configs themselves (a source topic may itself be a mirror).
_NOT_SYNCED = frozenset({
    "min.insync.replicas", "unclean.leader.election.enable",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    MIRROR_LINK, MIRROR_SOURCE_TOPIC, MIRROR_STATE,
})

# A destination group in one of these states has no members: its offsets may be written.
INACTIVE_GROUP_STATES = frozenset({"Empty", "Dead", ""})


def syncable_config(name: str) -> bool:
    """A source topic config the destination copies: one Ketch knows, not excluded."""
    return name in TOPIC_CONFIGS and name not in _NOT_SYNCED and not name.startswith("ketch.mirror.")


def link_manager_broker(image: MetadataImage) -> int | None:
    """The broker that runs the link manager: the lowest-id active (unfenced, not
    shutting down) broker; None when there is none."""
    active = [b for b, reg in image.cluster.brokers.items() if reg.is_active]
    return min(active) if active else None


# ------------------------------------------------------------------ inputs

@dataclass(frozen=True, slots=True)
class SourceTopic:
    partitions: int
    # The configs set on the source topic itself (DescribeConfigs source
    # DYNAMIC_TOPIC_CONFIG); None when this snapshot did not read configs.
    configs: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class SourceMetadata:
    """A complete listing of the source's non-internal topics (a partial listing must
    never be passed: a topic missing from it would be taken as deleted)."""
    topics: Mapping[str, SourceTopic]


@dataclass(frozen=True, slots=True)
class DestinationGroup:
    state: str                                   # Kafka's group state name; "" if unknown
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)


# ------------------------------------------------------------------ actions

@dataclass(frozen=True, slots=True)
class CreateMirrorTopic:
    topic: str
    partitions: int
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class AddPartitions:
    topic: str
    total_count: int


@dataclass(frozen=True, slots=True)
class AlterMirrorConfigs:
    """IncrementalAlterConfigs on a mirror topic: SET ``set``, DELETE ``delete``."""
    topic: str
    set: Mapping[str, str]
    delete: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StopMirror:
    topic: str
    reason: str


@dataclass(frozen=True, slots=True)
class CommitGroupOffsets:
    group_id: str
    offsets: Mapping[TopicPartition, int]


TopicAction = CreateMirrorTopic | AddPartitions | AlterMirrorConfigs | StopMirror


# ------------------------------------------------------------------ decisions

def mirror_configs(link: str, source_topic: str, source_configs: Mapping[str, str] | None
                   ) -> dict[str, str]:
    """A new mirror topic's configs: the source topic's syncable ones and the mirror's."""
    configs = {k: v for k, v in (source_configs or {}).items() if syncable_config(k)}
    configs.update({MIRROR_LINK: link, MIRROR_SOURCE_TOPIC: source_topic,
                    MIRROR_STATE: MIRROR_STATE_ACTIVE})
    return configs


def _mirror_of(image: MetadataImage, topic: str) -> tuple[str, str, str] | None:
    """(link, source topic, state) of a destination mirror topic, None for a normal one."""
    configs = image.configs.topic(topic)
    link = configs.get(MIRROR_LINK, "")
    if not link:
        return None
    return link, configs.get(MIRROR_SOURCE_TOPIC) or topic, configs.get(MIRROR_STATE, MIRROR_STATE_ACTIVE)


def plan_topics(image: MetadataImage, link: ClusterLink, source: SourceMetadata
                ) -> list[TopicAction]:
    """What brings the destination's mirror topics of ``link`` in line with ``source``.
    Configs are synced only for source topics whose ``configs`` were read."""
    actions: list[TopicAction] = []
    mirrored_sources: set[str] = set()
    for name in sorted(image.topics.by_name):
        mirror = _mirror_of(image, name)
        if mirror is None or mirror[0] != link.name:
            continue
        _, source_name, state = mirror
        mirrored_sources.add(source_name)
        if state != MIRROR_STATE_ACTIVE:
            continue                       # stopped or promoted: left as they are
        src = source.topics.get(source_name)
        if src is None:
            actions.append(StopMirror(name, f"source topic {source_name} no longer exists "
                                            f"on link {link.name}'s cluster"))
            continue
        have = len(image.topics.by_name[name].partitions)
        if src.partitions > have:
            actions.append(AddPartitions(name, src.partitions))
        if src.configs is not None:
            current = {k: v for k, v in image.configs.topic(name).items() if syncable_config(k)}
            wanted = {k: v for k, v in src.configs.items() if syncable_config(k)}
            changed = {k: v for k, v in sorted(wanted.items()) if current.get(k) != v}
            gone = tuple(sorted(set(current) - set(wanted)))
            if changed or gone:
                actions.append(AlterMirrorConfigs(name, changed, gone))
    for source_name in sorted(source.topics):
        if source_name in mirrored_sources or not link.mirrors_topic(source_name):
            continue
        if image.topics.get(source_name) is not None:
            continue                       # a destination topic of that name that is no mirror
        src = source.topics[source_name]
        actions.append(CreateMirrorTopic(source_name, src.partitions,
                                         mirror_configs(link.name, source_name, src.configs)))
    return actions


def plan_offsets(image: MetadataImage, link: ClusterLink,
                 source_offsets: Mapping[str, Mapping[TopicPartition, int]],
                 destination_groups: Mapping[str, DestinationGroup],
                 high_watermarks: Mapping[TopicPartition, int]) -> list[CommitGroupOffsets]:
    """The offset commits that carry ``source_offsets`` (group -> source partition ->
    committed offset) over to the destination for the groups ``link`` syncs.

    ``destination_groups``: the destination's state and committed offsets of those
    groups (absent: no such group yet); ``high_watermarks``: each mirror partition's high
    watermark on the destination (absent: not known, nothing committed for it)."""
    # Source topic -> its active mirror of this link on the destination.
    mirrors: dict[str, str] = {}
    for name in image.topics.by_name:
        mirror = _mirror_of(image, name)
        if mirror is not None and mirror[0] == link.name and mirror[2] == MIRROR_STATE_ACTIVE:
            mirrors[mirror[1]] = name
    commits = []
    for group_id in sorted(source_offsets):
        if not link.syncs_group(group_id):
            continue
        dest = destination_groups.get(group_id, DestinationGroup(""))
        if dest.state not in INACTIVE_GROUP_STATES:
            continue                       # members on the destination own its offsets
        offsets: dict[TopicPartition, int] = {}
        for tp, offset in sorted(source_offsets[group_id].items()):
            topic = mirrors.get(tp.topic)
            if topic is None or offset < 0:
                continue
            dest_tp = TopicPartition(topic, tp.partition)
            hw = high_watermarks.get(dest_tp)
            if hw is None:
                continue
            target = min(offset, hw)
            if target > dest.offsets.get(dest_tp, -1):
                offsets[dest_tp] = target
        if offsets:
            commits.append(CommitGroupOffsets(group_id, offsets))
    return commits


# ------------------------------------------------------------------ timing

@dataclass
class _LinkDue:
    metadata_ms: int = 0
    configs_ms: int = 0
    offsets_ms: int = 0


class LinkSchedule:
    """When each link's three jobs are next due. A job due now stays due until the shell
    says it ran (``ran_*``), whether it succeeded or not: a failure waits a period too."""

    def __init__(self) -> None:
        self.due: dict[str, _LinkDue] = {}

    def retain(self, links: Mapping[str, ClusterLink]) -> None:
        """Forget links that are gone; a new link's jobs are due at once."""
        for name in list(self.due):
            if name not in links:
                del self.due[name]
        for name in links:
            self.due.setdefault(name, _LinkDue())

    def metadata_due(self, name: str, now_ms: int) -> bool:
        return self.due[name].metadata_ms <= now_ms

    def configs_due(self, name: str, now_ms: int) -> bool:
        return self.due[name].configs_ms <= now_ms

    def offsets_due(self, name: str, now_ms: int) -> bool:
        return self.due[name].offsets_ms <= now_ms

    def ran_metadata(self, link: ClusterLink, now_ms: int, *, with_configs: bool) -> None:
        self.due[link.name].metadata_ms = now_ms + link.metadata_max_age_ms
        if with_configs:
            self.due[link.name].configs_ms = now_ms + link.topic_config_sync_ms

    def ran_offsets(self, link: ClusterLink, now_ms: int) -> None:
        self.due[link.name].offsets_ms = now_ms + link.consumer_offset_sync_ms

    def poll(self, links: Mapping[str, ClusterLink], now_ms: int) -> int:
        """Milliseconds until the next job is due (0: one is due now)."""
        waits = []
        for name, link in links.items():
            d = self.due.get(name, _LinkDue())
            waits += [d.metadata_ms, d.configs_ms]
            if link.consumer_offset_sync_enable:
                waits.append(d.offsets_ms)
        return max(0, min(waits) - now_ms) if waits else 60_000
