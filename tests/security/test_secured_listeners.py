"""Two brokers with four listeners each (PLAINTEXT, SASL_SSL, SASL_PLAINTEXT, SSL with client
certificates; brokers replicate over SASL_SSL with PLAIN), driven by the real clients the
issue names, each also with wrong credentials; SCRAM users created with confluent-kafka's
Admin (AlterUserScramCredentials through the controller, replayed into the brokers' images).
Clients bootstrap from broker 1 and find broker 2 on the listener they came in on."""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import subprocess
import time
import uuid

import pytest

from clients.cli.launcher import LocalCluster, free_ports
from clients.properties import format_properties, load_properties
from clients.security.certs import LocalCA
from clients.waiting import wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

PLAIN_USERS = {"admin": "admin-secret", "carol": "carol-secret", "broker": "broker-secret"}
ALICE, ALICE_PW = "alice", "alice-secret"


class Secured:
    def __init__(self, cluster: LocalCluster, ports: dict[str, int], ca: LocalCA, client_cert,
                 all_ports: list[dict[str, int]]) -> None:
        self.cluster = cluster
        self.ports = ports              # broker 1's, by listener name
        self.all_ports = all_ports      # every broker's
        self.ca = ca
        self.client_cert = client_cert

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def broker_log(self) -> str:
        text = ""
        for broker in self.cluster.spec.brokers:
            with open(broker.log) as f:
                text += f.read()
        return text


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("secured")
    ca = LocalCA(str(base / "ca"))
    broker_cert = ca.issue("broker", "broker-1", organization="Ketch")
    client_cert = ca.issue("client", "kcat-client", organization="Ketch tests")
    cluster = LocalCluster(str(base / "cluster"), controllers=1, brokers=2,
                           broker_props={"broker.heartbeat.interval.ms": "300",
                                         "replica.fetch.wait.max.ms": "200",
                                         "offsets.topic.num.partitions": "1"},
                           controller_props={"broker.heartbeat.interval.ms": "300"})
    try:
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="broker" password="broker-secret" '
                + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";")
        taken = [n.port for n in cluster.spec.nodes]
        all_ports = []
        for broker in cluster.spec.brokers:
            extra = dict(zip(("SASL_SSL", "SASL_PLAINTEXT", "SSL", "REAUTH"), free_ports(4, exclude=taken)))
            taken += extra.values()
            ports = {"PLAINTEXT": broker.port, **extra}
            all_ports.append(ports)
            props = load_properties(broker.config)
            props.update({
                "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "ssl.keystore.location": broker_cert.keystore,
                "ssl.truststore.location": ca.ca_path,
                "listener.name.ssl.ssl.client.auth": "required",
                "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
                # A listener whose sessions last 1.5 s (KIP-368).
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,"
                                                  "SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
                "listener.name.reauth.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.reauth.connections.max.reauth.ms": "1500",
            })
            with open(broker.config, "w") as f:
                f.write(format_properties(props))
        cluster.start(timeout_s=60)
        _create_scram_user(f"127.0.0.1:{cluster.spec.brokers[0].port}")
        yield Secured(cluster, all_ports[0], ca, client_cert, all_ports)
    finally:
        cluster.stop(timeout_s=10)


def _create_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(ALICE, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), ALICE_PW.encode()),
        UserScramCredentialUpsertion(ALICE, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), ALICE_PW.encode()),
    ])
    for f in futures.values():
        f.result(timeout=15)

    def described() -> list | None:
        # The broker answers from its image, which replays the controller's records a
        # moment after the write commits (as Kafka's brokers do).
        try:
            infos = admin.describe_user_scram_credentials([ALICE])[ALICE].result(timeout=15)
        except Exception:
            return None
        return sorted((i.mechanism.name, i.iterations) for i in infos.scram_credential_infos)
    wait_until(described, timeout_s=10, what="the broker to replay the SCRAM credentials")
    assert described() == [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 8192)]


def _failures(secured: Secured, listener: str, mechanism: str) -> int:
    """Failed authentications the broker logged for this listener and mechanism."""
    return sum(1 for line in secured.broker_log.splitlines()
               if f"failed authentication on listener {listener} " in line and f": {mechanism}: " in line)


def _topic() -> str:
    return "sec-" + uuid.uuid4().hex[:8]


# ------------------------------------------------------------------ confluent-kafka

def _confluent_round_trip(conf: dict) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    topic = _topic()
    producer = Producer({**conf, "linger.ms": 5})
    for i in range(5):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    consumer.close()
    return got


def test_confluent_kafka_sasl_ssl_scram_sha_512(secured: Secured) -> None:
    conf = {"bootstrap.servers": secured.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": secured.ca.ca_path, "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": ALICE, "sasl.password": ALICE_PW}
    assert _confluent_round_trip(conf) == [f"m{i}".encode() for i in range(5)]


def test_confluent_kafka_wrong_password_fails_with_authentication_error(secured: Secured) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient
    errors: list = []
    admin = AdminClient({"bootstrap.servers": secured.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                         "ssl.ca.location": secured.ca.ca_path, "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": ALICE, "sasl.password": "not-the-password",
                         "error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2)
    wait_until(lambda: admin.poll(0.2) is not None and errors, timeout_s=10, what="error_cb")
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    wait_until(lambda: "failed authentication on listener SASL_SSL" in secured.broker_log, timeout_s=5,
               what="the failed attempt in the broker log")
    assert "not-the-password" not in secured.broker_log


def test_confluent_kafka_reauthenticates_before_its_session_ends(secured: Secured) -> None:
    """KIP-368: librdkafka logs in again on its connection when told the session lifetime;
    the broker renews the session, so nothing is disconnected while producing across
    several lifetimes."""
    import logging
    from confluent_kafka import Producer

    class Lines(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())
    lines = Lines()
    logger = logging.getLogger("secauthn-librdkafka")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{secured.ports['REAUTH']}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": ALICE, "sasl.password": ALICE_PW, "linger.ms": 0,
                         "debug": "security,broker", "logger": logger})
    topic = _topic()
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        producer.produce(topic, b"x")
        assert producer.flush(10) == 0
        time.sleep(0.25)
    producer.flush(10)
    renewals = [x for x in lines.lines if "Auth in state REAUTH" in x]
    assert len(renewals) >= 2, lines.lines[-20:]
    assert not [x for x in lines.lines if "Disconnected" in x], [x for x in lines.lines if "Disconnected" in x]
    assert "ended without re-authentication" not in secured.broker_log


# ------------------------------------------------------------------ kafka-python

def test_kafka_python_sasl_plaintext_scram_sha_256(secured: Secured) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    conf = {"bootstrap_servers": secured.bootstrap("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": ALICE,
            "sasl_plain_password": ALICE_PW}
    topic = _topic()
    producer = KafkaProducer(**conf)
    for i in range(3):
        producer.send(topic, f"k{i}".encode()).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                             group_id="g-" + topic, **conf)
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == 3:
            break
    consumer.close()
    assert got == [b"k0", b"k1", b"k2"]


def test_kafka_python_wrong_password(secured: Secured) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError
    before = _failures(secured, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    # kafka-python logs the broker's SASL_AUTHENTICATION_FAILED and gives up bootstrapping.
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(bootstrap_servers=secured.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=ALICE,
                      sasl_plain_password="wrong", bootstrap_timeout_ms=3000,
                      max_block_ms=3000)
    wait_until(lambda: _failures(secured, "SASL_PLAINTEXT", "SCRAM-SHA-256") > before, timeout_s=5,
               what="the failed SCRAM-SHA-256 login in the broker log")


# ------------------------------------------------------------------ aiokafka

def test_aiokafka_sasl_ssl_plain_and_wrong_password(secured: Secured) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError
    from aiokafka.helpers import create_ssl_context

    async def run() -> None:
        context = create_ssl_context(cafile=secured.ca.ca_path)
        conf = {"bootstrap_servers": secured.bootstrap("SASL_SSL"), "security_protocol": "SASL_SSL",
                "ssl_context": context, "sasl_mechanism": "PLAIN",
                "sasl_plain_username": "carol", "sasl_plain_password": PLAIN_USERS["carol"]}
        topic = _topic()
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id="g-" + topic, auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            got = []
            while len(got) < 3:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                got += [r.value for rs in batch.values() for r in rs]
        finally:
            await consumer.stop()
        assert got == [b"a0", b"a1", b"a2"]
        before = _failures(secured, "SASL_SSL", "PLAIN")
        bad = AIOKafkaProducer(**{**conf, "sasl_plain_password": "nope", "request_timeout_ms": 5000})
        # aiokafka reports the failed SaslAuthenticate as a failed bootstrap.
        with pytest.raises(KafkaConnectionError):
            await bad.start()
        # Logged after the answer went out: wait for the line.
        wait_until(lambda: _failures(secured, "SASL_SSL", "PLAIN") > before, timeout_s=5,
                   what="the failed PLAIN login in the broker log")
        await bad.stop()

    asyncio.run(run())


# ------------------------------------------------------------------ kcat, SSL with a client certificate

def _kcat(secured: Secured, *args: str, with_cert: bool = True, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    opts = ["-b", secured.bootstrap("SSL"), "-X", "security.protocol=SSL",
            "-X", f"ssl.ca.location={secured.ca.ca_path}"]
    if with_cert:
        opts += ["-X", f"ssl.certificate.location={secured.client_cert.certificate}",
                 "-X", f"ssl.key.location={secured.client_cert.key}"]
    return subprocess.run(["kcat", *opts, *args], input=stdin, capture_output=True, timeout=30)


def test_kcat_ssl_with_a_client_certificate(secured: Secured) -> None:
    topic = _topic()
    produced = _kcat(secured, "-P", "-t", topic, stdin=b"c0\nc1\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat(secured, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [b"c0", b"c1"]
    refused = _kcat(secured, "-L", "-m", "2", with_cert=False)
    assert refused.returncode != 0


# ------------------------------------------------------------------ the network layer's refusals

def _closed_without_answer(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True


def test_requests_before_authentication_close_the_connection(secured: Secured) -> None:
    from clients.protocol import ApiKey, messages
    from clients.protocol.framing import ClientConnection
    conn = ClientConnection("raw")
    _, data = conn.send(ApiKey.METADATA, 12, messages.MetadataRequest(topics=None))
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(data)
        assert _closed_without_answer(sock)


def test_wrong_protocol_on_a_port_is_closed_cleanly(secured: Secured) -> None:
    with socket.create_connection(("127.0.0.1", secured.ports["SSL"])) as sock:   # plaintext on TLS
        sock.sendall(b"\x00\x00\x00\x10" + b"\x00" * 16)
        assert _closed_without_answer(sock)
    context = ssl.create_default_context(cafile=secured.ca.ca_path)
    with socket.create_connection(("127.0.0.1", secured.ports["PLAINTEXT"])) as raw:  # TLS on plaintext
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.recv(1)
    # The broker serves on, and answers Metadata with the listener the request came in on.
    from confluent_kafka.admin import AdminClient
    metadata = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")}).list_topics(timeout=10)
    assert {b.port for b in metadata.brokers.values()} == {p["PLAINTEXT"] for p in secured.all_ports}
    metadata = AdminClient({"bootstrap.servers": secured.bootstrap("SSL"), "security.protocol": "SSL",
                            "ssl.ca.location": secured.ca.ca_path,
                            "ssl.certificate.location": secured.client_cert.certificate,
                            "ssl.key.location": secured.client_cert.key}).list_topics(timeout=10)
    assert {b.port for b in metadata.brokers.values()} == {p["SSL"] for p in secured.all_ports}


def test_brokers_replicate_over_the_sasl_ssl_inter_broker_listener(secured: Secured) -> None:
    from clients.admin import Admin, NewTopic
    from clients.producer import Producer
    topic = _topic()
    conf = _ketch_conf(secured)
    with Admin(conf) as admin:
        admin.create_topics([NewTopic(topic, 1, 2)])
        started = time.monotonic()
        with Producer({**conf, "acks": "all", "request.timeout.ms": 10_000,
                       "delivery.timeout.ms": 20_000}) as producer:
            producer.send(topic, value=b"r0").get(timeout=20)
        # acks=all completes only once every ISR member has the record; the follower can
        # only have fetched it over SASL_SSL (a follower that could not would stay in the
        # ISR for replica.lag.time.max.ms, 30 s, and the send would time out first).
        assert time.monotonic() - started < 20
        (partition,) = admin.describe_topics([topic])[topic].partitions
        assert sorted(partition.isr) == [1, 2]


# ------------------------------------------------------------------ Ketch's own clients and CLI

def _ketch_conf(secured: Secured, password: str = ALICE_PW) -> dict:
    return {"bootstrap.servers": secured.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                f'username="{ALICE}" password="{password}";',
            "ssl.truststore.location": secured.ca.ca_path}


def test_ketch_clients_on_sasl_ssl_scram(secured: Secured) -> None:
    from clients.admin import Admin
    from clients.consumer import Consumer
    from clients.producer import Producer
    topic = _topic()
    conf = _ketch_conf(secured)
    with Producer(conf) as producer:
        for i in range(3):
            producer.send(topic, value=f"k{i}".encode())
        producer.flush()
    with Admin(conf) as admin:
        assert topic in admin.list_topics()
    consumer = Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(500)]
    finally:
        consumer.close()
    assert got == [b"k0", b"k1", b"k2"]


def test_ketch_client_reauthenticates_before_its_session_ends(secured: Secured) -> None:
    """KIP-368 with Ketch's own producer on the listener whose sessions last 1.5 s: every
    connection logs in again on its socket, so producing across several lifetimes loses
    no connection (the broker would close one whose session ended)."""
    from clients.producer import Producer
    before = secured.broker_log.count("ended without re-authentication")
    topic = _topic()
    conf = {"bootstrap.servers": f"127.0.0.1:{secured.ports['REAUTH']}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": ALICE, "sasl.password": ALICE_PW, "linger.ms": 0}
    with Producer(conf) as producer:
        deadline = time.monotonic() + 4
        sent = 0
        while time.monotonic() < deadline:
            producer.send(topic, value=b"x").get(timeout=10)
            sent += 1
            time.sleep(0.25)
    assert sent >= 8
    assert secured.broker_log.count("ended without re-authentication") == before


def test_ketch_client_wrong_password_names_the_refusal(secured: Secured) -> None:
    from clients.admin import Admin
    with pytest.raises(Exception) as raised:
        with Admin({**_ketch_conf(secured, "wrong"), "default.api.timeout.ms": 3000}) as admin:
            admin.list_topics()
    assert "SASL_AUTHENTICATION_FAILED" in str(raised.value) or \
        "SASL_AUTHENTICATION_FAILED" in str(raised.value.__cause__), raised.value


def test_ketch_user_cli_on_the_secured_listener(secured: Secured) -> None:
    import json
    import sys
    xs = [a for k, v in _ketch_conf(secured).items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]
    base = [sys.executable, "-m", "clients.cli", "user"]
    common = ["--bootstrap", secured.bootstrap("SASL_SSL"), *xs]
    env = {**os.environ, "KETCH_USER_PASSWORD": "bob-secret"}
    created = subprocess.run([*base, "create", "bob", "--mechanism", "SCRAM-SHA-256", *common],
                             capture_output=True, text=True, env=env, timeout=60)
    assert created.returncode == 0, created.stderr

    from clients.admin import Admin
    admin = Admin(_ketch_conf(secured))
    try:
        wait_until(lambda: "bob" in admin.describe_user_scram_credentials(), timeout_s=10, what="bob")
        out = subprocess.run([*base, "list", "--output", "json", *common], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        assert {"user": "bob", "mechanism": "SCRAM-SHA-256", "iterations": 4096} in rows
        assert not any("secret" in str(r) for r in rows)
        # bob logs in with SCRAM-SHA-256 on the SASL_PLAINTEXT listener
        from kafka import KafkaProducer
        KafkaProducer(bootstrap_servers=secured.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob",
                      sasl_plain_password="bob-secret").close()
        deleted = subprocess.run([*base, "delete", "bob", *common], capture_output=True, text=True, timeout=60)
        assert deleted.returncode == 0, deleted.stderr
        wait_until(lambda: "bob" not in admin.describe_user_scram_credentials(), timeout_s=10,
                   what="bob gone")
    finally:
        admin.close()
