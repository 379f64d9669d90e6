"""Faults as data, and one function that injects them.

A scenario says *what* goes wrong as a value (``Kill(2)``, ``Cut(1, 1001)``,
``FlipByte(3, "t", 0)``) and ``inject`` makes it happen on a ``ChaosCluster``; the workload
never knows. Kafka keeps the same split (trogdor's ``ProcessStopFaultSpec`` and
``NetworkPartitionFaultSpec`` next to a workload spec). Every injection returns a line
saying exactly what was done (which pid, which byte), for the scenario's event log.

Disk faults (``TornTail``, ``FlipByte``) act on the segment files of a *stopped* broker,
as a crash or bit rot would leave them; recovery at the next start must cut the log back
to the last valid batch and report it.

Choices a fault leaves open (which byte, where to tear) come from the ``random.Random``
passed in, so a run is replayed by its seed.
"""
from __future__ import annotations

import glob
import os
import random
from dataclasses import dataclass

from chaos.cluster import ChaosCluster
from clients.protocol import ApiKey
from clients.records import iter_batches

__all__ = [
    "Cut", "Delay", "DropResponses", "Fault", "FlipByte", "Heal", "Isolate", "Kill", "KillMany", "Pause",
    "Restart", "Resume", "Terminate", "TornTail", "inject",
]

# The bytes of a v2 batch header before the CRC-covered part (base_offset .. crc).
_CRC_COVERED_FROM = 21


@dataclass(frozen=True, slots=True)
class Kill:
    """SIGKILL: a crash; unflushed writes stay in the page cache, nothing is fsynced."""
    node_id: int


@dataclass(frozen=True, slots=True)
class KillMany:
    """SIGKILL to several nodes back to back, before reaping any (nearly the same moment)."""
    node_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Terminate:
    """SIGTERM: a broker's controlled shutdown (moves its leaderships away first)."""
    node_id: int


@dataclass(frozen=True, slots=True)
class Pause:
    """SIGSTOP: a long stop-the-world pause, until ``Resume``."""
    node_id: int


@dataclass(frozen=True, slots=True)
class Resume:
    node_id: int


@dataclass(frozen=True, slots=True)
class Restart:
    """Start a stopped node and wait until it serves (a broker registered and unfenced)."""
    node_id: int
    wait: bool = True


@dataclass(frozen=True, slots=True)
class Cut:
    """Lose the bytes of link src -> dst: "both", "up" (requests) or "down" (responses)."""
    src: int
    dst: int
    direction: str = "both"


@dataclass(frozen=True, slots=True)
class Delay:
    """Hold the bytes of link src -> dst for ``delay_ms`` (0 ends the delay); with
    ``api_keys``, only the frames of those APIs (and what queues behind them)."""
    src: int
    dst: int
    delay_ms: int
    api_keys: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Isolate:
    """Cut every inter-node link from and to a node; clients still reach it."""
    node_id: int


@dataclass(frozen=True, slots=True)
class Heal:
    """Every link works again (connections that lost bytes are closed)."""


@dataclass(frozen=True, slots=True)
class DropResponses:
    """The next ``count`` responses to these APIs on the clients' link to a broker are
    dropped after the broker served the request; the client's connection is closed."""
    broker_id: int
    count: int = 1
    api_keys: tuple[int, ...] = (ApiKey.PRODUCE,)


@dataclass(frozen=True, slots=True)
class TornTail:
    """Truncate a stopped broker's partition log in the middle of its last batch."""
    broker_id: int
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class FlipByte:
    """Flip one byte inside a CRC-covered part of a batch of a stopped broker's active
    segment (``batch_index`` counts from the end: 0 is the last batch)."""
    broker_id: int
    topic: str
    partition: int
    batch_index: int = 0


Fault = (Kill | KillMany | Terminate | Pause | Resume | Restart | Cut | Delay | Isolate | Heal |
         DropResponses | TornTail | FlipByte)


def inject(cluster: ChaosCluster, fault: Fault, rng: random.Random | None = None) -> str:
    """Make ``fault`` happen; returns what was done."""
    rng = rng or random.Random(0)
    match fault:
        case Kill(node_id):
            pid = cluster.node(node_id).pid
            cluster.kill(node_id)
            return f"SIGKILL {node_id} (pid {pid})"
        case KillMany(node_ids):
            pids = {n: cluster.node(n).pid for n in node_ids}
            cluster.kill_many(node_ids)
            return "SIGKILL " + ", ".join(f"{n} (pid {p})" for n, p in pids.items())
        case Terminate(node_id):
            code = cluster.terminate(node_id)
            return f"SIGTERM {node_id}: exit {code}"
        case Pause(node_id):
            cluster.pause(node_id)
            return f"SIGSTOP {node_id}"
        case Resume(node_id):
            cluster.resume(node_id)
            return f"SIGCONT {node_id}"
        case Restart(node_id, wait):
            if wait:
                cluster.restart(node_id)
            else:
                cluster.start_node(node_id)
            return f"restart {node_id} (pid {cluster.node(node_id).pid})"
        case Cut(src, dst, direction):
            cluster.cut(src, dst, direction)
            return f"cut {src}->{dst} ({direction})"
        case Delay(src, dst, delay_ms, api_keys):
            cluster.delay(src, dst, delay_ms, api_keys)
            return f"delay {src}->{dst} by {delay_ms} ms" + (f" for API keys {list(api_keys)}" if api_keys else "")
        case Isolate(node_id):
            names = cluster.isolate(node_id)
            return f"isolate {node_id}: {', '.join(sorted(names))}"
        case Heal():
            cluster.heal()
            return "heal all links"
        case DropResponses(broker_id, count, api_keys):
            assert cluster.hub is not None and cluster.client_proxies, "needs client_proxies"
            cluster.hub.drop_responses(f"client->{broker_id}", api_keys, count)
            return f"drop the next {count} responses {[ApiKey(k).name for k in api_keys]} to clients of {broker_id}"
        case TornTail(broker_id, topic, partition):
            return _torn_tail(cluster, broker_id, topic, partition, rng)
        case FlipByte(broker_id, topic, partition, batch_index):
            return _flip_byte(cluster, broker_id, topic, partition, batch_index, rng)
    raise TypeError(f"not a fault: {fault!r}")


def _active_segment(cluster: ChaosCluster, broker_id: int, topic: str, partition: int) -> str:
    assert not cluster.is_running(broker_id), "disk faults need a stopped broker"
    paths = sorted(glob.glob(os.path.join(cluster.node(broker_id).data_dir, f"{topic}-{partition}", "*.log")))
    assert paths, f"broker {broker_id} has no segment of {topic}-{partition}"
    return paths[-1]


def _batches(path: str) -> list[tuple[int, int]]:
    with open(path, "rb") as f:
        data = f.read()
    return [(pos, h.size_in_bytes) for pos, h in iter_batches(data, partial_tail_ok=True, check_crc=False)]


def _torn_tail(cluster: ChaosCluster, broker_id: int, topic: str, partition: int,
               rng: random.Random) -> str:
    path = _active_segment(cluster, broker_id, topic, partition)
    batches = _batches(path)
    assert batches, f"{path} holds no batch to tear"
    pos, size = batches[-1]
    cut_at = pos + rng.randint(1, size - 1)
    before = os.path.getsize(path)
    os.truncate(path, cut_at)
    return f"torn tail: {os.path.basename(path)} of broker {broker_id} cut from {before} to {cut_at} bytes " \
           f"(its last batch starts at {pos})"


def _flip_byte(cluster: ChaosCluster, broker_id: int, topic: str, partition: int, batch_index: int,
               rng: random.Random) -> str:
    path = _active_segment(cluster, broker_id, topic, partition)
    batches = _batches(path)
    assert len(batches) > batch_index, f"{path} holds {len(batches)} batches"
    pos, size = batches[-1 - batch_index]
    where = pos + rng.randrange(_CRC_COVERED_FROM + 4, size)
    with open(path, "r+b") as f:
        f.seek(where)
        old = f.read(1)[0]
        f.seek(where)
        f.write(bytes([old ^ 0xFF]))
    return f"flipped byte {where} of {os.path.basename(path)} of broker {broker_id} " \
           f"(0x{old:02x} -> 0x{old ^ 0xFF:02x}, inside the batch at {pos})"

