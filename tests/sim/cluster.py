"""`SimCluster`: real broker cores, the real controller and a seeded network, in one process.

Theory of operation
-------------------
The simulator plays every shell of a Ketch cluster over the pure cores, in the style of
Kafka's ``RaftEventSimulationTest`` and TigerBeetle's VOPR (STYLE.md 1 and 6):

- **Controllers** (``tests/sim/controllers.py``): real ``QuorumController``s over the
  real pure ``ReplicatedLogState``; a majority must be up to commit; one is active.
- **Brokers** (``tests/sim/broker_shell.py``): a real ``ReplicaManager`` over a
  ``LogManager`` over ``SimStorage`` each, with the sim playing every broker shell
  (lifecycle, metadata observer, replica fetcher, AlterPartition channel, produce path).
  ``kill`` is SIGKILL (page cache kept), ``power_cut`` loses unflushed bytes; either way
  the broker restarts from its storage with a new incarnation and broker epoch.
- **Clients** (``tests/sim/workload.py``) send produce and metadata requests through
  the same network (``tests/sim/network.py``).

``SimCluster`` owns them, the fault verbs (kill, restart, pause, resume, heal, the
controllers' too), admin operations (create a topic, alter a topic config, retried until
an active controller answers) and views (the committed leader acting as leader).
After every event the cluster calls ``on_step`` (the continuous invariant checks); the
``trace`` keeps the last notable events for a failure report.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from broker.replica.partition import Role
from broker.replica_manager import ReplicaManager
from clients.protocol import messages as M
from clients.types import TopicPartition
from metadata_log.image import MetadataImage
from quorum.controller import ControllerConfig, QuorumController
from quorum.controller.result import ControllerResult
from tests.sim.broker_shell import SimBroker
from tests.sim.controllers import SimControllers
from tests.sim.network import NetworkFaults, SimLoop, SimNetwork

__all__ = ["SimBroker", "SimCluster", "SimConfig"]

IAC = M.IncrementalAlterConfigsRequest


@dataclass(frozen=True, slots=True)
class SimConfig:
    brokers: int = 3
    controllers: int = 3
    heartbeat_interval_ms: int = 100
    session_timeout_ms: int = 600
    replica_lag_time_max_ms: int = 400
    replica_fetch_backoff_ms: int = 50
    fetch_wait_max_ms: int = 100
    request_timeout_ms: int = 250
    metadata_wait_max_ms: int = 300
    election_timeout_ms: int = 300
    hw_checkpoint_interval_ms: int = 500
    # Kafka's broker publishes metadata to its ReplicaManager only after its initial
    # catch-up: once the log it replayed holds its own (new) registration. Applying the
    # image at once (False; broker/broker.py does so today) lets a restarted broker act
    # as leader at its old leader epoch with a log a power cut shortened
    # (tests/sim/bugs.py: story_restarted_leader_before_registration).
    wait_for_own_registration: bool = True
    unclean_leader_election_enable: bool = False
    faults: NetworkFaults = field(default_factory=NetworkFaults)


# ---------------------------------------------------------------- the cluster

class SimCluster:
    def __init__(self, seed: int, config: SimConfig | None = None,
                 core_factory: Callable[..., ReplicaManager] = ReplicaManager,
                 trace_length: int = 60) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.loop = SimLoop(now_ms=0)
        self.network = SimNetwork(self.loop, self.rng, self.config.faults)
        self.trace: deque[str] = deque(maxlen=trace_length)
        self.controller_config = ControllerConfig(
            broker_session_timeout_ms=self.config.session_timeout_ms,
            broker_heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            unclean_leader_election_enable=self.config.unclean_leader_election_enable,
            leader_imbalance_check_interval_ms=2_000)
        self.controllers = SimControllers(self, self.config.controllers, self.controller_config, self.rng)
        self.brokers: dict[int, SimBroker] = {}
        for i in range(1, self.config.brokers + 1):
            b = self.brokers[i] = SimBroker(self, i, core_factory)
            b.metadata_interval_ms = self.rng.randint(0, 30)
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.power_cuts: list[tuple[int, int]] = []     # (time, broker id)
        self.ack_listeners: list[Callable[[int, TopicPartition, int, int], None]] = []
        self.commit_listeners: list[Callable[[Any, tuple], None]] = []
        self.step_listeners: list[Callable[[str], None]] = []
        self.loop.after_event = self._after_event
        self.controllers.elect(self.controllers.names[0])
        for b in self.brokers.values():
            b.start()

    # ---------------------------------------------------------- plumbing

    def note(self, what: str) -> None:
        self.trace.append(f"t={self.loop.now_ms} {what}")

    def on_acks_all(self, broker_id: int, tp: TopicPartition, leader_epoch: int,
                    required_offset: int) -> None:
        """A leader completed an acks=all produce: its HW passed ``required_offset``."""
        for listener in self.ack_listeners:
            listener(broker_id, tp, leader_epoch, required_offset)

    def on_commit(self, batch: Any, records: tuple) -> None:
        for listener in self.commit_listeners:
            listener(batch, records)

    def _after_event(self, node: str) -> None:
        for listener in self.step_listeners:
            listener(node)

    def run_for(self, ms: int) -> None:
        self.loop.run_until(self.loop.now_ms + ms)

    def run_until(self, condition: Callable[[], bool], timeout_ms: int) -> bool:
        """Run until ``condition()`` holds (checked after every event) or the time is up."""
        if condition():
            return True
        return self.loop.run_until(self.loop.now_ms + timeout_ms, condition)

    # ---------------------------------------------------------- faults

    def kill(self, broker_id: int, power_cut: bool = False) -> None:
        b = self.brokers[broker_id]
        if not self.loop.is_up(b.name):
            return
        self.note(f"{b.name} {'power cut' if power_cut else 'killed'}")
        if power_cut:
            self.power_cuts.append((self.loop.now_ms, broker_id))
        epoch = b.broker_epoch
        b.stop(power_cut)
        if not power_cut:
            # The kernel closes a killed process's sockets (its host lives; a power cut
            # sends nothing): the active controller learns it (issue 17).
            self.connection_closed(broker_id, epoch)

    def connection_closed(self, broker_id: int, broker_epoch: int) -> None:
        """The connection broker ``broker_id`` heartbeats on closes: the active controller
        hears of it after the link's delay (quorum/server.py's connection_closed). Also a
        live broker's benign reconnect (the explorer's ``reconnect``)."""
        active = self.controllers.active
        if active is None or broker_epoch < 0:
            return

        def report(c: QuorumController, now_ms: int) -> ControllerResult:
            c.handle_broker_disconnected(broker_id, broker_epoch, now_ms)
            return ControllerResult((), None)
        self.network.send(self.brokers[broker_id].name, active,
                          lambda: self.controllers.handle(active, report))

    def restart(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        if self.loop.is_up(b.name):
            return
        self.loop.start(b.name)
        self.note(f"{b.name} restarted")
        b.start()

    def pause(self, node: str) -> None:
        self.note(f"{node} paused")
        self.loop.pause(node)
        if node in self.controllers.names:
            self.controllers.maybe_elect()

    def resume(self, node: str) -> None:
        self.note(f"{node} resumed")
        self.loop.resume(node)
        if node in self.controllers.names:
            self.controllers.maybe_elect()

    def kill_controller(self, name: str) -> None:
        if not self.loop.is_up(name):
            return
        self.note(f"controller {name} killed")
        self.loop.crash(name)
        if self.controllers.active == name:
            self.controllers.controllers[name].deactivate()
            self.controllers.active = None
        self.controllers.maybe_elect()

    def restart_controller(self, name: str) -> None:
        if self.loop.is_up(name):
            return
        self.loop.start(name)
        self.note(f"controller {name} restarted")
        self.controllers.maybe_elect()

    def heal(self) -> None:
        """Remove every network fault, resume and restart everything."""
        self.note("heal")
        self.network.heal()
        for name in self.controllers.names:
            if not self.loop.is_up(name):
                self.restart_controller(name)
            self.loop.resume(name)
        self.controllers.maybe_elect()
        for b in self.brokers.values():
            self.loop.resume(b.name)
            if not self.loop.is_up(b.name):
                self.restart(b.broker_id)

    # ---------------------------------------------------------- admin operations

    def admin(self, handler: Callable[[QuorumController, int], Any], timeout_ms: int = 3_000) -> Any:
        """An admin request on the active controller, retried (NOT_CONTROLLER) until
        answered; the response, or None if no controller answered in time."""
        answer: list[Any] = []
        deadline = self.loop.now_ms + timeout_ms
        while not answer and self.loop.now_ms < deadline:
            ctl = self.controllers
            if ctl.active is not None and self.loop.is_running(ctl.active):
                response = ctl.handle(ctl.active, handler)
                if response is not None:
                    return response
            self.run_for(50)
        return None

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     configs: dict[str, str] | None = None,
                     assignments: list[list[int]] | None = None, timeout_ms: int = 3_000) -> Any:
        """The topic's CreateTopics result; None if no active controller answered in time."""
        R = M.CreateTopicsRequest
        topic = R.CreatableTopic(
            name=name,
            num_partitions=-1 if assignments else partitions,
            replication_factor=-1 if assignments else replication_factor,
            assignments=[R.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                         for i, b in enumerate(assignments or [])],
            configs=[R.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        response = self.admin(lambda c, now: c.handle_create_topics(R(topics=[topic]), now), timeout_ms)
        if response is None:
            self.note(f"create topic {name}: no controller answered")
            return None
        result = response.topics[0]
        assert result.error_code == 0, result
        self.topic_configs[name] = dict(configs or {})
        self.note(f"created topic {name}")
        return result

    def alter_topic_config(self, topic: str, key: str, value: str) -> int:
        request = IAC(validate_only=False, resources=[IAC.AlterConfigsResource(
            resource_type=2, resource_name=topic,
            configs=[IAC.AlterableConfig(name=key, config_operation=0, value=value)])])
        response = self.admin(lambda c, now: c.handle_incremental_alter_configs(request, now))
        assert response is not None
        self.topic_configs.setdefault(topic, {})[key] = value
        self.note(f"set {topic} {key}={value}")
        return response.responses[0].error_code

    # ---------------------------------------------------------- views

    def unclean_allowed(self, tp: TopicPartition) -> bool:
        """Whether the controller may elect a replica outside the ISR for ``tp`` now."""
        if self.config.unclean_leader_election_enable:
            return True
        for resource, configs in self._topic_configs_seen():
            if resource == tp.topic and configs.get("unclean.leader.election.enable") == "true":
                return True
        return False

    def durability_exempt_before_ms(self) -> int:
        """Records acknowledged before this time may be lost without breaking a promise:
        a power cut took a replica's unflushed tail, and Kafka (like Ketch) does not fsync
        on ack but relies on replicas failing independently. A power cut followed by
        kills, pauses or fencing of the other replicas can leave it the last ISR member,
        elected with a shorter log (SCENARIOS N5 is the correlated case). Deciding exactly
        which records a power cut endangered needs the page-cache state of every replica
        over time; the sim takes the coarse, safe bound: everything acknowledged before
        the last power cut. -1: no power cut."""
        return self.power_cuts[-1][0] if self.power_cuts else -1

    def _topic_configs_seen(self):
        return self.topic_configs.items()

    @property
    def image(self) -> MetadataImage:
        return self.controllers.image

    def registration(self, tp: TopicPartition):
        topic = self.image.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The committed leader, once it acts as leader at that epoch (None otherwise)."""
        reg = self.registration(tp)
        if reg is None or reg.leader < 0:
            return None
        b = self.brokers[reg.leader]
        if not self.loop.is_running(b.name) or b.core is None:
            return None
        hosted = b.core.partitions.get(tp)
        if hosted is None or hosted.replica.role is not Role.LEADER:
            return None
        return reg.leader if hosted.replica.leader_epoch == reg.leader_epoch else None

    def live_brokers(self) -> list[SimBroker]:
        return [b for b in self.brokers.values() if b.core is not None and self.loop.is_up(b.name)]

    def node_names(self) -> list[str]:
        return list(self.controllers.names) + [b.name for b in self.brokers.values()]
