"""``ketch topic|produce|consume|group|config|cluster|dump-log`` as a user runs them:
subprocesses (``python -m clients.cli``) against one real cluster (1 controller, 3
brokers), output read through ``--output json`` / ``--json`` and checked against the
cluster itself through other clients (confluent-kafka, i.e. librdkafka, and Ketch's admin).

Bad input is tried first in each test and must give one line on stderr, exit 1 (2 for
usage errors), no traceback, and change nothing.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer, Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from clients.cli.launcher import free_ports
from tests.integration.integration_helpers import (
    STOP_TIMEOUT_S, admin_for, start_cluster, wait_until,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "cli-verbs", controllers=1, brokers=3)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def ketch(cluster, *args: str, stdin: str | None = None, rc: int | None = 0,
          bootstrap: bool = True) -> subprocess.CompletedProcess:
    where = ["--bootstrap", cluster.spec.bootstrap_servers] if bootstrap else []
    proc = subprocess.run([sys.executable, "-m", "clients.cli", *args, *where], cwd=ROOT,
                          input=stdin, capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert rc is None or proc.returncode == rc, (args, proc.returncode, proc.stdout, proc.stderr)
    return proc


def ketch_json(cluster, *args: str, **kw: Any) -> Any:
    return json.loads(ketch(cluster, *args, "--output", "json", **kw).stdout)


def refused(cluster, *args: str, rc: int = 1, **kw: Any) -> str:
    """A refused command: its one stderr line, checked for the shape of a user error."""
    proc = ketch(cluster, *args, rc=rc, **kw)
    lines = proc.stderr.strip().splitlines()
    if rc == 1:
        assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[-1]


def ck_conf(cluster, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.spec.bootstrap_servers, **extra}


def committed(cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = CKConsumer(ck_conf(cluster, **{"group.id": group}))
    try:
        got = c.committed([CKTopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def watermarks(cluster, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    c = CKConsumer(ck_conf(cluster, **{"group.id": "watermarks"}))
    try:
        return {p: c.get_watermark_offsets(CKTopicPartition(topic, p), timeout=30)
                for p in range(partitions)}
    finally:
        c.close()


# ---------------------------------------------------------------- topics, configs, bad input

def test_topics_and_configs_with_bad_input_changing_nothing(cluster) -> None:
    line = refused(cluster, "topic", "create", "wide", "-p", "2", "-r", "4")
    assert "INVALID_REPLICATION_FACTOR" in line and line.startswith("ketch topic:")
    assert all(t["topic"] != "wide" for t in ketch_json(cluster, "topic", "list"))

    made = ketch_json(cluster, "topic", "create", "inventory", "-p", "2", "-r", "3",
                      "-c", "retention.ms=7200000")
    assert made == [{"topic": "inventory", "topic_id": made[0]["topic_id"], "partitions": 2,
                     "replication_factor": 3, "created": True}]
    [desc] = ketch_json(cluster, "topic", "describe", "inventory")
    assert [p["partition"] for p in desc["partitions"]] == [0, 1]
    for p in desc["partitions"]:
        assert sorted(p["replicas"]) == [1, 2, 3] and p["leader"] in p["isr"]
        assert (p["log_start_offset"], p["high_watermark"]) == (0, 0)
    assert {"name": "retention.ms", "value": "7200000", "source": "topic", "read_only": False,
            "sensitive": False} in desc["configs"]

    # A bad value, an unknown topic, an unknown key: one line each, nothing changed.
    line = refused(cluster, "config", "set", "--topic", "inventory", "retention.ms=soon")
    assert "INVALID_CONFIG" in line and "retention.ms" in line
    assert "UNKNOWN_TOPIC_OR_PARTITION" in refused(cluster, "topic", "describe", "nope")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in refused(cluster, "config", "get", "--topic", "nope")
    refused(cluster, "config", "set", "--topic", "inventory", "retention.mss=5")
    refused(cluster, "topic", "create", "x", "--partitions", "many", rc=2)   # usage: argparse
    refused(cluster, "topic", "add-partitions", "inventory", "--total", "1")
    [got] = ketch_json(cluster, "config", "get", "--topic", "inventory", "--name", "retention.ms")
    assert (got["value"], got["source"]) == ("7200000", "topic")
    assert "no live broker 9" in refused(cluster, "config", "get", "--broker", "9")
    line = refused(cluster, "config", "set", "--broker", "1", "log.retention.ms=-5")
    assert "INVALID_CONFIG" in line
    [got] = ketch_json(cluster, "config", "get", "--broker", "1", "--name", "log.retention.ms")
    assert got["source"] != "broker"          # not set dynamically

    ketch(cluster, "config", "set", "--topic", "inventory", "retention.ms=3600000",
          "cleanup.policy=compact")
    got = {e["name"]: e for e in ketch_json(cluster, "config", "get", "--topic", "inventory")}
    assert got["retention.ms"]["value"] == "3600000" and got["cleanup.policy"]["value"] == "compact"
    ketch(cluster, "config", "delete", "--topic", "inventory", "cleanup.policy")
    [got] = ketch_json(cluster, "config", "get", "--topic", "inventory", "--name", "cleanup.policy")
    assert (got["value"], got["source"]) == ("delete", "default")

    grown = ketch_json(cluster, "topic", "add-partitions", "inventory", "--total", "4")
    assert grown == [{"topic": "inventory", "partitions_before": 2, "partitions": 4, "applied": True}]
    assert len(admin_for(cluster).describe_topics(["inventory"])["inventory"].partitions) == 4

    ketch(cluster, "topic", "delete", "inventory")
    wait_until(lambda: "inventory" not in admin_for(cluster).list_topics(), 30, "inventory deleted")


def test_unreachable_or_missing_cluster_is_one_line(cluster) -> None:
    [port] = free_ports(1)
    line = refused(cluster, "topic", "list", "--bootstrap", f"127.0.0.1:{port}",
                   "-X", "default.api.timeout.ms=3000", bootstrap=False)
    assert line.startswith("ketch topic:") and str(port) in line
    env_free = subprocess.run([sys.executable, "-m", "clients.cli", "group", "list"], cwd=ROOT,
                              capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                              env={k: v for k, v in os.environ.items() if k != "KETCH_BOOTSTRAP"})
    assert env_free.returncode == 1 and "no cluster given" in env_free.stderr
    assert "Traceback" not in env_free.stderr
    # --debug shows what happened
    proc = ketch(cluster, "topic", "describe", "nope", "--debug", rc=1)
    assert "Traceback" in proc.stderr


def test_cluster_info_and_health(cluster) -> None:
    info = ketch_json(cluster, "cluster", "info")
    assert info["cluster_id"] == cluster.spec.cluster_id
    assert [b["node_id"] for b in info["brokers"]] == [1, 2, 3]
    assert all(b["live"] for b in info["brokers"])
    assert info["controller"]["leader_id"] == cluster.spec.controllers[0].id
    health = ketch_json(cluster, "cluster", "health")
    assert health["healthy"] and health["problems"] == []
    # From the cluster's directory, the brokers' HTTP API adds whether each is fenced or
    # shutting down.
    by_dir = ketch_json(cluster, "cluster", "info", "--dir", cluster.dir, bootstrap=False)
    assert [(b["node_id"], b["live"], b["fenced"], b["in_controlled_shutdown"])
            for b in by_dir["brokers"]] == [
        (1, True, False, False), (2, True, False, False), (3, True, False, False)]
    assert all(b["fenced"] is None for b in info["brokers"])      # --bootstrap: not known


def test_cluster_decommission_plans_or_refuses_in_one_line(cluster) -> None:
    assert "not a live broker" in refused(cluster, "cluster", "decommission", "9", "--dry-run")
    ketch(cluster, "topic", "create", "decom", "-p", "3", "-r", "2")
    # Three brokers: a replication-factor-3 topic (the offsets topic) has nowhere to go.
    internal = ketch_json(cluster, "topic", "list", "--internal")
    if any(t["replication_factor"] == 3 for t in internal):
        assert "no other broker" in refused(cluster, "cluster", "decommission", "3", "--dry-run")
    else:
        plan = ketch_json(cluster, "cluster", "decommission", "3", "--dry-run")
        assert plan["dry_run"] and all(3 not in p["replicas"] for p in plan["partitions"])


# ---------------------------------------------------------------- produce, consume, dump-log

def test_produce_then_consume_by_offsets_and_formats(cluster) -> None:
    ketch(cluster, "topic", "create", "lines", "-p", "2", "-r", "3")
    refused(cluster, "produce", "nolines", stdin="a\n")
    assert "nolines" not in admin_for(cluster).list_topics()     # not auto-created
    refused(cluster, "produce", "lines", "--partition", "7", stdin="a\n")
    refused(cluster, "produce", "lines", "-f", "%k%v", stdin="a\n")

    lines = "".join(f"k{i}:v{i}\n" for i in range(300))
    ketch(cluster, "produce", "lines", "-K", ":", "--partition", "1", "--header", "src=cli",
          "--acks", "1", "--compression", "lz4", stdin=lines)
    ketch(cluster, "produce", "lines", "-f", "%T|%k|%v", "--partition", "0",
          stdin="1700000000000|a|x\n1700000001000|b|y\n")

    out = ketch(cluster, "consume", "lines", "-p", "1", "--json").stdout.splitlines()
    recs = [json.loads(x) for x in out]
    assert [(r["offset"], r["key"], r["value"]) for r in recs] == [
        (i, f"k{i}", f"v{i}") for i in range(300)]
    assert all(r["headers"] == [["src", "cli"]] for r in recs)
    [desc] = ketch_json(cluster, "topic", "describe", "lines", "--dir", cluster.dir, bootstrap=False)
    assert [(p["high_watermark"], p["log_end_offset"]) for p in desc["partitions"]] == [
        (2, 2), (300, 300)]
    tail = ketch(cluster, "consume", "lines", "-p", "1", "--offset", "-3",
                 "--format", "%p/%o %k=%s %h\\n").stdout
    assert tail == "".join(f"1/{i} k{i}=v{i} src=cli\n" for i in (297, 298, 299))
    assert ketch(cluster, "consume", "lines", "-p", "1", "--offset", "100", "-n", "2").stdout == "v100\nv101\n"
    by_time = ketch(cluster, "consume", "lines", "-p", "0", "--offset", "@1700000000500",
                    "--format", "%T %k %s\\n").stdout
    assert by_time == "1700000001000 b y\n"
    # Confluent's consumer reads what ketch wrote.
    c = CKConsumer(ck_conf(cluster, **{"group.id": "ck-check"}))
    c.assign([CKTopicPartition("lines", 1, 0)])
    got = []
    wait_until(lambda: got.extend(m for m in [c.poll(0.5)] if m is not None and not m.error())
               or len(got) >= 300, 60, "confluent-kafka reads 300 records")
    c.close()
    assert [m.value() for m in got[:300]] == [f"v{i}".encode() for i in range(300)]
    refused(cluster, "consume", "lines", "--offset", "yesterday")
    refused(cluster, "consume", "lines", "-p", "5")
    assert "holds offsets 0 to 300" in refused(cluster, "consume", "lines", "-p", "1",
                                               "--offset", "5000")


def test_dump_log_lists_the_batches_the_producer_sent(cluster) -> None:
    ketch(cluster, "topic", "create", "batches", "-p", "1", "-r", "3")
    p = CKProducer(ck_conf(cluster, **{"linger.ms": 1000, "enable.idempotence": True}))
    sent = []
    for b in range(3):
        values = [f"batch{b}-{i}" for i in range(10 + b)]
        for v in values:
            p.produce("batches", v.encode(), key=b"key", partition=0)
        p.flush(30)
        sent.append(values)
    leader = admin_for(cluster).describe_topics(["batches"])["batches"].partitions[0].leader
    wait_until(lambda: watermarks(cluster, "batches", 1)[0][1] == 33, 30, "33 records acknowledged")
    node = cluster.spec.node(leader)
    path = os.path.join(node.data_dir, "batches-0", "00000000000000000000.log")
    dump = ketch_json(cluster, "dump-log", path, "--records", bootstrap=False)
    assert dump["kind"] == "log" and dump["base_offset"] == 0
    assert [b["count"] for b in dump["batches"]] == [10, 11, 12]
    assert [[r["value"] for r in b["records"]] for b in dump["batches"]] == sent
    assert [b["base_offset"] for b in dump["batches"]] == [0, 10, 21]
    assert len({b["producer_id"] for b in dump["batches"]}) == 1
    assert dump["batches"][0]["producer_id"] >= 0 and dump["torn_tail_bytes"] == 0
    text = ketch(cluster, "dump-log", path, bootstrap=False).stdout
    assert text.count("baseOffset:") == 3
    assert "not a segment file name" in refused(cluster, "dump-log", __file__, bootstrap=False)


# ---------------------------------------------------------------- groups: lag, reset, Ctrl-C

def test_group_lag_reset_and_resume(cluster) -> None:
    ketch(cluster, "topic", "create", "work", "-p", "3", "-r", "3")
    p = CKProducer(ck_conf(cluster))
    for i in range(600):
        p.produce("work", f"w{i}".encode(), partition=i % 3)
    p.flush(30)
    assert len(ketch(cluster, "consume", "work", "--group", "billing", "-n", "250").stdout.splitlines()) == 250

    [desc] = ketch_json(cluster, "group", "describe", "billing")
    assert desc["state"] == "Empty" and desc["members"] == []
    marks = watermarks(cluster, "work", 3)
    done = committed(cluster, "billing", "work", 3)
    assert sum(done.values()) == 250
    assert sorted(p["partition"] for p in desc["partitions"]) == [0, 1, 2]
    for part in desc["partitions"]:
        n = part["partition"]
        assert part["log_end_offset"] == marks[n][1] == 200
        assert part["committed_offset"] == done[n]
        assert part["lag"] == part["log_end_offset"] - part["committed_offset"]
    assert desc["total_lag"] == 600 - 250

    # Dry run (the default): the plan, nothing moved.
    plan = ketch_json(cluster, "group", "reset-offsets", "billing", "--topic", "work",
                      "--to-offset", "50")
    assert plan["executed"] is False
    assert {r["partition"]: (r["current_offset"], r["new_offset"]) for r in plan["partitions"]} == {
        n: (done[n], 50) for n in range(3)}
    assert committed(cluster, "billing", "work", 3) == done
    refused(cluster, "group", "reset-offsets", "billing", "--topic", "nope", "--to-earliest",
            "--execute")
    refused(cluster, "group", "reset-offsets", "billing", "--topic", "work", rc=2)  # no --to-*

    # Execute: shift back by 20 from wherever each partition is.
    ketch(cluster, "group", "reset-offsets", "billing", "--topic", "work", "--shift-by", "-20",
          "--execute")
    moved = committed(cluster, "billing", "work", 3)
    assert moved == {n: max(0, done[n] - 20) for n in range(3)}

    # confluent-kafka, in the group, resumes from the moved offsets.
    ck = CKConsumer(ck_conf(cluster, **{"group.id": "billing", "enable.auto.commit": False,
                                        "auto.offset.reset": "latest"}))
    ck.subscribe(["work"])
    first: dict[int, int] = {}

    def poll_first() -> bool:
        m = ck.poll(0.5)
        if m is not None and not m.error():
            first.setdefault(m.partition(), m.offset())
        return len(first) == 3
    wait_until(poll_first, 60, "confluent-kafka reads every partition")
    assert first == moved

    # While it is a member, a reset is refused and changes nothing (as in Kafka).
    [active] = ketch_json(cluster, "group", "describe", "billing")
    assert active["state"] == "Stable" and len(active["members"]) == 1
    assert sorted(a for m in active["members"] for a in m["assignment"]) == [
        "work-0", "work-1", "work-2"]
    line = refused(cluster, "group", "reset-offsets", "billing", "--topic", "work",
                   "--to-earliest", "--execute")
    assert "inactive" in line or "member" in line
    refused(cluster, "group", "delete", "billing")
    ck.close()
    assert committed(cluster, "billing", "work", 3) == moved

    assert "billing" in [g["group"] for g in ketch_json(cluster, "group", "list")]
    ketch(cluster, "group", "delete", "billing")
    assert "billing" not in [g["group"] for g in ketch_json(cluster, "group", "list")]


def test_ctrl_c_in_a_group_commits_what_was_printed(cluster) -> None:
    ketch(cluster, "topic", "create", "follow", "-p", "1", "-r", "3")
    p = CKProducer(ck_conf(cluster))
    for i in range(40):
        p.produce("follow", f"f{i}".encode())
    p.flush(30)
    proc = subprocess.Popen([sys.executable, "-m", "clients.cli", "consume", "follow", "--group",
                             "tail", "--follow", "--bootstrap", cluster.spec.bootstrap_servers],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT})
    try:
        seen = [proc.stdout.readline() for _ in range(40)]
        assert seen == [f"f{i}\n" for i in range(40)]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "interrupted after 40 records" in err
    assert committed(cluster, "tail", "follow", 1) == {0: 40}


# ---------------------------------------------------------------- metadata-shell (offline)

def _digest(directory: str) -> dict[str, str]:
    import hashlib
    return {name: hashlib.sha256(open(os.path.join(directory, name), "rb").read()).hexdigest()
            for name in sorted(os.listdir(directory))}


def test_metadata_shell_reads_a_controllers_image_offline(cluster, tmp_path) -> None:
    import shutil
    ketch(cluster, "topic", "create", "shelled", "-p", "2", "-r", "2")
    live = admin_for(cluster).describe_topics(["shelled"])["shelled"]
    controller_dir = cluster.spec.controllers[0].data_dir

    def offline() -> Any:
        # A copy (the controller keeps writing), read through the `ketch up` directory's
        # cluster.json like a user would read a stopped cluster's.
        copy = tmp_path / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(controller_dir, copy, ignore=shutil.ignore_patterns(".lock"))
        before = _digest(str(copy))
        got = ketch_json(cluster, "metadata-shell", str(copy), "/topics", bootstrap=False)
        assert _digest(str(copy)) == before            # read-only
        return got if "shelled" in got["image"] else None
    got = wait_until(offline, 30, "the committed topic in the controller's files")
    topic = got["image"]["shelled"]
    assert topic["topic_id"] == str(live.topic_id)
    assert {p: (topic[str(p)]["replicas"], topic[str(p)]["leader"]) for p in (0, 1)} == {
        p.partition: (list(p.replicas), p.leader) for p in live.partitions}
    assert got["source"]["commit_index"] > 0

    by_dir = ketch_json(cluster, "metadata-shell", cluster.dir, "/brokers", bootstrap=False)
    assert sorted(by_dir["image"]) == ["1", "2", "3"]
    assert all(not b["fenced"] for b in by_dir["image"].values())
    listing = ketch(cluster, "metadata-shell", cluster.dir, "ls", "/", bootstrap=False).stdout
    assert listing.split() == ["provenance/", "features/", "brokers/", "topics/", "configs/",
                               "producerIds/"]
    assert "not a controller's data directory" in refused(
        cluster, "metadata-shell", str(tmp_path), bootstrap=False)


def test_dump_log_reads_the_indexes_of_a_rolled_segment(cluster) -> None:
    ketch(cluster, "topic", "create", "rolled", "-p", "1", "-r", "1",
          "-c", "segment.bytes=4096", "-c", "index.interval.bytes=100")
    lines = "".join(f"line-{i:03d}-{'y' * 200}\n" for i in range(40))
    ketch(cluster, "produce", "rolled", "--acks", "1", "-X", "linger.ms=0", "-X", "batch.size=300",
          stdin=lines)
    leader = admin_for(cluster).describe_topics(["rolled"])["rolled"].partitions[0].leader
    part_dir = os.path.join(cluster.spec.node(leader).data_dir, "rolled-0")
    rolled = sorted(f for f in os.listdir(part_dir) if f.endswith(".index"))
    assert rolled, os.listdir(part_dir)          # segment.bytes=4096 rolled at least once
    base = rolled[0][:-len(".index")]
    log, index, times = (ketch_json(cluster, "dump-log", os.path.join(part_dir, base + suffix),
                                    bootstrap=False) for suffix in (".log", ".index", ".timeindex"))
    batches = {b["position"]: b for b in log["batches"]}
    assert index["kind"] == "index" and index["entries"]
    for e in index["entries"]:                   # a batch's last offset -> where it starts
        assert batches[e["position"]]["last_offset"] == e["offset"]
    offsets = [b["base_offset"] for b in log["batches"]]
    assert offsets == sorted(offsets) and offsets[0] == int(base)
    assert times["entries"] and all(offsets[0] <= e["offset"] <= log["batches"][-1]["last_offset"]
                                    for e in times["entries"])
    stamps = [e["timestamp"] for e in times["entries"]]
    assert stamps == sorted(stamps) and max(stamps) <= max(b["max_timestamp"] for b in log["batches"])


# ---------------------------------------------------------------- last: a broker goes away

def test_transactions_describe_producers_shows_an_idempotent_producer(cluster) -> None:
    ketch(cluster, "topic", "create", "idem", "-p", "1", "-r", "3")
    refused(cluster, "transactions", "abort", "idem", "0")          # which transaction?
    refused(cluster, "transactions", "describe-producers", "nosuch", "0")
    p = CKProducer(ck_conf(cluster, **{"enable.idempotence": True}))
    for i in range(5):
        p.produce("idem", f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    [producer] = ketch_json(cluster, "transactions", "describe-producers", "idem", "0")
    assert producer["producer_id"] >= 0 and producer["producer_epoch"] >= 0
    assert producer["last_sequence"] == 4
    assert producer["current_transaction_start_offset"] == -1      # not transactional
    assert "no open transaction starts at offset 0" in refused(
        cluster, "transactions", "abort", "idem", "0", "--start-offset", "0")


def test_transactions_list_describe_and_abort_a_hanging_transaction(cluster) -> None:
    """Needs txncoord and txnlog (issue 15): runs after the merge."""
    ketch(cluster, "topic", "create", "hang", "-p", "1", "-r", "3")
    p = CKProducer(ck_conf(cluster, **{"transactional.id": "cli-hang",
                                       "transaction.timeout.ms": 600_000}))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("hang", b"open", partition=0)
    assert p.flush(30) == 0           # written, never committed: the LSO stays at 0
    listed = ketch_json(cluster, "transactions", "list")
    assert {"transactional_id": "cli-hang", "state": "Ongoing"}.items() <= next(
        t for t in listed if t["transactional_id"] == "cli-hang").items()
    d = ketch_json(cluster, "transactions", "describe", "cli-hang")
    assert d["state"] == "Ongoing" and d["partitions"] == ["hang-0"] and d["duration_ms"] >= 0
    [producer] = ketch_json(cluster, "transactions", "describe-producers", "hang", "0")
    assert producer["current_transaction_start_offset"] == 0
    ketch(cluster, "transactions", "abort", "hang", "0", "--start-offset", "0")
    [after] = ketch_json(cluster, "transactions", "describe-producers", "hang", "0")
    assert after["current_transaction_start_offset"] == -1
    # The LSO moved past the aborted record: a later plain record is readable committed.
    plain = CKProducer(ck_conf(cluster))
    plain.produce("hang", b"after", partition=0)
    assert plain.flush(30) == 0
    c = CKConsumer(ck_conf(cluster, **{"group.id": "hang-check", "isolation.level": "read_committed"}))
    try:
        c.assign([CKTopicPartition("hang", 0, 0)])
        got: list[bytes] = []
        wait_until(lambda: got.extend(m.value() for m in c.consume(10, 0.5) if not m.error())
                   or b"after" in got, 30, "read_committed reads past the aborted transaction")
        assert b"open" not in got
    finally:
        c.close()


def test_health_fails_when_a_broker_stops(cluster) -> None:
    """Stops broker 3 (the module's last test: the cluster is not needed whole after it)."""
    ketch(cluster, "topic", "create", "spread", "-p", "3", "-r", "3")
    ketch(cluster, "cluster", "health")
    cluster.stop_node(3)

    def unhealthy() -> Any:
        proc = ketch(cluster, "cluster", "health", "--dir", cluster.dir, "--output", "json",
                     bootstrap=False, rc=None)
        view = json.loads(proc.stdout)
        return view if proc.returncode == 1 and view["under_replicated_partitions"] else None
    view = wait_until(unhealthy, 60, "health to report broker 3's partitions")
    assert not view["healthy"]
    assert {"node_id": 3, "live": False} == {k: v for k, v in view["brokers"][-1].items()
                                             if k in ("node_id", "live")}
    assert any("brokers not live: [3]" in p for p in view["problems"])
    assert {(p["topic"], p["partition"]) for p in view["under_replicated_partitions"]} >= {
        ("spread", 0), ("spread", 1), ("spread", 2)}
    text = ketch(cluster, "cluster", "health", "--dir", cluster.dir, bootstrap=False, rc=1).stdout
    assert text.splitlines()[0] == "unhealthy"
