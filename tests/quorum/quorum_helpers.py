"""Test helpers: Kafka-protocol calls a broker makes to the controllers, and a cluster of
real controller processes (``python -m quorum``) on 127.0.0.1 with random ports, always
stopped by pid."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from clients.cli.launcher import free_ports  # listeners below the ephemeral range
from clients.connection import KafkaConnection, connect
from clients.protocol import ApiKey, messages
from broker.metadata_follower import MetadataImageListener
from quorum.replicated_log import CommittedBatch, MetadataSnapshot
from metadata_log.committed import METADATA_TOPIC

REPO = Path(__file__).resolve().parents[2]
SECRET = "process-test-secret"


# -- what a broker sends ---------------------------------------------------------------------


async def register_broker(conn: KafkaConnection, broker_id: int, port: int = 9092,
                          rack: str | None = None) -> Any:
    version = conn.pick_version(ApiKey.BROKER_REGISTRATION, 0, 4)
    return await conn.request(ApiKey.BROKER_REGISTRATION, version, messages.BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id="ketch-test", incarnation_id=uuid.uuid4(),
        listeners=[messages.BrokerRegistrationRequest.Listener(
            name="PLAINTEXT", host="127.0.0.1", port=port, security_protocol=0)],
        rack=rack))


async def heartbeat(conn: KafkaConnection, broker_id: int, broker_epoch: int,
                    metadata_offset: int = 1 << 40) -> Any:
    version = conn.pick_version(ApiKey.BROKER_HEARTBEAT, 0, 1)
    return await conn.request(ApiKey.BROKER_HEARTBEAT, version, messages.BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=broker_epoch, current_metadata_offset=metadata_offset))


async def create_topic(conn: KafkaConnection, name: str, partitions: int, replication: int) -> Any:
    version = conn.pick_version(ApiKey.CREATE_TOPICS, 2, 7)
    return await conn.request(ApiKey.CREATE_TOPICS, version, messages.CreateTopicsRequest(
        topics=[messages.CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication)],
        timeout_ms=10_000), timeout_s=60)


async def describe_quorum(conn: KafkaConnection) -> Any:
    request = messages.DescribeQuorumRequest(topics=[messages.DescribeQuorumRequest.TopicData(
        topic_name=METADATA_TOPIC, partitions=[messages.DescribeQuorumRequest.PartitionData(
            partition_index=0)])])
    response = await conn.request(ApiKey.DESCRIBE_QUORUM, conn.pick_version(ApiKey.DESCRIBE_QUORUM, 1, 2), request)
    return response.topics[0].partitions[0]


class LogCollector(MetadataImageListener):
    """An observer listener keeping every committed (offset, record bytes), and the image
    they replay into."""

    def __init__(self) -> None:
        super().__init__()
        self.records: dict[int, bytes] = {}
        self.batch_offsets: dict[int, CommittedBatch] = {}
        self.snapshots: list[MetadataSnapshot] = []

    def handle_commit(self, batch: CommittedBatch) -> None:
        super().handle_commit(batch)
        self.batch_offsets[batch.base_offset] = batch
        for i, r in enumerate(batch.records):
            self.records[batch.base_offset + i] = r

    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None:
        super().handle_load_snapshot(snapshot)
        self.snapshots.append(snapshot)
        self.records = {}
        self.batch_offsets = {}


# -- controller processes ------------------------------------------------------------------------


class ControllerProcesses:
    """n controllers as `python -m quorum` processes. Every process started is killed by
    pid in `close()` (call it from a finally or a fixture)."""

    def __init__(self, tmp_path: Path, n: int = 3, extra: dict[str, str] | None = None,
                 voters_count: int | None = None) -> None:
        """`voters_count`: how many of the n (the first ids) form the quorum at start; the
        others are configured to join it (KIP-853: not in controller.quorum.voters)."""
        ports = free_ports(2 * n)
        self.ids = list(range(1, n + 1))
        self.kafka_ports = {i: ports[i - 1] for i in self.ids}
        self.raft_ports = {i: ports[n + i - 1] for i in self.ids}
        self.tmp_path = tmp_path
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.logs: dict[int, Path] = {}
        initial = self.ids[:voters_count or n]
        voters = ",".join(f"{i}@127.0.0.1:{self.kafka_ports[i]}" for i in initial)
        raft = ",".join(f"{i}@127.0.0.1:{self.raft_ports[i]}" for i in initial)
        for i in self.ids:
            props = {
                "node.id": str(i), "process.roles": "controller",
                "controller.quorum.voters": voters, "ketch.raft.voters": raft,
                "listeners": f"CONTROLLER://127.0.0.1:{self.kafka_ports[i]}",
                "metadata.log.dir": str(tmp_path / f"controller-{i}"),
                "ketch.cluster.secret": SECRET,
                "ketch.controller.write.timeout.ms": "2000",
                "broker.session.timeout.ms": "600000",
                "broker.heartbeat.interval.ms": "2000",
                **(extra or {}),
            }
            if i not in initial:      # a joining controller: its Raft port is listener + offset
                props["ketch.raft.port.offset"] = str(self.raft_ports[i] - self.kafka_ports[i])
            (tmp_path / f"controller-{i}.properties").write_text(
                "".join(f"{k}={v}\n" for k, v in props.items()))

    def address(self, i: int) -> tuple[str, int]:
        return ("127.0.0.1", self.kafka_ports[i])

    def start(self, i: int) -> None:
        assert i not in self.procs
        log = self.tmp_path / f"controller-{i}.log"
        self.logs[i] = log
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with open(log, "ab") as f:
            self.procs[i] = subprocess.Popen(
                [sys.executable, "-m", "quorum", "--config",
                 str(self.tmp_path / f"controller-{i}.properties")],
                cwd=str(REPO), env=env, stdout=subprocess.DEVNULL, stderr=f)

    def kill(self, i: int, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(i)
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)

    def signal(self, i: int, sig: int) -> None:
        """Send a signal that leaves the process running (SIGSTOP, SIGCONT)."""
        os.kill(self.procs[i].pid, sig)

    def close(self) -> None:
        for i in list(self.procs):
            proc = self.procs.pop(i)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def live(self) -> list[int]:
        return sorted(self.procs)

    def problems(self) -> list[str]:
        """Tracebacks or CRITICAL lines in any controller's log (a journal conflict, a crash)."""
        return [f"controller {i}: {line}" for i in self.logs
                for line in self.log_text(i).splitlines()
                if "Traceback" in line or " CRITICAL " in line]

    def log_text(self, i: int) -> str:
        return self.logs[i].read_text() if i in self.logs else ""

    async def connect(self, i: int, timeout_s: float = 60.0) -> KafkaConnection:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                conn = await connect(*self.address(i), timeout_s=2)
                await conn.negotiate_versions()
                return conn
            except (OSError, ConnectionError, asyncio.TimeoutError):
                if time.monotonic() > deadline:
                    raise AssertionError(f"controller {i} is not listening:\n{self.log_text(i)}")
                await asyncio.sleep(0.05)

    async def active(self, timeout_s: float = 60.0) -> tuple[int, KafkaConnection]:
        """The active controller (the one that accepts a no-op write), and a connection."""
        deadline = time.monotonic() + timeout_s
        while True:
            for i in self.live():
                conn = await self.connect(i)
                try:
                    state = await describe_quorum(conn)
                    if state.leader_id == i:
                        # Registration of an id that is never used again: writes iff active.
                        response = await register_broker(conn, 999_000 + i)
                        if response.error_code == 0:
                            return i, conn
                except (OSError, ConnectionError, asyncio.TimeoutError):
                    pass
                conn.close()
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {i}\n{self.log_text(i)[-3000:]}" for i in self.live())
                raise AssertionError(f"no active controller within {timeout_s}s\n{logs}")
            await asyncio.sleep(0.05)
