"""``ketch up --add-controller`` / ``--remove-controller ID`` as a user runs them (KIP-853,
issue 17: "``ketch up --controllers 1`` can grow to 3 and shrink back while brokers keep
working").

A cluster of one controller and two brokers grows to three controllers and shrinks back to
one while a producer writes with acks=all (min.insync.replicas 2): nothing it was told is
written fails or goes missing, and it still writes after the shrink. The directory follows:
cluster.json and every server.properties name the controllers there are. Bad input, one
line each and a non-zero exit: an unknown id, the last controller (a directory no ``ketch
up`` runs in: tests/cli/test_up_requests.py, with the request channel alone). The same add
on a ``--secure`` cluster is in tests/security/test_ketch_up_secure.py."""
from __future__ import annotations

import asyncio
import os
import threading

import pytest

from clients.properties import load_properties
from integration_helpers import wait_until
from test_ketch_up import KetchUp, _ketch    # the `ketch up` harness of test_ketch_up.py

pytestmark = [pytest.mark.process, pytest.mark.interop]


def describe_quorum(spec: dict):
    """DescribeQuorum, asked of the controllers cluster.json names."""
    from clients.aio.controller_admin import ControllerAdmin
    controllers = ",".join(f"127.0.0.1:{n['port']}" for n in spec["nodes"] if n["role"] == "controller")

    async def ask():
        async with ControllerAdmin(controllers, {"default.api.timeout.ms": 20_000}) as admin:
            return await admin.describe_quorum()
    return asyncio.run(ask())


def _one_line_refusal(result, *needles: str) -> None:
    assert result.returncode != 0, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


class AcksAllWriter:
    """confluent-kafka with acks=all, one record every 20 ms until stopped; counts what
    was acknowledged and what failed."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5})
        self.acked = 0
        self.failed: list[str] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked += 1
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self.stopped.is_set():
            self.producer.produce(self.topic, b"v%d" % i, on_delivery=self._delivered)
            i += 1
            self.producer.poll(0.02)
        self.producer.flush(30)

    def more_than(self, count: int, what: str) -> None:
        wait_until(lambda: self.acked > count, 30, what)


def test_ketch_up_grows_to_three_controllers_and_back_while_acks_all_writes_go_on(tmp_path) -> None:
    directory = str(tmp_path / "grow")
    from confluent_kafka.admin import AdminClient, NewTopic
    up = KetchUp(directory, "--controllers", "1", "--brokers", "2")
    writer = None
    try:
        bootstrap = up.bootstrap()
        up.wait_for_line(lambda x: "Ctrl-C stops the cluster" in x, "ketch up to be ready")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("grow", 1, 2, config={"min.insync.replicas": "2"})])["grow"].result(30)
        writer = AcksAllWriter(bootstrap, "grow")
        writer.thread.start()
        writer.more_than(0, "a first acknowledged write")

        for expected in (1002, 1003):
            added = _ketch("up", "--dir", directory, "--add-controller")
            assert added.returncode == 0, added.stdout + added.stderr
            assert f"ketch: controller {expected} added" in added.stdout, added.stdout
        spec = up.spec()
        controllers = sorted(n["id"] for n in spec["nodes"] if n["role"] == "controller")
        assert controllers == [1001, 1002, 1003]
        quorum = describe_quorum(spec)
        assert sorted(v.replica_id for v in quorum.voters) == [1001, 1002, 1003]
        assert not {o.replica_id for o in quorum.observers} & {1001, 1002, 1003}, quorum
        acked_grown = writer.acked

        _one_line_refusal(_ketch("up", "--dir", directory, "--remove-controller", "7"),
                          "ketch up: --remove-controller 7: 7 is not a controller")
        for gone in (1003, 1002):
            removed = _ketch("up", "--dir", directory, "--remove-controller", str(gone))
            assert removed.returncode == 0, removed.stdout + removed.stderr
            assert f"ketch: controller {gone} removed" in removed.stdout, removed.stdout
            assert not os.path.exists(os.path.join(directory, f"controller-{gone}"))
        _one_line_refusal(_ketch("up", "--dir", directory, "--remove-controller", "1001"),
                          "ketch up: --remove-controller 1001:", "last voter")
        assert acked_grown > 0 and writer.acked > acked_grown

        # Still writable, with acks=all, after the shrink.
        writer.more_than(writer.acked + 20, "acknowledged writes after the shrink")
        spec = up.spec()
        assert sorted(n["id"] for n in spec["nodes"] if n["role"] == "controller") == [1001]
        for node in spec["nodes"]:      # the next `ketch up` starts the controllers there are
            voters = load_properties(node["config"])["controller.quorum.voters"]
            assert [v.split("@")[0] for v in voters.split(",")] == ["1001"], (node["id"], voters)
        writer.stopped.set()
        writer.thread.join(40)
        assert not writer.failed, writer.failed[:5]
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition("grow", 0), timeout=20)
        finally:
            consumer.close()
        assert (low, high) == (0, writer.acked), "every acknowledged record is in the log, once"
        print(f"\n{writer.acked} records acknowledged (acks=all) through a grow 1->3 and a shrink 3->1")
    finally:
        if writer is not None:
            writer.stopped.set()
        code = up.stop()
    assert code == 0, "\n".join(up.lines)
