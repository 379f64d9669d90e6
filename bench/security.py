"""Benchmark: the cost of security (issue 16) on a local cluster, in one run.

One controller and one broker with two listeners, PLAINTEXT and SASL_SSL (TLS with the
generated CA; SCRAM-SHA-512 for an ``alice`` created through AlterUserScramCredentials).

1. Produce ``--records`` records of ``--size`` bytes with confluent-kafka (acks=all,
   linger 5 ms) to a topic through each listener; MB/s and the ratio SASL_SSL / PLAINTEXT
   (issue 16's goal: >= 0.6).
2. Consume each topic from the start with confluent-kafka; MB/s and the ratio.
3. Handshakes per second: Ketch's client connecting and logging in (TCP + TLS + SaslHandshake
   + SCRAM-SHA-512's two round trips), one after another and 8 at a time; and, for
   comparison, failed logins (wrong password) per second, the work a brute-force attempt
   costs the broker (bounded: no PBKDF2 on the broker's side).

Usage: python bench/security.py [--records 200000] [--size 1000]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clients.cli.launcher import LocalCluster, free_ports  # noqa: E402
from clients.connection import connect  # noqa: E402
from clients.errors import SaslAuthenticationError  # noqa: E402
from clients.properties import format_properties, load_properties  # noqa: E402
from clients.security.certs import LocalCA  # noqa: E402
from clients.security.client_auth import ClientSecurity  # noqa: E402
from clients.security.listeners import SecurityProtocol  # noqa: E402
from clients.security.tls import client_ssl_context  # noqa: E402

USER, PASSWORD = "alice", "alice-secret"


def start(directory: str) -> tuple[LocalCluster, dict[str, int], LocalCA]:
    ca = LocalCA(f"{directory}/ca")
    cert = ca.issue("broker", "localhost")
    cluster = LocalCluster(f"{directory}/cluster", controllers=1, brokers=1,
                           broker_props={"num.partitions": "1"})
    broker = cluster.spec.brokers[0]
    (sasl_port,) = free_ports(1, exclude=[n.port for n in cluster.spec.nodes])
    ports = {"PLAINTEXT": broker.port, "SASL_SSL": sasl_port}
    props = load_properties(broker.config)
    props.update({"listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
                  "inter.broker.listener.name": "PLAINTEXT",
                  "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "ssl.keystore.location": cert.keystore})
    with open(broker.config, "w") as f:
        f.write(format_properties(props))
    cluster.start(timeout_s=60)
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())]).values():
        f.result(timeout=15)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            admin.describe_user_scram_credentials([USER])[USER].result(timeout=5)
            break
        except Exception:
            time.sleep(0.1)
    return cluster, ports, ca


def client_conf(listener: str, ports: dict[str, int], ca: LocalCA) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{ports[listener]}"}
    if listener == "SASL_SSL":
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": ca.ca_path})
    return conf


def produce(conf: dict, topic: str, records: int, size: int) -> float:
    from confluent_kafka import Producer
    producer = Producer({**conf, "acks": "all", "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return time.perf_counter() - started


def consume(conf: dict, topic: str, records: int) -> float:
    from confluent_kafka import Consumer
    consumer = Consumer({**conf, "group.id": f"bench-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen, started = 0, None
    deadline = time.monotonic() + 180
    while seen < records and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 0.5):
            if not m.error():
                started = started or time.perf_counter()
                seen += 1
    elapsed = time.perf_counter() - (started or time.perf_counter())
    consumer.close()
    return elapsed


async def handshakes(port: int, security: ClientSecurity, seconds: float, parallel: int) -> tuple[int, int]:
    """(successful logins, failed logins) in ``seconds``, ``parallel`` at a time."""
    ok = failed = 0
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal ok, failed
        while time.monotonic() < deadline:
            try:
                conn = await connect("127.0.0.1", port, security=security)
                conn.close()
                ok += 1
            except SaslAuthenticationError:
                failed += 1
    await asyncio.gather(*(worker() for _ in range(parallel)))
    return ok, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    out: dict = {"bench": "security", "records": args.records, "size": args.size}
    with tempfile.TemporaryDirectory(prefix="ketch-bench-security-") as directory:
        cluster, ports, ca = start(directory)
        try:
            mb = args.records * args.size / 1e6
            for listener in ("PLAINTEXT", "SASL_SSL"):
                conf = client_conf(listener, ports, ca)
                p = produce(conf, f"bench-{listener.lower()}", args.records, args.size)
                c = consume(conf, f"bench-{listener.lower()}", args.records)
                out[f"produce_mb_s_{listener.lower()}"] = round(mb / p, 1)
                out[f"consume_mb_s_{listener.lower()}"] = round(mb / c, 1) if c > 0 else None
                print(f"{listener:10s} produce {mb / p:8.1f} MB/s   consume "
                      f"{(mb / c if c > 0 else float('nan')):8.1f} MB/s", flush=True)
            out["produce_ratio"] = round(out["produce_mb_s_sasl_ssl"] / out["produce_mb_s_plaintext"], 2)
            if out["consume_mb_s_plaintext"] and out["consume_mb_s_sasl_ssl"]:
                out["consume_ratio"] = round(out["consume_mb_s_sasl_ssl"] / out["consume_mb_s_plaintext"], 2)
            print(f"SASL_SSL / PLAINTEXT: produce {out['produce_ratio']}, consume {out.get('consume_ratio')} "
                  "(goal >= 0.6)", flush=True)
            context = client_ssl_context({"ssl.ca.location": ca.ca_path}.get)
            good = ClientSecurity(SecurityProtocol.SASL_SSL, context, "SCRAM-SHA-512", USER, PASSWORD)
            bad = ClientSecurity(SecurityProtocol.SASL_SSL, context, "SCRAM-SHA-512", USER, "wrong")
            for parallel in (1, 8):
                ok, _ = asyncio.run(handshakes(ports["SASL_SSL"], good, args.seconds, parallel))
                out[f"handshakes_per_s_x{parallel}"] = round(ok / args.seconds, 1)
                print(f"TLS + SCRAM-SHA-512 logins, {parallel} at a time: {ok / args.seconds:.1f}/s", flush=True)
            _, failed = asyncio.run(handshakes(ports["SASL_SSL"], bad, args.seconds, 8))
            out["failed_logins_per_s_x8"] = round(failed / args.seconds, 1)
            print(f"failed logins (wrong password), 8 at a time: {failed / args.seconds:.1f}/s", flush=True)
        finally:
            cluster.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
