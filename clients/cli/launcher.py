"""``ketch up``: a local cluster of controller and broker processes under one directory.

The embedded default is 3 controllers and 3 brokers on 127.0.0.1 with free ports. The
first run formats ``DIR``: it picks ports, a cluster id and a cluster secret (the password
of the controllers' Raft transport), writes one ``server.properties`` per node with
Kafka's keys, and records everything in ``DIR/cluster.json``. A later run on the same
``DIR`` starts the same cluster (same ids, ports and data). Each node is a child process
(``python -m quorum`` / ``python -m broker``) logging to ``DIR/<node>/node.log``.

``cluster.json`` (read by tests and the chaos tools)::

    {"cluster_id": ..., "bootstrap_servers": "127.0.0.1:p1,...",
     "nodes": [{"id": 1, "role": "broker", "pid": 123, "port": p1,
                "data_dir": "...", "config": ".../server.properties", "log": "..."},
               {"id": 1001, "role": "controller", "pid": ..., "port": ..., "raft_port": ...}]}

This module spawns processes by module name only, so ``clients`` still imports nothing
from the broker or quorum packages.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field

from clients.properties import format_properties
from clients.protocol import NEED_DATA, ApiKey, ClientConnection, messages

__all__ = ["ClusterSpec", "LocalCluster", "NodeSpec", "free_ports"]

CONTROLLER_ID_BASE = 1000


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that bind now, chosen *below* the kernel's ephemeral range:
    a port from that range, once released, can be taken by any outgoing connection before
    the node binds it (seen when a node restarts), so listeners must live elsewhere."""
    lo, _ = _ephemeral_range()
    low, high = (10000, lo) if lo > 12000 else (1024, lo)
    rng = random.SystemRandom()
    out: list[int] = []
    attempts = 0
    while len(out) < count:
        attempts += 1
        if attempts > 100 * count:
            raise OSError(f"no {count} free ports between {low} and {high}")
        port = rng.randrange(low, high)
        if port in out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        out.append(port)
    return out


def new_cluster_id() -> str:
    """Kafka's format: a random UUID in URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class NodeSpec:
    id: int
    role: str                    # "controller" or "broker"
    port: int
    data_dir: str
    config: str
    log: str
    raft_port: int | None = None
    pid: int | None = None
    http_port: int | None = None     # brokers: the HTTP admin API and /metrics


@dataclass
class ClusterSpec:
    dir: str
    cluster_id: str
    nodes: list[NodeSpec] = field(default_factory=list)

    @property
    def brokers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.role == "broker"]

    @property
    def controllers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.role == "controller"]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.brokers)

    def to_json(self) -> dict:
        return {"cluster_id": self.cluster_id, "dir": self.dir,
                "bootstrap_servers": self.bootstrap_servers,
                "nodes": [asdict(n) for n in self.nodes]}

    @classmethod
    def from_json(cls, data: dict) -> "ClusterSpec":
        return cls(data["dir"], data["cluster_id"], [NodeSpec(**n) for n in data["nodes"]])

    def node(self, node_id: int) -> NodeSpec:
        return next(n for n in self.nodes if n.id == node_id)


class LocalCluster:
    """Formats, starts and stops a local cluster; tests and ``ketch up`` share it."""

    def __init__(self, directory: str, controllers: int = 3, brokers: int = 3,
                 broker_props: dict[str, str] | None = None,
                 controller_props: dict[str, str] | None = None) -> None:
        self.dir = os.path.abspath(directory)
        self.controllers = controllers
        self.brokers = brokers
        self.broker_props = broker_props or {}
        self.controller_props = controller_props or {}
        self.spec = self._load_or_format()
        self.processes: dict[int, subprocess.Popen] = {}
        # Extra environment per node id (e.g. KETCH_CONNECT_VIA for the chaos proxies).
        self.node_env: dict[int, dict[str, str]] = {}

    @property
    def json_path(self) -> str:
        return os.path.join(self.dir, "cluster.json")

    def _load_or_format(self) -> ClusterSpec:
        if os.path.exists(self.json_path):
            with open(self.json_path) as f:
                spec = ClusterSpec.from_json(json.load(f))
            self._write_configs(spec)   # overrides given on this run apply again
            return spec
        os.makedirs(self.dir, exist_ok=True)
        ports = free_ports(2 * self.controllers + 2 * self.brokers)
        spec = ClusterSpec(self.dir, new_cluster_id())
        for i in range(self.controllers):
            node_id = CONTROLLER_ID_BASE + i + 1
            spec.nodes.append(self._node(node_id, "controller", ports[2 * i], ports[2 * i + 1]))
        for i in range(self.brokers):
            node = self._node(i + 1, "broker", ports[2 * self.controllers + i])
            node.http_port = ports[2 * self.controllers + self.brokers + i]
            spec.nodes.append(node)
        secret_path = os.path.join(self.dir, "cluster.secret")
        with open(os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(secrets.token_urlsafe(32))
        self._write_configs(spec)
        self.write_json(spec)
        return spec

    def _node(self, node_id: int, role: str, port: int, raft_port: int | None = None) -> NodeSpec:
        name = f"{role}-{node_id}"
        base = os.path.join(self.dir, name)
        return NodeSpec(node_id, role, port, os.path.join(base, "data"),
                        os.path.join(base, "server.properties"), os.path.join(base, "node.log"),
                        raft_port)

    def _write_configs(self, spec: ClusterSpec) -> None:
        voters = ",".join(f"{c.id}@127.0.0.1:{c.port}" for c in spec.controllers)
        raft_voters = ",".join(f"{c.id}@127.0.0.1:{c.raft_port}" for c in spec.controllers)
        secret_file = os.path.join(self.dir, "cluster.secret")
        replication = str(min(3, len(spec.brokers)))
        for node in spec.nodes:
            os.makedirs(os.path.dirname(node.config), exist_ok=True)
            props = {"node.id": str(node.id), "process.roles": node.role,
                     "controller.quorum.voters": voters, "ketch.cluster.id": spec.cluster_id}
            if node.role == "controller":
                props.update({
                    "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
                    "ketch.raft.voters": raft_voters, "ketch.cluster.secret.file": secret_file,
                    "metadata.log.dir": node.data_dir,
                    "default.replication.factor": replication,
                })
                props.update(self.controller_props)
            else:
                props.update({
                    "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                    "log.dirs": node.data_dir,
                    "default.replication.factor": replication,
                    "offsets.topic.replication.factor": replication,
                    "min.insync.replicas": "1",
                })
                if node.http_port is not None:
                    props["ketch.http.port"] = str(node.http_port)
                props.update(self.broker_props)
            with open(node.config, "w") as f:
                f.write(format_properties(props))

    def write_json(self, spec: ClusterSpec | None = None) -> None:
        spec = spec or self.spec
        tmp = self.json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(spec.to_json(), f, indent=2)
        os.replace(tmp, self.json_path)

    # ------------------------------------------------------------ processes

    def start_node(self, node_id: int) -> subprocess.Popen:
        node = self.spec.node(node_id)
        module = "quorum" if node.role == "controller" else "broker"
        log_file = open(node.log, "ab")
        proc = subprocess.Popen([sys.executable, "-m", module, "--config", node.config],
                                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=self.dir, env={**_child_env(), **self.node_env.get(node_id, {})},
                                start_new_session=True)
        log_file.close()
        node.pid = proc.pid
        self.processes[node_id] = proc
        self.write_json()
        return proc

    def start(self, timeout_s: float = 60.0) -> None:
        for node in self.spec.controllers:
            self.start_node(node.id)
        for node in self.spec.brokers:
            self.start_node(node.id)
        self.wait_until_ready(timeout_s)

    def wait_until_ready(self, timeout_s: float = 60.0) -> None:
        """Until every broker answers Metadata listing all brokers (all unfenced)."""
        deadline = time.monotonic() + timeout_s
        want = {b.id for b in self.spec.brokers}
        while time.monotonic() < deadline:
            self._check_alive()
            seen = [_metadata_broker_ids("127.0.0.1", b.port) for b in self.spec.brokers
                    if self.processes.get(b.id) is not None]
            if seen and all(s is not None and want <= s for s in seen):
                return
            time.sleep(0.2)
        raise TimeoutError(f"cluster in {self.dir} not ready after {timeout_s}s; see the node.log files")

    def _check_alive(self) -> None:
        for node_id, proc in self.processes.items():
            if proc.poll() is not None:
                node = self.spec.node(node_id)
                raise RuntimeError(f"{node.role} {node_id} exited with {proc.returncode}; "
                                   f"last lines of {node.log}:\n{_tail(node.log)}")

    def exited_nodes(self) -> dict[int, int]:
        return {node_id: proc.returncode for node_id, proc in self.processes.items()
                if proc.poll() is not None}

    def signal_node(self, node_id: int, sig: int) -> None:
        proc = self.processes.get(node_id)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, sig)

    def stop_node(self, node_id: int, timeout_s: float = 30.0, sig: int = signal.SIGTERM) -> int | None:
        proc = self.processes.get(node_id)
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)   # a paused process cannot shut down
                os.kill(proc.pid, sig)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        self.processes.pop(node_id, None)
        return proc.returncode

    def kill_node(self, node_id: int) -> None:
        self.stop_node(node_id, timeout_s=10.0, sig=signal.SIGKILL)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Brokers first (controlled shutdown needs the controllers), then controllers."""
        for node in self.spec.brokers:
            self.signal_node(node.id, signal.SIGTERM)
        for node in self.spec.brokers:
            self.stop_node(node.id, timeout_s)
        for node in self.spec.controllers:
            self.stop_node(node.id, timeout_s)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
    except OSError:
        return "(no log)"


def _metadata_broker_ids(host: str, port: int) -> set[int] | None:
    """A blocking Metadata v1 round trip: the ids of the live brokers, or None."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            conn = ClientConnection(client_id="ketch-up")
            _, data = conn.send(ApiKey.METADATA, 1, messages.MetadataRequest(topics=[]))
            s.sendall(data)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                conn.receive_data(chunk)
                event = conn.next_event()
                if event is not NEED_DATA:
                    return {b.node_id for b in event.body.brokers}
    except OSError:
        return None
