"""Small blocking helpers for the process tests: cluster state through Ketch's admin
client, raw Kafka round trips, and the log segments a replica has on disk.

Two ways to ask, each for its reason:

- ``admin_for(cluster)``: Ketch's own blocking admin client (``clients.Admin``), one per
  cluster, for questions about the cluster as a whole (high watermarks from the
  partitions' leaders, wherever they are now). Each call sends fresh
  requests (no answer is cached), retries through moved leaders and dead brokers, and
  ends at its own deadline; its errors are turned into ValueError here, which
  ``wait_until`` counts as "not yet", as the raw helpers' error codes were.
- ``roundtrip`` / ``metadata`` / ``partition_states``: one request to one broker at one
  version on a fresh socket (``clients.connection.roundtrip``), for the questions that
  must reach a particular node or version: that broker's own metadata image with its
  partition error codes (tests compare brokers' images), the codec at v4 or v9.
"""
from __future__ import annotations

import glob
import os
import shutil
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from clients import connection
from clients.admin import Admin, NewTopic, OffsetSpec
from clients.errors import KafkaApiError
from clients.cli.launcher import LocalCluster
from clients.protocol import ApiKey, messages
from clients.records import Record, build_batch, decode_batches, iter_batches
from clients.types import TopicPartition
from clients.waiting import wait_until  # noqa: F401  (the tests import it from here)

T = TypeVar("T")

__all__ = [
    "PartitionState", "roundtrip", "metadata", "partition_states", "wait_until",
    "high_watermarks", "segment_batches", "alive_broker_ports", "start_cluster", "admin_for",
    "FAST_BROKER", "FAST_CONTROLLER", "STOP_TIMEOUT_S", "ADMIN_CALL_MS", "large_read",
    "runs_uvloop",
]

FAST_BROKER = {
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "num.partitions": "3",
    # A group's first join is answered at once, as in Kafka's own integration tests; the
    # 3 s default only waits for more members that tests do not start together.
    "group.initial.rebalance.delay.ms": "0",
}
FAST_CONTROLLER = {
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "300",
    # A closed heartbeat connection fences after 1 s here, not 250 ms: on a loaded 2-core
    # CI machine a broker's benign reconnect (a heartbeat that timed out) can take longer
    # than 250 ms, and a spurious fence moves leaderships under tests that expect them still.
    "ketch.broker.disconnect.fence.ms": "1000",
}
# Teardown escalates to SIGKILL after this; a clean stop takes well under a second, and
# test_faults checks clean exits on its own, so the fixture need not wait long.
STOP_TIMEOUT_S = 10


def start_cluster(tmp_path_factory, name: str = "ketch",
                  broker_props: dict[str, str] | None = None,
                  controller_props: dict[str, str] | None = None,
                  controllers: int = 3, brokers: int = 3, attempts: int = 3,
                  broker_racks: dict[int, str] | None = None,
                  broker_log_dirs: int = 1) -> LocalCluster:
    """A started cluster, formatted in a fresh directory.

    LocalCluster picks free ports before it starts the nodes, so a port can be taken in
    between (by another process, or by an outgoing connection of a node already running,
    since the kernel hands both out from the same ephemeral range). That start is retried
    on new ports; anything else fails at once."""
    for attempt in range(attempts):
        c = LocalCluster(str(tmp_path_factory.mktemp(name)), controllers=controllers, brokers=brokers,
                         broker_props={**FAST_BROKER, **(broker_props or {})},
                         controller_props={**FAST_CONTROLLER, **(controller_props or {})},
                         broker_racks=broker_racks, broker_log_dirs=broker_log_dirs)
        try:
            c.start(timeout_s=90)
            return c
        except RuntimeError as e:
            c.stop(timeout_s=STOP_TIMEOUT_S)
            if "address already in use" not in str(e) or attempt == attempts - 1:
                raise
            shutil.rmtree(c.dir, ignore_errors=True)
        except BaseException:
            c.stop(timeout_s=STOP_TIMEOUT_S)
            raise
    raise AssertionError("not reached")


def roundtrip(port: int, api_key: int, api_version: int, body: Any, timeout_s: float = 10.0,
              host: str = "127.0.0.1") -> Any:
    """One request on a fresh connection to one node; the decoded response body."""
    return connection.roundtrip(host, port, api_key, api_version, body, timeout_s=timeout_s,
                                client_id="ketch-it")


# Calls of the shared admin client are short so that polling stays responsive while a
# broker is dead or paused (a paused broker answers nothing until the request times out).
ADMIN_CALL_MS = 10_000
_ADMIN_PROPS = {"request.timeout.ms": 4000, "socket.connection.setup.timeout.ms": 4000,
                "socket.connection.setup.timeout.max.ms": 4000,
                "default.api.timeout.ms": ADMIN_CALL_MS}
_admins: dict[int, Admin] = {}


def admin_for(cluster) -> Admin:
    """The cluster's admin client, made on first use and closed when the cluster object
    goes away (after its fixture has stopped it)."""
    key = id(cluster)
    admin = _admins.get(key)
    if admin is None:
        admin = _admins[key] = Admin({"bootstrap.servers": cluster.spec.bootstrap_servers,
                                      "client.id": "ketch-it-admin", **_ADMIN_PROPS})
        weakref.finalize(cluster, _close_admin, key)
    return admin


def _close_admin(key: int) -> None:
    admin = _admins.pop(key, None)
    if admin is not None:
        # On a thread of its own: the garbage collector may run this finalizer on the
        # clients' loop thread, where a blocking close() would wait on itself (and
        # LoopThread.run refuses it: a warning in CI).
        threading.Thread(target=admin.close, name="close-test-admin", daemon=True).start()


def _asked(call: Callable[[], T], what: str) -> T:
    """An admin call whose Kafka errors are ValueErrors (``wait_until``: "not yet")."""
    try:
        return call()
    except KafkaApiError as e:
        raise ValueError(f"{what}: {e}") from e


def alive_broker_ports(cluster) -> list[int]:
    return [b.port for b in cluster.spec.brokers
            if cluster.processes.get(b.id) is not None and cluster.processes[b.id].poll() is None]


def metadata(port: int, topics: list[str] | None, version: int = 12,
             allow_auto_topic_creation: bool = False) -> Any:
    req = messages.MetadataRequest(
        topics=None if topics is None else [messages.MetadataRequest.MetadataRequestTopic(name=t)
                                            for t in topics],
        allow_auto_topic_creation=allow_auto_topic_creation)
    return roundtrip(port, ApiKey.METADATA, version, req)


@dataclass(frozen=True, slots=True)
class PartitionState:
    partition: int
    error_code: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partition_states(cluster, topic: str, port: int | None = None) -> dict[int, PartitionState]:
    """The topic's partitions as one live broker's metadata image shows it, partition error
    codes included (raw Metadata v12: the tests compare brokers' images with it)."""
    ports = [port] if port is not None else alive_broker_ports(cluster)
    last: BaseException | None = None
    for p in ports:
        try:
            resp = metadata(p, [topic])
        except OSError as e:
            last = e
            continue
        (t,) = resp.topics
        if t.error_code != 0:
            raise ValueError(f"metadata for {topic}: error {t.error_code}")
        return {pp.partition_index: PartitionState(pp.partition_index, pp.error_code, pp.leader_id,
                                                   pp.leader_epoch, tuple(pp.replica_nodes),
                                                   tuple(pp.isr_nodes))
                for pp in t.partitions}
    raise ConnectionError(f"no broker answered Metadata: {last!r}")


def high_watermarks(cluster, topic: str, partitions: list[int]) -> dict[int, int]:
    """Latest offsets (the high watermark, isolation READ_UNCOMMITTED) from each leader."""
    latest = _asked(lambda: admin_for(cluster).list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}, timeout_ms=ADMIN_CALL_MS),
        f"ListOffsets {topic}")
    return {tp.partition: r.offset for tp, r in latest.items()}


def segment_batches(data_dir: str, topic: str, partition: int) -> list[tuple[bytes, Any]]:
    """(raw bytes, decoded RecordBatch) of every whole batch in the replica's segment files,
    in offset order. A torn tail (a batch being written) is left out."""
    out = []
    paths = sorted(glob.glob(os.path.join(data_dir, f"{topic}-{partition}", "*.log")))
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        positions = [(pos, h.size_in_bytes) for pos, h in iter_batches(data, partial_tail_ok=True)]
        end = positions[-1][0] + positions[-1][1] if positions else 0
        for (pos, size), batch in zip(positions, decode_batches(data[:end])):
            out.append((data[pos:pos + size], batch))
    out.sort(key=lambda x: x[1].header.base_offset)
    return out


def large_read(cluster, topic: str, seed: int) -> tuple[list[bytes], list[bytes], dict[int, list[bytes]]]:
    """A batch of 4 records of 200 KB (random bytes) produced with acks=all to ``topic``
    (one partition, replicas [1, 2, 3], broker 1 leading), far above SENDFILE_MIN_BYTES:
    the leader answers a consumer's Fetch of it, and each follower's Fetch, with a log region
    sent by os.sendfile. Returns the values produced, the values the consumer's Fetch brought
    and the values in each follower's log once it holds the batch."""
    import random
    rng = random.Random(seed)
    values = [rng.randbytes(200_000) for _ in range(4)]
    admin_for(cluster).create_topics([NewTopic(topic, replica_assignments={0: [1, 2, 3]})])
    leader = cluster.spec.node(1).port
    P = messages.ProduceRequest

    def produced() -> bool:
        resp = roundtrip(leader, ApiKey.PRODUCE, 9, P(acks=-1, timeout_ms=10_000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(
                index=0, records=build_batch([Record(i, 0, None, v) for i, v in enumerate(values)]))])]))
        return resp.responses[0].partition_responses[0].error_code == 0
    wait_until(produced, 30, f"{topic}: the batch acknowledged by all replicas")
    F = messages.FetchRequest
    resp = roundtrip(leader, ApiKey.FETCH, 11, F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 21, isolation_level=0,
        topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 21)])]))
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0, part
    fetched = [r.value for b in decode_batches(bytes(part.records)) for r in b.records]

    def follower_values(broker_id: int) -> list[bytes]:
        batches = segment_batches(cluster.spec.node(broker_id).data_dir, topic, 0)
        return [r.value for _, b in batches for r in b.records]
    for broker_id in (2, 3):
        wait_until(lambda: len(follower_values(broker_id)) == len(values), 30,
                   f"{topic}: broker {broker_id} holds the batch")
    return values, fetched, {b: follower_values(b) for b in (2, 3)}


def runs_uvloop(cluster, broker_id: int) -> bool:
    """Whether that broker's process has uvloop's extension module loaded (it is imported
    only to run under it: broker/__main__.py)."""
    with open(f"/proc/{cluster.spec.node(broker_id).pid}/maps") as f:
        return "uvloop/loop." in f.read()
