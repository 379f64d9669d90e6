"""The HTTP admin API on a real cluster (3 controllers, 3 brokers): every node answers the
same active controller (also after the active one is killed), topics and groups through
/v1 agree with Ketch's admin client, bad input gets a JSON 4xx naming the field, and the
health route turns 503 while a broker is stopped."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import subprocess

import pytest

from clients import Consumer, Producer
from clients.admin import Admin
from clients.types import TopicPartition
from tests.http_api.http_helpers import call, get
from tests.integration.integration_helpers import STOP_TIMEOUT_S, start_cluster, wait_until

pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "http",
                      broker_props={"ketch.metrics.group.lag.interval.ms": "1000"})
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def admin(cluster):
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as a:
        yield a


def _ports(cluster, role: str | None = None) -> list[int]:
    return [n.http_port for n in cluster.spec.nodes
            if (role is None or n.role == role) and n.id not in cluster.exited_nodes()]


def _broker_port(cluster) -> int:
    return _ports(cluster, "broker")[0]


def _produce(cluster, topic: str, count: int) -> None:
    with Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "acks": "all"}) as p:
        for i in range(count):
            p.send(topic, b"v%d" % i, key=b"k%d" % i)
        p.flush()


def test_every_node_is_live_and_ready(cluster) -> None:
    for port in _ports(cluster):
        assert get(port, "/v1/live")[0] == 200
        wait_until(lambda: get(port, "/v1/ready")[0] == 200, timeout_s=30, what=f"node on {port} ready")


def test_every_node_names_the_active_controller_the_quorum_has(cluster, admin) -> None:
    leader = admin.describe_quorum().leader_id
    answers = {port: get(port, "/v1/cluster/controller") for port in _ports(cluster)}
    assert {status for status, _ in answers.values()} == {200}
    assert {body["id"] for _, body in answers.values()} == {leader}, answers
    status, quorum = get(_broker_port(cluster), "/v1/quorum")
    assert status == 200 and quorum["leader_id"] == leader
    assert sorted(v["id"] for v in quorum["voters"]) == sorted(n.id for n in cluster.spec.controllers)
    # The leader reports its followers' positions, and the brokers as observers.
    assert all(v["log_end_offset"] >= 0 for v in quorum["voters"])
    assert sorted(o["id"] for o in quorum["observers"]) == sorted(n.id for n in cluster.spec.brokers)


def test_cluster_view_lists_every_broker(cluster) -> None:
    for port in (_ports(cluster, "controller")[0], _broker_port(cluster)):
        status, body = get(port, "/v1/cluster")
        assert status == 200
        assert body["cluster_id"] == cluster.spec.cluster_id
        assert [b["id"] for b in body["brokers"]] == [1, 2, 3]
        assert all(not b["fenced"] and b["listeners"] for b in body["brokers"])


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = pathlib.Path(os.environ.get("KETCH_TEST_ARTIFACTS",
                                        pathlib.Path(__file__).resolve().parents[2] / "test-artifacts"))


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_status_page_renders_in_headless_chromium(cluster, admin) -> None:
    before = admin.describe_quorum().leader_id
    url = f"http://127.0.0.1:{_broker_port(cluster)}/"
    # Virtual time lets the page's fetches and first render finish before the DOM is read.
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--virtual-time-budget=10000", "--window-size=1280,1100"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True,
                         timeout=120).stdout
    assert 'data-ready="true"' in dom, dom[-2000:]
    assert dom.count('<tr class="broker">') == 3
    # The page names the quorum's leader; on a loaded machine a spurious Raft election can
    # move it while the page renders, so the leader before or after counts.
    shown = re.search(r'id="active-controller">controller (\d+) ', dom)
    assert shown is not None, dom[-2000:]
    assert int(shown.group(1)) in {before, admin.describe_quorum().leader_id}
    assert dom.count('<tr class="controller">') == 3
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "status-page.png"
    shot.unlink(missing_ok=True)
    subprocess.run([*flags, f"--screenshot={shot}", url], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000       # a rendered page, kept for people to look at


def test_topic_lifecycle(cluster, admin) -> None:
    port = _broker_port(cluster)
    status, created = call(port, "POST", "/v1/topics",
                           {"name": "http-orders", "partitions": 3, "replication_factor": 3})
    assert status == 201, created
    assert [p["partition"] for p in created["partitions"]] == [0, 1, 2]
    status, again = call(port, "POST", "/v1/topics", {"name": "http-orders", "partitions": 3})
    assert (status, again["error"]) == (409, "TOPIC_ALREADY_EXISTS")
    _produce(cluster, "http-orders", 30)
    controller_port = _ports(cluster, "controller")[0]
    for p in (port, controller_port):      # a controller answers through the brokers it knows
        status, described = get(p, "/v1/topics/http-orders")
        assert status == 200
        assert sum(x["high_watermark"] for x in described["partitions"]) == 30
        assert all(x["size_bytes"] > 0 or x["high_watermark"] == 0 for x in described["partitions"])
        assert all(sorted(x["isr"]) == [1, 2, 3] for x in described["partitions"])
    hosted = get(port, "/v1/topics/http-orders")[1]["partitions"]
    assert all(x["log_end_offset"] >= x["high_watermark"] for x in hosted)   # broker 1 hosts all

    assert call(port, "POST", "/v1/topics/http-orders/partitions", {"count": 4})[0] == 200
    wait_until(lambda: len(get(port, "/v1/topics/http-orders")[1]["partitions"]) == 4,
               timeout_s=15, what="4 partitions")
    status, _ = call(port, "PATCH", "/v1/topics/http-orders/configs",
                     {"set": {"retention.ms": "3600000"}, "delete": ["cleanup.policy"]})
    assert status == 200
    configs = get(port, "/v1/topics/http-orders/configs")[1]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"

    assert call(port, "POST", "/v1/topics", {"name": "http-aux", "partitions": 1})[0] == 201
    first = get(port, "/v1/topics?limit=1&internal=true")[1]
    assert len(first["items"]) == 1 and first["next"] is not None
    rest = get(port, f"/v1/topics?after={first['next']}&internal=true&limit=1000")[1]
    names = [i["name"] for i in first["items"] + rest["items"]]
    assert names == sorted(admin.list_topics(include_internal=True))

    assert call(port, "DELETE", "/v1/topics/http-orders")[0] == 200
    wait_until(lambda: get(port, "/v1/topics/http-orders")[0] == 404, timeout_s=15,
               what="topic gone")


def test_group_lag_reset_and_delete(cluster, admin) -> None:
    port = _broker_port(cluster)
    assert call(port, "POST", "/v1/topics", {"name": "http-lag", "partitions": 2,
                                              "replication_factor": 3})[0] == 201
    _produce(cluster, "http-lag", 40)
    with Consumer({"bootstrap.servers": cluster.spec.bootstrap_servers, "group.id": "http-g",
                   "auto.offset.reset": "earliest", "enable.auto.commit": False,
                   "max.poll.records": 5}) as consumer:
        consumer.subscribe(["http-lag"])
        seen = 0
        while seen < 12:
            seen += len(consumer.poll(timeout_ms=1000))
        consumer.commit()
    committed = admin.list_consumer_group_offsets("http-g")
    ends = admin.list_offsets({TopicPartition("http-lag", p): _latest() for p in (0, 1)})
    status, group = get(port, "/v1/groups/http-g")
    assert status == 200 and group["state"] == "Empty"
    by_partition = {x["partition"]: x for x in group["lag"]}
    for p in (0, 1):
        tp = TopicPartition("http-lag", p)
        c = committed[tp].offset if tp in committed else 0
        assert by_partition[p]["lag"] == ends[tp].offset - c
    assert group["total_lag"] == 40 - sum(o.offset for o in committed.values())
    assert any(g["group_id"] == "http-g" for g in get(port, "/v1/groups")[1]["items"])

    status, dry = call(port, "POST", "/v1/groups/http-g/offsets/reset",
                       {"to": "earliest", "topics": ["http-lag"], "dry_run": True})
    assert status == 200 and {o["offset"] for o in dry["offsets"]} == {0}
    assert admin.list_consumer_group_offsets("http-g") == committed      # nothing moved
    status, done = call(port, "POST", "/v1/groups/http-g/offsets/reset",
                        {"to": "latest", "topics": ["http-lag"]})
    assert status == 200
    assert get(port, "/v1/groups/http-g")[1]["total_lag"] == 0
    assert call(port, "DELETE", "/v1/groups/http-g")[0] == 200
    assert get(port, "/v1/groups/http-g")[0] == 404


def _latest():
    from clients.admin import OffsetSpec
    return OffsetSpec.latest()


@pytest.mark.parametrize("method, path, body, status, error, field", [
    ("POST", "/v1/topics", b"{not json", 400, "INVALID_REQUEST", None),
    ("POST", "/v1/topics", {"name": "x", "partitions": "3"}, 400, "INVALID_REQUEST", "partitions"),
    ("POST", "/v1/topics", {"name": "x", "colour": "red"}, 400, "INVALID_REQUEST", "colour"),
    ("POST", "/v1/topics", {"name": "bad/name"}, 400, "INVALID_REQUEST", "name"),
    ("POST", "/v1/topics", [1, 2], 400, "INVALID_REQUEST", ""),
    ("POST", "/v1/topics", {"name": "x", "replication_factor": 9}, 400,
     "INVALID_REPLICATION_FACTOR", None),
    ("GET", "/v1/topics/no-such-topic", None, 404, "UNKNOWN_TOPIC_OR_PARTITION", None),
    ("GET", "/v1/topics/bad%2Fname", None, 400, "INVALID_REQUEST", "topic"),
    ("GET", "/v1/topics?limit=0", None, 400, "INVALID_REQUEST", "limit"),
    ("GET", "/v1/topics?sort=desc", None, 400, "INVALID_REQUEST", "sort"),
    ("GET", "/v1/groups/no-such-group", None, 404, "GROUP_ID_NOT_FOUND", None),
    ("DELETE", "/v1/groups/no-such-group", None, 404, "GROUP_ID_NOT_FOUND", None),
    ("POST", "/v1/groups/g/offsets/reset", {"to": "offset"}, 400, "INVALID_REQUEST", "value"),
    ("POST", "/v1/groups/g/offsets/reset", {"to": "sideways"}, 400, "INVALID_REQUEST", "to"),
    ("POST", "/v1/brokers/abc/decommission", None, 400, "INVALID_REQUEST", "broker_id"),
    ("POST", "/v1/brokers/77/decommission", None, 404, "BROKER_NOT_AVAILABLE", None),
    ("POST", "/v1/actions/reassignments", {"partitions": []}, 400, "INVALID_REQUEST", "partitions"),
    ("POST", "/v1/actions/elect-leaders", {"type": "random"}, 400, "INVALID_REQUEST", "type"),
    ("GET", "/v1/nothing-here", None, 404, "NOT_FOUND", None),
    ("PUT", "/v1/topics", None, 405, "METHOD_NOT_ALLOWED", None),
])
def test_bad_input_is_a_json_error_naming_the_field(cluster, method, path, body, status, error,
                                                     field) -> None:
    raw = body if isinstance(body, bytes) else None
    got_status, got = call(_broker_port(cluster), method, path,
                           body=None if raw is not None else body, raw=raw)
    assert (got_status, got["error"]) == (status, error), got
    assert got["message"]
    if field is not None:
        assert got["field"] == field


def test_actions(cluster) -> None:
    port = _broker_port(cluster)
    assert call(port, "POST", "/v1/topics", {"name": "http-moves", "partitions": 2,
                                              "replication_factor": 2})[0] == 201
    status, elected = call(port, "POST", "/v1/actions/elect-leaders",
                           {"partitions": [{"topic": "http-moves", "partition": 0}]})
    assert status == 200 and elected["partitions"][0]["error"] in (None, "ELECTION_NOT_NEEDED")
    # Three brokers and topics of replication factor 3: broker 3's replicas have nowhere
    # to go, and the plan says so before anything moves (the plans themselves are unit-tested).
    status, refused = call(port, "POST", "/v1/brokers/3/decommission", {"dry_run": True})
    assert (status, refused["error"]) == (400, "INVALID_REPLICA_ASSIGNMENT")
    assert "no other broker" in refused["message"]
    current = get(port, "/v1/topics/http-moves")[1]["partitions"][1]["replicas"]
    target = [b for b in (1, 2, 3) if b not in current][:1] + current[:1]
    status, _ = call(port, "POST", "/v1/actions/reassignments", {"partitions": [
        {"topic": "http-moves", "partition": 1, "replicas": target}]})
    assert status == 200
    wait_until(lambda: get(port, "/v1/topics/http-moves")[1]["partitions"][1]["replicas"] == target,
               timeout_s=30, what=f"partition 1 moved to {target}")
    assert get(port, "/v1/actions/reassignments")[0] == 200


def test_health_turns_503_while_a_broker_is_stopped(cluster) -> None:
    port = _broker_port(cluster)
    wait_until(lambda: get(port, "/v1/cluster/health")[0] == 200, timeout_s=30, what="healthy")
    cluster.signal_node(3, signal.SIGSTOP)
    try:
        wait_until(lambda: get(port, "/v1/cluster/health")[0] == 503, timeout_s=30,
                   what="unhealthy while broker 3 is stopped")
        status, health = get(port, "/v1/cluster/health")
        assert health["under_replicated"] > 0 and health["problems"]
    finally:
        cluster.signal_node(3, signal.SIGCONT)
    wait_until(lambda: get(port, "/v1/cluster/health")[0] == 200, timeout_s=60,
               what="healthy again after SIGCONT")


def test_after_the_active_controller_dies_every_node_names_the_new_one(cluster, admin) -> None:
    old = get(_broker_port(cluster), "/v1/cluster/controller")[1]["id"]
    survivors = [n.http_port for n in cluster.spec.nodes if n.id != old]
    cluster.kill_node(old)

    def agreed() -> bool:
        answers = [get(port, "/v1/cluster/controller", timeout_s=5) for port in survivors]
        ids = {body.get("id") for status, body in answers if status == 200}
        return len(answers) == 5 and all(s == 200 for s, _ in answers) and len(ids) == 1 \
            and old not in ids
    # Raft's election timeout is under a second here; the answers converge well within 20 s.
    wait_until(agreed, timeout_s=20, what="every node naming one new active controller")
    new = get(_broker_port(cluster), "/v1/cluster/controller")[1]["id"]
    assert admin.describe_quorum().leader_id == new
