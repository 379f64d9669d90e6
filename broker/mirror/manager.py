"""The mirror fetchers' asyncio shell: one ``LinkFetcher`` per cluster link in use here.

``MirrorManager.on_metadata`` runs after each applied image: it asks the data-plane core
which partitions this broker leads as active mirrors (``ReplicaManager.mirror_leaderships``),
groups them by link, and starts, re-assigns or stops a ``LinkFetcher`` for each link. A
link whose configs changed (bootstrap servers, security) gets a new fetcher.

A ``LinkFetcher`` has one task for the source's Metadata (through the link's bootstrap
servers: who leads each source partition, in which epoch) and one task per source leader
that sends what the pure core (``MirrorLinkCore``) plans: OffsetForLeaderEpoch for
partitions still truncating, else one Fetch, as a consumer (replica id -1,
read_uncommitted). Every decision is the core's; a connection failure is reported to it
(``handle_source_unreachable``: it backs off and looks the leader up again). The
destination keeps serving whatever the source does.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from broker.mirror._core import (
    MirrorAssignment, MirrorLinkCore, MirrorPartitionStatus, SourceEpochAnswer, SourceFetched,
    SourcePartitionMetadata, SourceWork,
)
from broker.mirror._port import ReplicaManagerPort
from broker.replica_driver import ReplicaDriver
from clients.connection import KafkaConnection, connect
from clients.protocol import ApiKey, messages
from clients.security.client_auth import ClientSecurity
from clients.types import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["LinkSettings", "MirrorManager"]

FETCH_VERSION_MAX = 12          # topics by name (v13+ name them by the source's ids)
CONSUMER_REPLICA_ID = -1


@dataclass(frozen=True, slots=True)
class LinkSettings:
    """How this broker reaches a link's source cluster."""
    bootstrap_servers: tuple[tuple[str, int], ...]
    security: ClientSecurity
    metadata_max_age_ms: int = 5_000
    # The link's configs as committed: a fetcher restarts when they change (the security
    # object holds a TLS context, which compares by identity).
    configs: tuple[tuple[str, str], ...] = ()


class LinkFetcher:
    def __init__(self, link: str, settings: LinkSettings, driver: ReplicaDriver, client_id: str,
                 fetch_max_wait_ms: int = 500, fetch_max_bytes: int = 16 * 1024 * 1024,
                 partition_fetch_max_bytes: int = 4 * 1024 * 1024) -> None:
        self.link = link
        self.settings = settings
        self.driver = driver
        self.client_id = client_id
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.partition_fetch_max_bytes = partition_fetch_max_bytes
        self.core = MirrorLinkCore(link, ReplicaManagerPort(driver.run),
                                   metadata_max_age_ms=settings.metadata_max_age_ms)
        self.endpoints: dict[int, tuple[str, int]] = {}
        self._leader_tasks: dict[int, asyncio.Task] = {}
        self._wakeup = asyncio.Event()
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(self._run_metadata(),
                                                            name=f"mirror-{link}-metadata")

    def assign(self, assignments: list[MirrorAssignment]) -> None:
        self.core.assign(assignments, self.driver.now_ms())
        self._wakeup.set()

    async def close(self) -> None:
        self._closed = True
        tasks = [self._task, *self._leader_tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------ source metadata

    async def _run_metadata(self) -> None:
        conn: KafkaConnection | None = None
        try:
            while not self._closed:
                now = self.driver.now_ms()
                if self.core.metadata_due(now):
                    try:
                        if conn is None or conn.closed:
                            conn = await self._connect_bootstrap()
                        answers = await self._metadata(conn)
                        self.core.handle_metadata(answers, self.driver.now_ms())
                    except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                        log.info("mirror link %s: source metadata: %s", self.link, e)
                        if conn is not None:
                            conn.close()
                        conn = None
                        self.core.handle_metadata_failed(f"source metadata: {e or type(e).__name__}",
                                                         self.driver.now_ms())
                    self._start_leader_tasks()
                    continue
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(),
                                           self.core.metadata_wait_ms(now) / 1000)
                except asyncio.TimeoutError:
                    pass
        except asyncio.CancelledError:
            pass
        finally:
            if conn is not None:
                conn.close()

    async def _connect_bootstrap(self) -> KafkaConnection:
        errors = []
        for host, port in self.settings.bootstrap_servers:
            try:
                return await self._connect(host, port)
            except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                errors.append(f"{host}:{port}: {e or type(e).__name__}")
        raise ConnectionError("; ".join(errors) or "no bootstrap servers")

    async def _connect(self, host: str, port: int) -> KafkaConnection:
        return await connect(host, port, client_id=self.client_id, security=self.settings.security,
                             timeout_s=5.0, negotiate=True)

    async def _metadata(self, conn: KafkaConnection) -> list[SourcePartitionMetadata]:
        version = conn.pick_version(ApiKey.METADATA, 4, 12)
        cls = messages.MetadataRequest
        req = cls(topics=[cls.MetadataRequestTopic(name=t) for t in self.core.source_topics()],
                  allow_auto_topic_creation=False)
        resp = await conn.request(ApiKey.METADATA, version, req, timeout_s=10.0)
        self.endpoints = {b.node_id: (b.host, b.port) for b in resp.brokers}
        out = []
        for t in resp.topics:
            if t.error_code != 0:
                out.extend(SourcePartitionMetadata(TopicPartition(t.name, p), t.error_code)
                           for p in self._partitions_of(t.name))
                continue
            out.extend(SourcePartitionMetadata(TopicPartition(t.name, p.partition_index),
                                               p.error_code, p.leader_id, p.leader_epoch)
                       for p in t.partitions)
        return out

    def _partitions_of(self, source_topic: str) -> list[int]:
        return [p.assignment.source.partition for p in self.core.partitions.values()
                if p.assignment.source.topic == source_topic]

    # ------------------------------------------------------------ per source leader

    def _start_leader_tasks(self) -> None:
        for leader in self.core.source_leaders():
            task = self._leader_tasks.get(leader)
            if task is None or task.done():
                self._leader_tasks[leader] = asyncio.get_running_loop().create_task(
                    self._run_leader(leader), name=f"mirror-{self.link}-source-{leader}")

    async def _run_leader(self, leader: int) -> None:
        conn: KafkaConnection | None = None
        try:
            while not self._closed and leader in self.core.source_leaders():
                work = self.core.work(leader, self.driver.now_ms())
                if not work.epoch_queries and not work.fetches:
                    await asyncio.sleep(min(work.wait_ms, 100) / 1000)
                    continue
                try:
                    if conn is None or conn.closed:
                        endpoint = self.endpoints.get(leader)
                        if endpoint is None:
                            raise ConnectionError(f"source broker {leader} not in the metadata")
                        conn = await self._connect(*endpoint)
                    if work.epoch_queries:
                        answers = await self._offsets_for_leader_epoch(conn, work)
                        self.core.handle_epoch_answers(work, answers, self.driver.now_ms())
                    else:
                        fetched = await self._fetch(conn, work)
                        self.core.handle_fetched(work, fetched, self.driver.now_ms())
                except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                    log.info("mirror link %s: source broker %d: %s", self.link, leader, e)
                    if conn is not None:
                        conn.close()
                    conn = None
                    self.core.handle_source_unreachable(leader, str(e) or type(e).__name__,
                                                        self.driver.now_ms())
                self._wakeup.set()      # the metadata task may be due (a leader moved)
        except asyncio.CancelledError:
            pass
        finally:
            if conn is not None:
                conn.close()

    async def _offsets_for_leader_epoch(self, conn: KafkaConnection,
                                        work: SourceWork) -> list[SourceEpochAnswer]:
        version = conn.pick_version(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
        cls = messages.OffsetForLeaderEpochRequest
        topics: dict[str, list[Any]] = {}
        for q in work.epoch_queries:
            topics.setdefault(q.source.topic, []).append(cls.OffsetForLeaderPartition(
                partition=q.source.partition, current_leader_epoch=q.current_leader_epoch,
                leader_epoch=q.leader_epoch))
        req = cls(replica_id=CONSUMER_REPLICA_ID, topics=[
            cls.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        resp = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, req, timeout_s=30.0)
        return [SourceEpochAnswer(TopicPartition(t.topic, p.partition), p.error_code,
                                  p.leader_epoch, p.end_offset)
                for t in resp.topics for p in t.partitions]

    async def _fetch(self, conn: KafkaConnection, work: SourceWork) -> list[SourceFetched]:
        version = conn.pick_version(ApiKey.FETCH, 4, FETCH_VERSION_MAX)
        cls = messages.FetchRequest
        topics: dict[str, list[Any]] = {}
        for f in work.fetches:
            topics.setdefault(f.source.topic, []).append(cls.FetchPartition(
                partition=f.source.partition, current_leader_epoch=f.current_leader_epoch,
                fetch_offset=f.fetch_offset, log_start_offset=-1,
                partition_max_bytes=self.partition_fetch_max_bytes))
        req = cls(replica_id=CONSUMER_REPLICA_ID, max_wait_ms=self.fetch_max_wait_ms, min_bytes=1,
                  max_bytes=self.fetch_max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                  topics=[cls.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                  forgotten_topics_data=[])
        resp = await conn.request(ApiKey.FETCH, version, req,
                                  timeout_s=self.fetch_max_wait_ms / 1000 + 30)
        return [SourceFetched(TopicPartition(t.topic, p.partition_index), p.error_code,
                              p.high_watermark, p.log_start_offset, p.records)
                for t in resp.responses for p in t.partitions]


class MirrorManager:
    def __init__(self, driver: ReplicaDriver, link_settings: Callable[[str], LinkSettings | None],
                 client_id: str) -> None:
        """``link_settings(name)``: how to reach link ``name``'s source, from the applied
        image; None: no such link (its mirrors then wait, reporting it)."""
        self.driver = driver
        self.link_settings = link_settings
        self.client_id = client_id
        self.fetchers: dict[str, LinkFetcher] = {}
        self.missing_links: dict[str, list[MirrorAssignment]] = {}
        self._closing: set[asyncio.Task] = set()
        self._closed = False

    def on_metadata(self) -> None:
        """Start, re-assign or stop link fetchers to match the partitions led here."""
        if self._closed:
            return
        by_link: dict[str, list[MirrorAssignment]] = {}
        for m in self.driver.run(lambda core: core.mirror_leaderships()):
            by_link.setdefault(m.mirror.link, []).append(MirrorAssignment(
                m.partition, TopicPartition(m.mirror.source_topic, m.partition.partition),
                m.leader_epoch))
        self.missing_links = {}
        for link in sorted(set(self.fetchers) | set(by_link)):
            wanted = by_link.get(link, [])
            settings = self.link_settings(link) if wanted else None
            fetcher = self.fetchers.get(link)
            if fetcher is not None and (settings is None or settings.configs != fetcher.settings.configs):
                self._close_later(self.fetchers.pop(link))
                fetcher = None
            if not wanted:
                continue
            if settings is None:
                self.missing_links[link] = wanted
                continue
            if fetcher is None:
                fetcher = self.fetchers[link] = LinkFetcher(link, settings, self.driver,
                                                            f"{self.client_id}-mirror-{link}")
            fetcher.assign(wanted)

    def _close_later(self, fetcher: LinkFetcher) -> None:
        task = asyncio.get_running_loop().create_task(fetcher.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def status(self) -> list[tuple[str, MirrorPartitionStatus | MirrorAssignment]]:
        """(link, status) per mirror partition led here; a link that does not exist shows
        its assignments only."""
        out: list[tuple[str, MirrorPartitionStatus | MirrorAssignment]] = []
        for link, fetcher in sorted(self.fetchers.items()):
            out.extend((link, s) for s in fetcher.core.status())
        for link, assignments in sorted(self.missing_links.items()):
            out.extend((link, a) for a in assignments)
        return out

    def describe(self) -> list[Mapping[str, Any]]:
        """``GET /v1/mirrors``: one object per mirror partition this broker leads."""
        rows: list[Mapping[str, Any]] = []
        for link, s in self.status():
            if isinstance(s, MirrorAssignment):
                rows.append({"link": link, "topic": s.partition.topic, "partition": s.partition.partition,
                             "source_topic": s.source.topic, "state": "link_missing", "lag": -1,
                             "log_end_offset": -1, "source_high_watermark": -1, "source_leader": -1,
                             "last_error": f"cluster link {link} does not exist"})
                continue
            rows.append({"link": link, "topic": s.partition.topic, "partition": s.partition.partition,
                         "source_topic": s.source.topic, "state": s.state.value, "lag": s.lag,
                         "log_end_offset": s.log_end_offset,
                         "source_high_watermark": s.source_high_watermark,
                         "source_leader": s.source_leader, "last_error": s.last_error})
        return rows

    async def close(self) -> None:
        self._closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.close() for f in fetchers), *self._closing, return_exceptions=True)
