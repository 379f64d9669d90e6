"""KIP-853 with real controller processes: a quorum started with one voter grows to three
and shrinks back to one while metadata writes go on (every acknowledged write is in the
final log); a grown controller restarted alone does not elect itself (pysyncobj's
restart gap, closed in quorum/raft.py); a controller back with a wiped disk is not
admitted as the voter it was, and is removed under its old directory id; the refusals on
the wire; DescribeQuorum's directory ids;
``ketch quorum add-controller`` / ``remove-controller``."""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from broker.metadata_follower import MetadataObserver
from clients.properties import load_properties
from clients.protocol.types import parse_uuid_text
from quorum.joining import META_PROPERTIES
from clients.cli.launcher import free_ports
from clients.connection import connect
from quorum_helpers import (
    REPO, ControllerProcesses, LogCollector, create_topic, describe_quorum, register_broker,
)

pytestmark = pytest.mark.process


@pytest.fixture
def controllers(tmp_path):
    cluster = ControllerProcesses(tmp_path, n=3, voters_count=1)
    try:
        yield cluster
    finally:
        cluster.close()
    assert not cluster.problems()


async def directory_of(controllers: ControllerProcesses, i: int) -> uuid.UUID:
    path = controllers.tmp_path / f"controller-{i}" / META_PROPERTIES
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"controller {i} wrote no meta.properties"
        await asyncio.sleep(0.05)
    return parse_uuid_text(load_properties(str(path))["directory.id"])


async def add_voter(conn, controllers: ControllerProcesses, i: int, directory: uuid.UUID):
    request = messages.AddRaftVoterRequest(
        cluster_id=None, timeout_ms=10_000, voter_id=i, voter_directory_id=directory,
        listeners=[messages.AddRaftVoterRequest.Listener(name="CONTROLLER", host="127.0.0.1",
                                                         port=controllers.kafka_ports[i]),
                   messages.AddRaftVoterRequest.Listener(name="RAFT", host="127.0.0.1",
                                                         port=controllers.raft_ports[i])])
    return await conn.request(ApiKey.ADD_RAFT_VOTER, 0, request, timeout_s=30)


async def remove_voter(conn, i: int, directory: uuid.UUID):
    return await conn.request(ApiKey.REMOVE_RAFT_VOTER, 0, messages.RemoveRaftVoterRequest(
        cluster_id=None, voter_id=i, voter_directory_id=directory), timeout_s=30)


async def until_done(controllers: ControllerProcesses, change, timeout_s: float = 60):
    """Retry a voter change while it is refused for a passing reason (not caught up yet,
    another change in flight, leadership moving), as `ketch quorum` does."""
    deadline = time.monotonic() + timeout_s
    while True:
        _, conn = await controllers.active()
        try:
            response = await change(conn)
        finally:
            conn.close()
        if response.error_code == ErrorCode.NONE:
            return
        assert response.error_code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER), response
        assert time.monotonic() < deadline, response
        await asyncio.sleep(0.1)


async def logged(controllers: ControllerProcesses, which: tuple[int, ...], line: str,
                 timeout_s: float = 30) -> None:
    """Wait until one of the controllers `which` has logged `line`."""
    deadline = time.monotonic() + timeout_s
    while not any(line in controllers.log_text(i) for i in which):
        assert time.monotonic() < deadline, f"no controller of {which} logged {line!r}"
        await asyncio.sleep(0.1)


async def ketch(*args: str) -> str:
    """The CLI as a user runs it (asynchronously: the writer goes on meanwhile)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clients.cli", *args, cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    return out.decode()


class Writer:
    """Registers brokers 1, 2, 3... one after the other through the active controller,
    keeping the ids whose registration was acknowledged."""

    def __init__(self, controllers: ControllerProcesses) -> None:
        self.controllers = controllers
        self.acked: list[int] = []
        self.next_id = 1
        self.stopped = False

    async def more_than(self, count: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acked) <= count:
            assert time.monotonic() < deadline, "no metadata write acknowledged"
            await asyncio.sleep(0.02)

    async def run(self) -> None:
        conn = None
        while not self.stopped:
            try:
                if conn is None:
                    _, conn = await self.controllers.active()
                response = await register_broker(conn, self.next_id)
                if response.error_code == ErrorCode.NONE:
                    self.acked.append(self.next_id)
                    self.next_id += 1
                else:
                    conn.close()
                    conn = None
            except (OSError, ConnectionError, asyncio.TimeoutError):
                conn = None
            await asyncio.sleep(0.02)
        if conn is not None:
            conn.close()


def test_one_voter_grows_to_three_and_shrinks_back_under_metadata_writes(controllers) -> None:
    async def scenario():
        controllers.start(1)
        _, conn = await controllers.active()
        conn.close()
        writer = Writer(controllers)
        writing = asyncio.ensure_future(writer.run())
        controllers.start(2)
        controllers.start(3)
        d1, d2, d3 = [await directory_of(controllers, i) for i in (1, 2, 3)]

        _, conn = await controllers.active()
        # Not running, so never caught up: refused with a clear error.
        response = await conn.request(ApiKey.ADD_RAFT_VOTER, 0, messages.AddRaftVoterRequest(
            timeout_ms=1000, voter_id=7, voter_directory_id=uuid.uuid4(), listeners=[
                messages.AddRaftVoterRequest.Listener(name="CONTROLLER", host="127.0.0.1", port=1)]))
        assert response.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert "has not caught up" in response.error_message
        # The last voter cannot go.
        response = await remove_voter(conn, 1, d1)
        assert response.error_code == ErrorCode.INVALID_REQUEST and "last voter" in response.error_message
        conn.close()

        await controllers.connect(2)
        await controllers.connect(3)
        started = time.monotonic()
        acked_before_growth = len(writer.acked)
        await until_done(controllers, lambda c: add_voter(c, controllers, 2, d2))
        # Controller 3 through the CLI, which retries while it catches up.
        await ketch("quorum", "add-controller", "--controller-config",
              str(controllers.tmp_path / "controller-3.properties"),
              "--bootstrap-controller", "127.0.0.1:%d" % controllers.kafka_ports[1])
        grown_s = time.monotonic() - started
        await writer.more_than(acked_before_growth)
        _, conn = await controllers.active()
        # A wiped controller 2 (a new directory) cannot come back as voter 2.
        response = await add_voter(conn, controllers, 2, uuid.uuid4())
        assert response.error_code == ErrorCode.DUPLICATE_VOTER
        state = await describe_quorum(conn)
        conn.close()
        assert sorted(v.replica_id for v in state.current_voters) == [1, 2, 3]
        assert {v.replica_id: v.replica_directory_id for v in state.current_voters} == {1: d1, 2: d2, 3: d3}

        # Controller 1 restarted alone after the growth: it must not elect itself.
        controllers.kill(2, signal.SIGTERM)
        controllers.kill(3, signal.SIGTERM)
        controllers.kill(1, signal.SIGKILL)
        controllers.start(1)
        conn = await controllers.connect(1)
        await asyncio.sleep(1.5)        # 10 minimum election timeouts
        assert (await register_broker(conn, 99_999)).error_code != ErrorCode.NONE
        conn.close()
        # Controller 2 comes back with a wiped disk: a new directory id, which the voter set
        # does not admit as voter 2 (its Raft messages are dropped); 1 and 3 carry on.
        shutil.rmtree(controllers.tmp_path / "controller-2")
        controllers.start(2)
        controllers.start(3)
        await controllers.connect(2)
        await controllers.connect(3)
        assert await directory_of(controllers, 2) != d2
        # Seen before voter 2 goes: once removed, its address is no voter's and nothing is refused.
        await logged(controllers, (1, 3),
                     "refusing Raft messages from 127.0.0.1:%d" % controllers.raft_ports[2])

        started = time.monotonic()
        acked_before_shrink = len(writer.acked)
        # Voter 2 first (under its old directory id): removing 3 first would leave {1, 2}
        # with 2 refused, which could not commit (refused, quorum/voters.py).
        await until_done(controllers, lambda c: remove_voter(c, 2, d2))
        await ketch("quorum", "remove-controller", "--controller-id", "3", "--bootstrap-controller",
              ",".join("127.0.0.1:%d" % controllers.kafka_ports[i] for i in (1, 2, 3)))
        shrunk_s = time.monotonic() - started
        await writer.more_than(acked_before_shrink)
        controllers.kill(2, signal.SIGTERM)
        controllers.kill(3, signal.SIGTERM)
        await asyncio.sleep(0.5)
        writer.stopped = True
        await writing
        # One voter again: controller 1 commits alone.
        active, conn = await controllers.active()
        assert active == 1
        response = await register_broker(conn, 100_000)
        assert response.error_code == ErrorCode.NONE
        state = await describe_quorum(conn)
        assert [v.replica_id for v in state.current_voters] == [1]
        conn.close()
        # Every acknowledged write is in the log of the one voter left.
        collector = LogCollector()
        observer = MetadataObserver([controllers.address(1)], collector, fetch_wait_max_ms=100)
        following = asyncio.ensure_future(observer.run())
        try:
            await observer.wait_for_offset(state.high_watermark - 1, timeout_s=15)
        finally:
            following.cancel()
            observer.close()
        missing = set(writer.acked) - set(collector.image.cluster.brokers)
        assert not missing, f"acknowledged registrations lost: {sorted(missing)}"
        print(f"\ngrow 1->3: {grown_s:.2f}s, shrink 3->1: {shrunk_s:.2f}s, "
              f"{len(writer.acked)} acknowledged writes")

    asyncio.run(scenario())


class BrokerProcess:
    """One `python -m broker` process, killed by pid in `close()`."""

    def __init__(self, tmp_path, props: dict[str, str]) -> None:
        self.config = tmp_path / "broker.properties"
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log = tmp_path / "broker.log"
        with open(self.log, "ab") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "broker", "--config", str(self.config)], cwd=str(REPO),
                env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL, stderr=f)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


async def unfenced_brokers(conn) -> set[int]:
    response = await conn.request(ApiKey.DESCRIBE_CLUSTER, 0, messages.DescribeClusterRequest(
        include_cluster_authorized_operations=False))
    return {b.broker_id for b in response.brokers}


def test_a_broker_bootstrapped_from_one_controller_follows_the_voters(tmp_path) -> None:
    """KIP-853's controller.quorum.bootstrap.servers: the broker is given controller 1 only;
    2 joins, 1 is removed and killed: the broker, which learned the voters from the quorum,
    keeps heartbeating (unfenced past its session timeout) and forwards CreateTopics to 2."""
    session_ms = 2000
    controllers = ControllerProcesses(tmp_path, n=2, voters_count=1, extra={
        "broker.session.timeout.ms": str(session_ms), "broker.heartbeat.interval.ms": "200"})
    (broker_port,) = free_ports(1, exclude=[*controllers.kafka_ports.values(),
                                            *controllers.raft_ports.values()])
    broker = None

    async def scenario():
        nonlocal broker
        controllers.start(1)
        controllers.start(2)
        broker = BrokerProcess(tmp_path, {
            "node.id": "101", "process.roles": "broker", "ketch.cluster.id": "ketch-test",
            "controller.quorum.bootstrap.servers": "127.0.0.1:%d" % controllers.kafka_ports[1],
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
            "log.dirs": str(tmp_path / "broker-data"), "broker.heartbeat.interval.ms": "200"})
        deadline = time.monotonic() + 60
        while True:
            _, conn = await controllers.active()
            registered = 101 in await unfenced_brokers(conn)
            conn.close()
            if registered:
                break
            assert time.monotonic() < deadline and broker.proc.poll() is None, \
                broker.log.read_text()[-3000:]
            await asyncio.sleep(0.1)
        d1, d2 = [await directory_of(controllers, i) for i in (1, 2)]
        await controllers.connect(2)
        await until_done(controllers, lambda c: add_voter(c, controllers, 2, d2))
        await until_done(controllers, lambda c: remove_voter(c, 1, d1))
        # The broker learns the new voters (a NOT_CONTROLLER naming a controller it does not
        # know, or its periodic DescribeQuorum) before the last address it knows goes.
        deadline = time.monotonic() + 15
        while "controller voters: 2@" not in broker.log.read_text():
            assert time.monotonic() < deadline, broker.log.read_text()[-3000:]
            await asyncio.sleep(0.05)
        controllers.kill(1, signal.SIGKILL)
        killed = time.monotonic()
        # Through the broker: forwarded to controller 2, an address it was never given.
        conn = await connect("127.0.0.1", broker_port, timeout_s=5)
        await conn.negotiate_versions()
        try:
            response = await create_topic(conn, "after-the-move", 1, 1)
        finally:
            conn.close()
        assert response.topics[0].error_code == ErrorCode.NONE, response
        await asyncio.sleep(max(0.0, killed + 1.5 * session_ms / 1000 - time.monotonic()))
        active, conn = await controllers.active()
        assert active == 2
        assert 101 in await unfenced_brokers(conn), broker.log.read_text()[-3000:]
        conn.close()

    try:
        asyncio.run(scenario())
    finally:
        if broker is not None:
            broker.close()
        controllers.close()
    assert not controllers.problems()
