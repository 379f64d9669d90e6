"""A chaos cluster: ``LocalCluster`` plus fault proxies and the questions a scenario asks.

``ChaosCluster`` starts controllers and brokers as real processes (``clients.cli.launcher``)
and, on request, routes every inter-node link through its own proxy (``chaos.proxy``):
broker i reaches node j's port through the proxy named ``"i->j"`` (``KETCH_CONNECT_VIA``
in broker i's environment). With ``client_proxies`` each broker also advertises a proxy
in front of its listener (``"client->j"``), so that real client libraries, which learn
broker addresses from Metadata, go through a proxy too (N6 drops Produce responses there).

Questions are answered with Ketch's own codec over plain sockets, so no client library's
cache colours them: the partition state each live broker's metadata image shows, the
leader of a partition, the active controller (DescribeQuorum), high watermarks
(ListOffsets), whether a broker is registered and unfenced. ``wait_until`` polls a probe
until it holds (scenarios await conditions, they do not sleep for them).

Everything here blocks; processes are stopped by pid (``LocalCluster``).
"""
from __future__ import annotations

import os
import shutil
import signal
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from chaos.proxy import ProxyHub
from clients import connection, waiting
from clients.cli.launcher import LocalCluster, NodeSpec, free_ports
from clients.properties import format_properties, load_properties
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.security.client_auth import PLAINTEXT_SECURITY, ClientSecurity
from clients.waiting import WaitTimeout

T = TypeVar("T")

__all__ = [
    "ChaosCluster", "ChaosTimeout", "FAST_BROKER", "FAST_CONTROLLER", "PartitionState", "QuorumView",
    "roundtrip", "wait_until",
]

# Fast failure detection, as tests/integration uses: a silent broker is fenced after 2.5 s
# and a silent follower leaves the ISR after 3 s.
FAST_BROKER = {
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "num.partitions": "1",
    # Consumer groups (N7, L5): a small offsets topic and no initial rebalance delay.
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    # Leadership moves only because of the faults a scenario injects.
    "auto.leader.rebalance.enable": "false",
}
FAST_CONTROLLER = {
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "300",
    "auto.leader.rebalance.enable": "false",
    # 1 s rather than the default 250 ms: a benign reconnect on a loaded machine must not
    # fence a live broker mid-scenario (N15 sets the default back: it measures it).
    "ketch.broker.disconnect.fence.ms": "1000",
}


class ChaosTimeout(WaitTimeout):
    """A condition a scenario awaited did not come true in time."""


def wait_until(probe: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.1) -> T:
    """``clients.waiting.wait_until`` raising ChaosTimeout; a missing key in a node's
    answer also counts as "not yet" (its metadata may still be loading)."""
    return waiting.wait_until(probe, timeout_s, what, interval_s,
                              retry_on=(*waiting.RETRY_ON, KeyError), error=ChaosTimeout)


def roundtrip(port: int, api_key: int, api_version: int, body: Any, timeout_s: float = 5.0,
              host: str = "127.0.0.1", security: ClientSecurity = PLAINTEXT_SECURITY) -> Any:
    """One request on a fresh connection to one node; the decoded response body (the
    shared blocking round trip, ``clients.connection.roundtrip``)."""
    return connection.roundtrip(host, port, api_key, api_version, body, timeout_s=timeout_s,
                                client_id="ketch-chaos", security=security)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as one broker's metadata image shows it."""
    partition: int
    error_code: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class QuorumView:
    """The metadata quorum as one controller describes it."""
    leader: int
    epoch: int
    high_watermark: int
    voters: tuple[int, ...]         # current_voters, by id
    nodes: tuple[int, ...]          # v2's nodes: the voter set it has applied


class _Local(LocalCluster):
    """LocalCluster with per-node properties (advertised listeners differ per broker)."""
    node_props: dict[int, dict[str, str]]

    def _write_configs(self, spec: Any) -> None:
        super()._write_configs(spec)
        for node in spec.nodes:
            extra = getattr(self, "node_props", {}).get(node.id)
            if extra:
                props = load_properties(node.config)
                props.update(extra)
                with open(node.config, "w") as f:
                    f.write(format_properties(props))

    def apply_node_props(self) -> None:
        """Write every node's server.properties again, with ``node_props`` on top."""
        self._write_configs(self.spec)


class ChaosCluster:
    def __init__(self, directory: str, *, brokers: int = 3, controllers: int = 3,
                 broker_props: dict[str, str] | None = None,
                 controller_props: dict[str, str] | None = None,
                 proxied_links: bool = False, client_proxies: bool = False,
                 secure: bool = False, controller_bootstrap: bool = False,
                 say: Callable[[str], None] = lambda msg: None) -> None:
        """``secure``: a ``ketch up --secure`` cluster (SASL_SSL on every Kafka listener,
        the controllers' too; HTTPS admin API; the authorizer on): every client of the
        harness logs in as its admin user (``client_props``, ``security``), a super user:
        the harness's clients are the operator's tools (they create topics, move leaders,
        read every partition to check it), and the scenarios judge durability under
        faults, not who may do what (tests/security and tests/integration/test_acls do).
        ``controller_bootstrap``: brokers are given only the first controller, as
        ``controller.quorum.bootstrap.servers`` (KIP-853), and learn the voters from the
        quorum."""
        self.controller_bootstrap = controller_bootstrap
        self.dir = os.path.abspath(directory)
        self.secure = secure
        self._security: ClientSecurity | None = None
        self.n_brokers = brokers
        self.n_controllers = controllers
        self.broker_props = {**FAST_BROKER, **(broker_props or {})}
        self.controller_props = {**FAST_CONTROLLER, **(controller_props or {})}
        self.proxied_links = proxied_links
        self.client_proxies = client_proxies
        self.say = say
        self.hub: ProxyHub | None = None
        self.local: _Local | None = None
        self.paused: set[int] = set()

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float = 120.0, attempts: int = 3) -> None:
        """Format and start; a port taken between picking and binding is retried on
        fresh ports (LocalCluster picks free ports before the nodes bind them)."""
        for attempt in range(attempts):
            shutil.rmtree(self.dir, ignore_errors=True)
            self._prepare()
            try:
                self.local.start(timeout_s=timeout_s)
                return
            except RuntimeError as e:
                self.stop()
                if "address already in use" not in str(e) or attempt == attempts - 1:
                    raise
            except BaseException:
                self.stop()
                raise

    def _prepare(self) -> None:
        self._security = None
        self.local = _Local(self.dir, controllers=self.n_controllers, brokers=self.n_brokers,
                            broker_props=self.broker_props, controller_props=self.controller_props,
                            secure=self.secure)
        self.local.node_props = {}
        spec = self.local.spec
        if self.controller_bootstrap:
            first = min(spec.controllers, key=lambda n: n.id)
            for b in spec.brokers:
                self.local.node_props[b.id] = {
                    "controller.quorum.voters": "",
                    "controller.quorum.bootstrap.servers": f"127.0.0.1:{first.port}"}
            self.local.apply_node_props()
        if not (self.proxied_links or self.client_proxies):
            return
        self.hub = ProxyHub()
        advertised: dict[int, int] = {}
        if self.client_proxies:
            for b in spec.brokers:
                link = self.hub.add(f"client->{b.id}", ("127.0.0.1", b.port))
                advertised[b.id] = link.listen_port
                listener = "SASL_SSL" if self.secure else "PLAINTEXT"
                self.local.node_props.setdefault(b.id, {})[
                    "advertised.listeners"] = f"{listener}://127.0.0.1:{link.listen_port}"
        if self.proxied_links:
            for src in spec.brokers:
                routes = []
                for dst in spec.nodes:
                    if dst.id == src.id:
                        continue
                    link = self.hub.add(f"{src.id}->{dst.id}", ("127.0.0.1", dst.port))
                    routes.append(f"127.0.0.1:{dst.port}=127.0.0.1:{link.listen_port}")
                    if dst.id in advertised:
                        routes.append(f"127.0.0.1:{advertised[dst.id]}=127.0.0.1:{link.listen_port}")
                self.local.node_env[src.id] = {"KETCH_CONNECT_VIA": ",".join(routes)}
        self.local.apply_node_props()

    def stop(self) -> None:
        if self.local is not None:
            for node_id in list(self.paused):
                self.local.signal_node(node_id, signal.SIGCONT)
            self.paused.clear()
            self.local.stop(timeout_s=10)
        if self.hub is not None:
            self.hub.close()
            self.hub = None

    def __enter__(self) -> "ChaosCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ topology

    @property
    def spec(self):
        return self.local.spec

    @property
    def bootstrap_servers(self) -> str:
        return self.spec.bootstrap_servers

    @property
    def client_props(self) -> dict[str, str]:
        """What a client adds to log in (librdkafka's names, which Ketch's clients read
        too); {} on a plaintext cluster."""
        return {} if self.local.security is None else self.local.security.client_props()

    @property
    def client_properties_file(self) -> str | None:
        """The same, as the file a worker process reads (None: plaintext)."""
        name = self.spec.client_properties
        return None if not name else os.path.join(self.dir, name)

    @property
    def security(self) -> ClientSecurity:
        if self._security is None:      # loaded once per formatted cluster (its own CA)
            self._security = ClientSecurity.from_config(self.client_props.get)
        return self._security

    def ask(self, port: int, api_key: int, api_version: int, body: Any,
            timeout_s: float = 5.0) -> Any:
        """``roundtrip`` to one node, logged in on a secured cluster."""
        return roundtrip(port, api_key, api_version, body, timeout_s=timeout_s,
                         security=self.security)

    @property
    def broker_ids(self) -> list[int]:
        return [b.id for b in self.spec.brokers]

    @property
    def controller_ids(self) -> list[int]:
        return [c.id for c in self.spec.controllers]

    def node(self, node_id: int) -> NodeSpec:
        return self.spec.node(node_id)

    def port(self, node_id: int) -> int:
        return self.node(node_id).port

    def is_running(self, node_id: int) -> bool:
        proc = self.local.processes.get(node_id)
        return proc is not None and proc.poll() is None

    def alive_brokers(self) -> list[int]:
        return [b for b in self.broker_ids if self.is_running(b) and b not in self.paused]

    def alive_controllers(self) -> list[int]:
        return [c for c in self.controller_ids if self.is_running(c) and c not in self.paused]

    # ------------------------------------------------------------ process faults

    def kill(self, node_id: int) -> None:
        self.say(f"SIGKILL {self._name(node_id)}")
        self.local.kill_node(node_id)
        self.paused.discard(node_id)

    def kill_many(self, node_ids) -> None:
        """SIGKILL each node back to back, then reap them: nearly the same moment."""
        self.say("SIGKILL " + ", ".join(self._name(n) for n in node_ids) + " at once")
        for n in node_ids:
            proc = self.local.processes.get(n)
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        for n in node_ids:
            self.local.kill_node(n)
            self.paused.discard(n)

    def terminate(self, node_id: int, timeout_s: float = 30.0) -> int | None:
        self.say(f"SIGTERM {self._name(node_id)} (controlled shutdown)")
        self.paused.discard(node_id)
        return self.local.stop_node(node_id, timeout_s=timeout_s)

    def pause(self, node_id: int) -> None:
        self.say(f"SIGSTOP {self._name(node_id)}")
        self.local.signal_node(node_id, signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        self.say(f"SIGCONT {self._name(node_id)}")
        self.local.signal_node(node_id, signal.SIGCONT)
        self.paused.discard(node_id)

    def start_node(self, node_id: int) -> None:
        self.say(f"start {self._name(node_id)}")
        self.local.start_node(node_id)

    def restart(self, node_id: int, wait_s: float = 60.0) -> None:
        """Start a stopped node and wait until it serves: a broker registered and
        unfenced, a controller answering DescribeQuorum."""
        if self.is_running(node_id):
            self.kill(node_id)
        self.start_node(node_id)
        if self.node(node_id).role == "broker":
            self.wait_broker_live(node_id, wait_s)
        else:
            wait_until(lambda: self.describe_quorum(node_id) is not None, wait_s,
                       f"controller {node_id} to answer")

    def add_controller(self, node_id: int) -> NodeSpec:
        """A new controller (not started): the first controller's server.properties with its
        own id, listener, Raft port and metadata directory. It is no voter of the static
        set, so once started it joins as an observer (KIP-853) until AddRaftVoter adds it."""
        spec = self.spec
        used = {p for n in spec.nodes for p in (n.port, n.raft_port, n.http_port) if p}
        port, raft_port = free_ports(2, exclude=used)
        base = os.path.join(self.dir, f"controller-{node_id}")
        node = NodeSpec(node_id, "controller", port, os.path.join(base, "data"),
                        os.path.join(base, "server.properties"), os.path.join(base, "node.log"),
                        raft_port)
        props = load_properties(min(spec.controllers, key=lambda n: n.id).config)
        props.update({"node.id": str(node_id), "listeners": f"CONTROLLER://127.0.0.1:{port}",
                      "metadata.log.dir": node.data_dir, "ketch.http.port": "-1",
                      # Its Raft address: its listener port plus the offset.
                      "ketch.raft.port.offset": str(raft_port - port)})
        os.makedirs(base, exist_ok=True)
        with open(node.config, "w") as f:
            f.write(format_properties(props))
        spec.nodes.append(node)
        return node

    def _name(self, node_id: int) -> str:
        return f"{self.node(node_id).role} {node_id}"

    # ------------------------------------------------------------ link faults

    def link(self, src: int, dst: int) -> str:
        assert self.hub is not None and self.proxied_links, "start the cluster with proxied_links"
        return f"{src}->{dst}"

    def cut(self, src: int, dst: int, direction: str = "both") -> None:
        self.say(f"cut link {src}->{dst} ({direction})")
        self.hub.cut(self.link(src, dst), direction)

    def delay(self, src: int, dst: int, delay_ms: int, api_keys: tuple[int, ...] | None = None) -> None:
        self.say(f"delay link {src}->{dst} by {delay_ms} ms" +
                 (f" (API keys {list(api_keys)})" if api_keys is not None else ""))
        self.hub.set_delay(self.link(src, dst), delay_ms, api_keys)

    def isolate(self, node_id: int) -> list[str]:
        """Cut every inter-node link from and to ``node_id`` (clients keep reaching it)."""
        names = [n for n in self.hub.links
                 if not n.startswith("client->") and node_id in tuple(map(int, n.split("->")))]
        self.say(f"isolate {self._name(node_id)}: cut {len(names)} links")
        for n in names:
            self.hub.cut(n, "both")
        return names

    def heal(self) -> None:
        """Every link works again, without delay."""
        if self.hub is not None:
            self.say("heal every link")
            self.hub.heal()
            for name in self.hub.links:
                self.hub.set_delay(name, 0)

    # ------------------------------------------------------------ questions

    def metadata(self, topics: list[str] | None, broker_id: int | None = None) -> Any:
        ids = [broker_id] if broker_id is not None else self.alive_brokers()
        last: BaseException | None = None
        for b in ids:
            req = messages.MetadataRequest(
                topics=None if topics is None else [
                    messages.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=False)
            try:
                return self.ask(self.port(b), ApiKey.METADATA, 12, req)
            except OSError as e:
                last = e
        raise ConnectionError(f"no broker answered Metadata: {last!r}")

    def partition_states(self, topic: str, broker_id: int | None = None) -> dict[int, PartitionState]:
        resp = self.metadata([topic], broker_id)
        (t,) = resp.topics
        if t.error_code != ErrorCode.NONE:
            raise ValueError(f"metadata for {topic}: {ErrorCode(t.error_code).name}")
        return {p.partition_index: PartitionState(p.partition_index, p.error_code, p.leader_id,
                                                  p.leader_epoch, tuple(p.replica_nodes),
                                                  tuple(p.isr_nodes))
                for p in t.partitions}

    def eligible_leader_replicas(self, topic: str, partition: int,
                                 broker_id: int | None = None) -> tuple[int, ...]:
        """KIP-966's ELR of a partition as a live broker describes it
        (DescribeTopicPartitions)."""
        R = messages.DescribeTopicPartitionsRequest
        ids = [broker_id] if broker_id is not None else self.alive_brokers()
        last: BaseException | None = None
        for b in ids:
            try:
                resp = self.ask(self.port(b), ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, R(
                    topics=[R.TopicRequest(name=topic)], response_partition_limit=2000))
            except OSError as e:
                last = e
                continue
            (t,) = resp.topics
            for p in t.partitions:
                if p.partition_index == partition:
                    return tuple(p.eligible_leader_replicas or ())
            raise ValueError(f"{topic}-{partition}: not described")
        raise ConnectionError(f"no broker answered DescribeTopicPartitions: {last!r}")

    def partition(self, topic: str, partition: int, broker_id: int | None = None) -> PartitionState:
        return self.partition_states(topic, broker_id)[partition]

    def views(self, topic: str, partition: int) -> dict[int, PartitionState]:
        """The partition as each live broker sees it (images lag one another)."""
        out = {}
        for b in self.alive_brokers():
            try:
                out[b] = self.partition(topic, partition, b)
            except (OSError, ValueError, KeyError):
                pass
        return out

    def latest_view(self, topic: str, partition: int) -> PartitionState | None:
        """The view with the highest leader epoch among live brokers (then the largest ISR
        change seen last is not knowable from Metadata; ties keep the first)."""
        views = list(self.views(topic, partition).values())
        return max(views, key=lambda s: s.leader_epoch) if views else None

    def wait_partition(self, topic: str, partition: int, predicate: Callable[[PartitionState], bool],
                       timeout_s: float, what: str, everywhere: bool = False) -> PartitionState:
        """Until one live broker's view (or every live broker's) satisfies ``predicate``."""
        def probe() -> PartitionState | None:
            views = self.views(topic, partition)
            if not views:
                return None
            good = [v for v in views.values() if predicate(v)]
            if everywhere and len(good) < len(views):
                return None
            return max(good, key=lambda s: s.leader_epoch) if good else None
        return wait_until(probe, timeout_s, f"{topic}-{partition}: {what}")

    def leader_of(self, topic: str, partition: int, timeout_s: float = 30.0) -> int:
        state = self.wait_partition(topic, partition, lambda s: s.leader >= 0, timeout_s, "a leader")
        return state.leader

    def registered_brokers(self, broker_id: int | None = None) -> set[int]:
        """Brokers a live broker lists in Metadata (registered and unfenced)."""
        return {b.node_id for b in self.metadata([], broker_id).brokers}

    def wait_broker_live(self, broker_id: int, timeout_s: float = 60.0) -> None:
        def probe() -> bool:
            others = [b for b in self.alive_brokers() if b != broker_id] or [broker_id]
            return all(broker_id in self.registered_brokers(b) for b in others[:1]) and \
                broker_id in self.registered_brokers(broker_id)
        wait_until(probe, timeout_s, f"broker {broker_id} registered and unfenced")

    def describe_quorum(self, controller_id: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) as one controller knows it, or None."""
        req = messages.DescribeQuorumRequest(topics=[messages.DescribeQuorumRequest.TopicData(
            topic_name="__cluster_metadata",
            partitions=[messages.DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])
        try:
            resp = self.ask(self.port(controller_id), ApiKey.DESCRIBE_QUORUM, 0, req, timeout_s=2)
        except OSError:
            return None
        p = resp.topics[0].partitions[0]
        if p.error_code != ErrorCode.NONE:
            return None
        return p.leader_id, p.leader_epoch

    def describe_voters(self, controller_id: int) -> QuorumView | None:
        """The quorum as one controller describes it (DescribeQuorum v2), or None."""
        req = messages.DescribeQuorumRequest(topics=[messages.DescribeQuorumRequest.TopicData(
            topic_name="__cluster_metadata",
            partitions=[messages.DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])
        try:
            resp = self.ask(self.port(controller_id), ApiKey.DESCRIBE_QUORUM, 2, req, timeout_s=2)
        except OSError:
            return None
        p = resp.topics[0].partitions[0]
        if p.error_code != ErrorCode.NONE:
            return None
        return QuorumView(p.leader_id, p.leader_epoch, p.high_watermark,
                          tuple(sorted(v.replica_id for v in p.current_voters)),
                          tuple(sorted(n.node_id for n in resp.nodes)))

    def unfenced_brokers(self) -> set[int] | None:
        """The brokers the active controller counts as registered and unfenced
        (DescribeCluster to the controller), or None without an active controller."""
        active = self.active_controller()
        if active is None:
            return None
        resp = self.ask(self.port(active), ApiKey.DESCRIBE_CLUSTER, 0,
                         messages.DescribeClusterRequest(include_cluster_authorized_operations=False))
        return {b.broker_id for b in resp.brokers}

    def active_controller(self) -> int | None:
        """The Raft leader as the live controllers report it: the answer with the highest
        epoch, if that leader is itself alive and agrees."""
        answers = [a for c in self.alive_controllers() if (a := self.describe_quorum(c)) is not None]
        answers = [a for a in answers if a[0] >= 0]
        if not answers:
            return None
        leader, epoch = max(answers, key=lambda a: a[1])
        if leader not in self.alive_controllers():
            return None
        own = self.describe_quorum(leader)
        return leader if own is not None and own[0] == leader else None

    def wait_active_controller(self, timeout_s: float = 30.0, not_in: tuple[int, ...] = ()) -> int:
        return wait_until(lambda: (a := self.active_controller()) is not None and a not in not_in and a,
                          timeout_s, "an active controller")

    def high_watermark(self, topic: str, partition: int, broker_id: int | None = None) -> int:
        """ListOffsets(latest) from the partition's leader: its high watermark."""
        leader = broker_id if broker_id is not None else self.leader_of(topic, partition)
        cls = messages.ListOffsetsRequest
        resp = self.ask(self.port(leader), ApiKey.LIST_OFFSETS, 7, cls(
            replica_id=-1, isolation_level=0, topics=[cls.ListOffsetsTopic(
                name=topic, partitions=[cls.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=-1)])]))
        r = resp.topics[0].partitions[0]
        if r.error_code != ErrorCode.NONE:
            raise ValueError(f"ListOffsets {topic}-{partition} on broker {leader}: "
                             f"{ErrorCode(r.error_code).name}")
        return r.offset

    # ------------------------------------------------------------ admin

    def alter_topic_configs(self, topic: str, configs: dict[str, str]) -> tuple[int, str | None]:
        """IncrementalAlterConfigs (SET) through a live broker, which forwards it to the
        active controller; answered once committed. (error code, error message)."""
        cls = messages.IncrementalAlterConfigsRequest
        req = cls(resources=[cls.AlterConfigsResource(
            resource_type=2, resource_name=topic,
            configs=[cls.AlterConfigsResource.AlterableConfig(name=k, config_operation=0, value=v)
                     for k, v in configs.items()])], validate_only=False)
        last: BaseException | None = None
        for b in self.alive_brokers():
            try:
                (r,) = self.ask(self.port(b), ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, req, timeout_s=30).responses
                return r.error_code, r.error_message
            except OSError as e:
                last = e
        raise ConnectionError(f"no broker answered IncrementalAlterConfigs: {last!r}")

    def topic_config(self, topic: str, key: str, broker_id: int) -> str | None:
        """One topic config as one broker's DescribeConfigs shows it (its metadata image)."""
        cls = messages.DescribeConfigsRequest
        req = cls(resources=[cls.DescribeConfigsResource(resource_type=2, resource_name=topic,
                                                         configuration_keys=[key])],
                  include_synonyms=False, include_documentation=False)
        (r,) = self.ask(self.port(broker_id), ApiKey.DESCRIBE_CONFIGS, 4, req).results
        if r.error_code != ErrorCode.NONE:
            raise ValueError(f"DescribeConfigs {topic} on broker {broker_id}: {ErrorCode(r.error_code).name}")
        return next((c.value for c in r.configs if c.name == key), None)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     configs: dict[str, str] | None = None,
                     assignment: dict[int, list[int]] | None = None,
                     wait_s: float = 60.0, wait_full_isr: bool = True) -> int:
        """CreateTopics through a live broker (forwarded to the active controller); with
        ``assignment`` (partition -> replicas, preferred leader first) placement is fixed.
        Returns the error code; on success waits until every live broker sees a leader
        (and, by default, the full ISR) for every partition."""
        cls = messages.CreateTopicsRequest
        topic = cls.CreatableTopic(
            name=name, num_partitions=-1 if assignment else partitions,
            replication_factor=-1 if assignment else replication_factor,
            assignments=[cls.CreatableTopic.CreatableReplicaAssignment(partition_index=p, broker_ids=list(r))
                         for p, r in sorted((assignment or {}).items())],
            configs=[cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                     for k, v in (configs or {}).items()])
        req = cls(topics=[topic], timeout_ms=int(wait_s * 1000), validate_only=False)
        resp = None
        for b in self.alive_brokers():
            try:
                resp = self.ask(self.port(b), ApiKey.CREATE_TOPICS, 5, req, timeout_s=wait_s + 5)
                break
            except OSError:
                continue
        if resp is None:
            raise ConnectionError("no broker answered CreateTopics")
        code = resp.topics[0].error_code
        if code != ErrorCode.NONE:
            return code
        count = len(assignment) if assignment else partitions
        rf = len(next(iter(assignment.values()))) if assignment else replication_factor

        def ready() -> bool:
            for b in self.alive_brokers():
                states = self.partition_states(name, b)
                if len(states) != count:
                    return False
                for s in states.values():
                    if s.leader < 0 or (wait_full_isr and len(s.isr) != rf):
                        return False
            return True
        wait_until(ready, wait_s, f"topic {name} to have leaders{' and full ISRs' if wait_full_isr else ''}")
        return code
