"""``ketch up --secure`` as a user runs it: it prints the client properties, with which
confluent-kafka (SASL_SSL, SCRAM-SHA-512) produces and consumes; a wrong password is
refused; the ketch verbs with --dir find the cluster's TLS and SASL settings themselves;
``ketch up --add-controller`` grows the quorum over the secured controllers' listener;
ACLs are on (a user the admin makes may write only once an ACL allows it); SIGTERM stops
everything."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from clients.waiting import wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
KETCH = [sys.executable, "-m", "clients.cli"]


def _up(directory: str, *extra: str) -> tuple[subprocess.Popen, list[str]]:
    """``ketch up`` on ``directory`` until it says it is ready; its process and output."""
    proc = subprocess.Popen([*KETCH, "up", "--dir", directory, "--timeout", "60", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=ENV, cwd=ROOT, start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(x.decode(errors="replace").rstrip("\n"))
                                     for x in proc.stdout], daemon=True).start()
    return proc, lines


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _quorum_status(directory: str) -> dict:
    status = subprocess.run([*KETCH, "quorum", "status", "--dir", directory, "--output", "json"],
                            capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=60)
    assert status.returncode == 0, status.stderr
    return json.loads(status.stdout)


def test_ketch_up_secure(tmp_path) -> None:
    directory = str(tmp_path / "secure")
    proc, lines = _up(directory, "--secure", "--controllers", "1", "--brokers", "1",
                      "--broker-prop", "broker.heartbeat.interval.ms=300",
                      "--broker-prop", "offsets.topic.num.partitions=1",
                      "--controller-prop", "broker.heartbeat.interval.ms=300")
    try:
        def printed() -> bool:
            assert proc.poll() is None, "\n".join(lines)
            return any("Ctrl-C stops the cluster" in x for x in lines)
        wait_until(printed, timeout_s=90, what="ketch up --secure to start")
        start = lines.index(next(x for x in lines if "librdkafka / confluent-kafka:" in x)) + 1
        props = dict(x.split("=", 1) for x in lines[start:start + 5])
        assert props["security.protocol"] == "SASL_SSL" and props["sasl.mechanism"] == "SCRAM-SHA-512"
        bootstrap = next(x.split("=", 1)[1] for x in lines if x.startswith("bootstrap.servers="))

        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient
        conf = {"bootstrap.servers": bootstrap, **props}
        producer = Producer(conf)
        for i in range(3):
            producer.produce("secure-topic", f"s{i}".encode())
        assert producer.flush(20) == 0
        consumer = Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["secure-topic"])
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        consumer.close()
        assert got == [b"s0", b"s1", b"s2"]

        from confluent_kafka import KafkaError, KafkaException
        with pytest.raises(KafkaException):
            AdminClient({**conf, "sasl.password": "wrong"}).list_topics(timeout=2)
        with pytest.raises(KafkaException):        # plaintext to the TLS listener
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)

        listed = subprocess.run([*KETCH, "topic", "list", "--dir", directory], capture_output=True,
                                text=True, env=ENV, cwd=ROOT, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert "secure-topic" in listed.stdout

        # A controller added (KIP-853): it joins over the SASL_SSL controllers' listener,
        # logged in as the brokers are there; the quorum verbs with --dir log in too.
        added = subprocess.run([*KETCH, "up", "--dir", directory, "--add-controller"],
                               capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
        assert added.returncode == 0, added.stdout + added.stderr
        assert "ketch: controller 1002 added" in added.stdout, added.stdout
        assert _quorum_status(directory)["current_voters"] == [1001, 1002]
        producer.produce("secure-topic", b"after the growth")
        assert producer.flush(20) == 0

        # ACLs are on: a new user logs in but may do only what an ACL gives it (admin, the
        # super user, made the user and the ACL with the verbs).
        made = subprocess.run([*KETCH, "user", "create", "alice", "--mechanism", "SCRAM-SHA-512",
                               "--dir", directory], capture_output=True, text=True, timeout=60,
                              env={**ENV, "KETCH_USER_PASSWORD": "alice-secret"}, cwd=ROOT)
        assert made.returncode == 0, made.stderr
        alice = {**conf, "sasl.username": "alice", "sasl.password": "alice-secret"}

        def alice_writes() -> int | None:
            """None once alice's record is acknowledged, else the error code it got."""
            codes: list[int | None] = []

            def delivered(err, _msg) -> None:
                codes.append(None if err is None else err.code())
            p = Producer({**alice, "message.timeout.ms": 5000})
            p.produce("secure-topic", b"alice", on_delivery=delivered)
            p.flush(10)
            return codes[0] if codes else -1
        # Denied (her login itself works: a wrong password would fail the SASL handshake),
        # retried until the broker knows her credentials.
        wait_until(lambda: alice_writes() == KafkaError.TOPIC_AUTHORIZATION_FAILED, 30,
                   "alice's write to be refused for want of an ACL")
        allowed = subprocess.run([*KETCH, "acl", "add", "--allow-principal", "User:alice",
                                  "--operation", "Write", "--topic", "secure-topic", "--dir", directory],
                                 capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=60)
        assert allowed.returncode == 0, allowed.stderr
        wait_until(lambda: alice_writes() is None, 30, "alice's write to be acknowledged once allowed")
    finally:
        _stop(proc)

