"""The link manager's asyncio shell: on the one broker that runs it (``core``), reads each
link's source cluster with Ketch's admin client and carries the core's decisions out on
the destination through this broker's own admin client.

Each link gets its own source client, made from the link's client properties
(``source_client_properties``) and remade when they change. A job that fails (the source
unreachable, credentials refused, a destination refusal) is logged, recorded in the
link's status (``status()``: state and last error per link) and retried at its next
period; the destination keeps serving what it has.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping

from broker.link_manager.core import (
    AddPartitions, AlterMirrorConfigs, CommitGroupOffsets, CreateMirrorTopic, DestinationGroup,
    LinkSchedule, SourceMetadata, SourceTopic, StopMirror, TopicAction, link_manager_broker,
    plan_offsets, plan_topics,
)
from clients.aio.admin import (
    Admin, AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigSource, NewPartitions, NewTopic,
    OffsetSpec,
)
from clients.errors import ErrorCode, GroupIdNotFoundError, KafkaApiError, KafkaClientError
from clients.types import TopicPartition
from metadata_log.cluster_links import (
    MIRROR_LINK, MIRROR_SOURCE_TOPIC, MIRROR_STATE, MIRROR_STATE_ACTIVE, MIRROR_STATE_STOPPED,
    ClusterLink,
    cluster_links, parse_link, source_client_properties,
)
from metadata_log.image import MetadataImage

__all__ = ["LinkManagerDriver", "LinkStatus"]

log = logging.getLogger(__name__)

# How often a broker that does not run the manager looks again (a change of image may
# make it the runner), and the longest sleep of the one that does.
_IDLE_CHECK_MS = 1_000
_REQUEST_TIMEOUT_MS = 10_000


@dataclass
class LinkStatus:
    state: str = "starting"          # starting, ok, error
    last_error: str | None = None
    source_topics: int = 0           # matching source topics at the last listing
    last_metadata_ms: int = -1
    last_offset_sync_ms: int = -1


class LinkManagerDriver:
    def __init__(self, node_id: int, image: Callable[[], MetadataImage],
                 destination: Callable[[], Awaitable[Admin]], now_ms: Callable[[], int],
                 client_id: str) -> None:
        """``image()``: this broker's current metadata image; ``destination()``: an admin
        client of this cluster (through this broker's listener)."""
        self.node_id = node_id
        self.image = image
        self.destination = destination
        self.now_ms = now_ms
        self.client_id = client_id
        self.schedule = LinkSchedule()
        self.sources: dict[str, tuple[dict[str, str], Admin]] = {}
        self.statuses: dict[str, LinkStatus] = {}
        self.wake = asyncio.Event()

    def status(self) -> dict[str, LinkStatus]:
        """Each link's state as this broker sees it (only the runner's is current)."""
        return dict(self.statuses)

    def is_runner(self) -> bool:
        return link_manager_broker(self.image()) == self.node_id

    async def run(self) -> None:
        try:
            while True:
                wait_ms = _IDLE_CHECK_MS
                if self.is_runner():
                    wait_ms = min(wait_ms, await self.poll_once())
                else:
                    await self._close_sources(keep=set())
                try:
                    await asyncio.wait_for(self.wake.wait(), max(wait_ms, 10) / 1000)
                except asyncio.TimeoutError:
                    pass
                self.wake.clear()
        finally:
            await self._close_sources(keep=set())

    async def poll_once(self) -> int:
        """Run every job that is due; milliseconds until the next one."""
        links: dict[str, ClusterLink] = {}
        for name, configs in cluster_links(self.image()).items():
            link, problem = parse_link(name, configs)
            if link is not None:
                links[name] = link
            else:
                self.statuses[name] = LinkStatus("error", f"invalid link: {problem}")
        self.schedule.retain(links)
        for name in list(self.statuses):
            if name not in cluster_links(self.image()):
                del self.statuses[name]
        await self._close_sources(keep=set(links))
        for link in links.values():
            status = self.statuses.setdefault(link.name, LinkStatus())
            now = self.now_ms()
            try:
                if self.schedule.metadata_due(link.name, now) or self.schedule.configs_due(link.name, now):
                    with_configs = self.schedule.configs_due(link.name, now)
                    try:
                        await self._sync_topics(link, with_configs)
                    finally:
                        self.schedule.ran_metadata(link, now, with_configs=with_configs)
                    status.last_metadata_ms = now
                if link.consumer_offset_sync_enable and self.schedule.offsets_due(link.name, now):
                    try:
                        await self._sync_offsets(link)
                    finally:
                        self.schedule.ran_offsets(link, now)
                    status.last_offset_sync_ms = now
                status.state, status.last_error = "ok", None
            except (KafkaClientError, KafkaApiError, ConnectionError, OSError, asyncio.TimeoutError) as e:
                status.state, status.last_error = "error", f"{type(e).__name__}: {e}"
                log.warning("cluster link %s: %s", link.name, status.last_error)
        return self.schedule.poll(links, self.now_ms())

    # ------------------------------------------------------------ the source

    async def _source(self, link: ClusterLink) -> Admin:
        props = source_client_properties(link.configs)
        current = self.sources.get(link.name)
        if current is not None and current[0] == props:
            return current[1]
        if current is not None:
            await current[1].close()
        admin = Admin({**props, "client.id": f"{self.client_id}-link-{link.name}",
                       "request.timeout.ms": _REQUEST_TIMEOUT_MS,
                       "default.api.timeout.ms": _REQUEST_TIMEOUT_MS})
        self.sources[link.name] = (props, admin)
        return await admin.start()

    async def _close_sources(self, keep: set[str]) -> None:
        for name in [n for n in self.sources if n not in keep]:
            _, admin = self.sources.pop(name)
            try:
                await admin.close()
            except Exception:          # closing a client that never connected
                log.debug("closing the source client of link %s failed", name, exc_info=True)

    async def _source_metadata(self, link: ClusterLink, with_configs: bool) -> SourceMetadata:
        """Every topic of the source (a mirror whose source topic no longer matches the
        filter keeps following it; only a deleted one is stopped), the matching ones with
        their partition counts, and the configs of those new to the destination (or of
        all of them with ``with_configs``)."""
        source = await self._source(link)
        listed = await source.list_topics()
        image = self.image()
        # The matching topics and the source topics of this link's mirrors (a mirror may
        # be named differently from its source: ketch.mirror.source.topic).
        sources_of_mirrors = {image.configs.topic(t).get(MIRROR_SOURCE_TOPIC) or t
                              for t in image.topics.by_name
                              if image.configs.topic(t).get(MIRROR_LINK) == link.name}
        followed = {n for n in listed if link.mirrors_topic(n) or n in sources_of_mirrors}
        described = await source.describe_topics(sorted(followed)) if followed else {}
        need_configs = [n for n in sorted(followed) if with_configs or image.topics.get(n) is None]
        configs: dict[str, dict[str, str]] = {}
        if need_configs:
            resources = await source.describe_configs([ConfigResource.topic(n) for n in need_configs])
            for resource, entries in resources.items():
                configs[resource.name] = {
                    k: e.value for k, e in entries.items()
                    if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG and e.value is not None}
        self.statuses[link.name].source_topics = sum(1 for n in listed if link.mirrors_topic(n))
        # A listed topic not followed gets 0 partitions: the plan only grows partitions
        # and creates followed ones, so the 0 is never acted on.
        return SourceMetadata({n: SourceTopic(len(described[n].partitions) if n in described else 0,
                                              configs.get(n)) for n in listed})

    # ------------------------------------------------------------ topics

    async def _sync_topics(self, link: ClusterLink, with_configs: bool) -> None:
        metadata = await self._source_metadata(link, with_configs)
        actions = plan_topics(self.image(), link, metadata)
        if actions:
            await self._carry_out(link, actions)

    async def _carry_out(self, link: ClusterLink, actions: list[TopicAction]) -> None:
        admin = await self.destination()
        creates = [a for a in actions if isinstance(a, CreateMirrorTopic)]
        if creates:
            log.info("cluster link %s: creating mirror topics %s", link.name,
                     ", ".join(a.topic for a in creates))
            await self._each(admin.create_topics(
                [NewTopic(a.topic, a.partitions, -1, configs=dict(a.configs)) for a in creates]),
                link, "creating mirror topics")
        grows = {a.topic: NewPartitions(a.total_count) for a in actions if isinstance(a, AddPartitions)}
        if grows:
            log.info("cluster link %s: adding partitions %s", link.name, grows)
            await self._each(admin.create_partitions(grows), link, "adding partitions")
        changes: dict[ConfigResource, list[AlterConfigOp]] = {}
        for a in actions:
            if isinstance(a, AlterMirrorConfigs):
                changes[ConfigResource.topic(a.topic)] = (
                    [AlterConfigOp(k, v) for k, v in a.set.items()]
                    + [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in a.delete])
            elif isinstance(a, StopMirror):
                log.warning("cluster link %s: stopping mirror topic %s: %s", link.name, a.topic, a.reason)
                changes[ConfigResource.topic(a.topic)] = [AlterConfigOp(MIRROR_STATE, MIRROR_STATE_STOPPED)]
        if changes:
            await self._each(admin.incremental_alter_configs(changes), link, "altering mirror topics")

    @staticmethod
    async def _each(call: Awaitable[object], link: ClusterLink, what: str) -> None:
        """One admin call over several items: a topic that exists already (created
        meanwhile, by a previous runner) is no failure; any other refusal is raised."""
        try:
            await call
        except KafkaApiError as e:
            results = getattr(e, "results", None) or {}
            failed = [v for v in results.values() if isinstance(v, KafkaApiError)]
            if failed and all(v.error_code == ErrorCode.TOPIC_ALREADY_EXISTS for v in failed):
                return
            log.warning("cluster link %s: %s: %s", link.name, what, e)
            raise

    # ------------------------------------------------------------ offsets

    async def _sync_offsets(self, link: ClusterLink) -> None:
        source = await self._source(link)
        groups = [g.group_id for g in await source.list_consumer_groups() if link.syncs_group(g.group_id)]
        if not groups:
            return
        source_offsets: dict[str, dict[TopicPartition, int]] = {}
        for group_id in groups:
            committed = await source.list_consumer_group_offsets(group_id)
            source_offsets[group_id] = {tp: om.offset for tp, om in committed.items()}
        admin = await self.destination()
        image = self.image()
        mirror_tps = [TopicPartition(t, p) for t, topic in image.topics.by_name.items()
                      if image.configs.topic(t).get(MIRROR_LINK) == link.name
                      and image.configs.topic(t).get(MIRROR_STATE, MIRROR_STATE_ACTIVE) == MIRROR_STATE_ACTIVE
                      for p in topic.partitions]
        wanted = {TopicPartition(tp.topic, tp.partition) for offsets in source_offsets.values()
                  for tp in offsets}
        asked = [tp for tp in mirror_tps if tp in wanted]
        if not asked:
            return
        latest = await admin.list_offsets({tp: OffsetSpec.latest() for tp in asked})
        high_watermarks = {tp: r.offset for tp, r in latest.items()}
        destination_groups: dict[str, DestinationGroup] = {}
        for group_id in groups:
            try:
                description = (await admin.describe_consumer_groups([group_id]))[group_id]
            except GroupIdNotFoundError:
                continue
            state = description.state if description.state != "Dead" else ""
            committed = await admin.list_consumer_group_offsets(group_id) if state in ("Empty", "") else {}
            destination_groups[group_id] = DestinationGroup(
                state, {tp: om.offset for tp, om in committed.items()})
        for commit in plan_offsets(image, link, source_offsets, destination_groups, high_watermarks):
            try:
                await admin.alter_consumer_group_offsets(commit.group_id, dict(commit.offsets))
            except KafkaApiError as e:
                # A member joined on the destination meanwhile: it owns the offsets now.
                log.info("cluster link %s: offsets of group %s not synced: %s", link.name,
                         commit.group_id, e)

    def describe(self) -> Mapping[str, dict[str, object]]:
        """The statuses as JSON-ready dicts (for the HTTP API)."""
        if not self.is_runner():
            return {}
        return {name: {"state": s.state, "last_error": s.last_error,
                       "source_topics": s.source_topics, "runner": self.node_id}
                for name, s in sorted(self.statuses.items())}
