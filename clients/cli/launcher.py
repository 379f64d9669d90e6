"""``ketch up``: a local cluster of controller and broker processes under one directory.

The embedded default is 3 controllers and 3 brokers on 127.0.0.1 with free ports. The
first run formats ``DIR``: it picks ports, a cluster id and a cluster secret (the password
of the controllers' Raft transport), writes one ``server.properties`` per node with
Kafka's keys, and records everything in ``DIR/cluster.json``. A later run on the same
``DIR`` starts the same cluster (same ids, ports and data) and keeps each node's
``server.properties`` as it finds it (an operator's hand edits stay); the overrides given
to this run are set on top, and ``config_changes`` says what they changed. A later run
takes the controllers the directory holds (another ``--controllers`` count is refused)
and brokers can be added but not removed (their replicas would be stranded):
``ClusterSizeError`` otherwise, before anything is written. Each node is a child process
(``python -m quorum`` / ``python -m broker``) logging to ``DIR/<node>/node.log``.

Controllers come and go while the cluster runs (KIP-853), as Kafka 4 adds one: the next
controller is formatted as a joining one (``add_controller``: its server.properties names
the current voters, not itself), started as an observer of the metadata log, and made a
voter once caught up, by the code of ``ketch quorum add-controller``
(``clients/cli/quorum.py``); ``remove_controller`` removes the voter, stops the process and
deletes its directory (its metadata log is a copy of the quorum's; a removed controller
could not start from it anyway: its journal says it was removed). Either way the voters'
keys of every node's server.properties (``controller.quorum.voters``,
``ketch.raft.voters``) and cluster.json are rewritten to the new voter set, so the next run
starts the controllers there are, each as a voter, and brokers that know them all.
Running brokers know the controllers named when they started (``known_controllers``)
until they restart: a removal that would leave a running broker none it knows is refused.

One launcher per directory: a ``LocalCluster`` holds ``DIR/.lock`` (``clients.data_dir_lock``,
Kafka's lock file) from construction until ``stop``, and records its pid in cluster.json
(``launcher_pid``: ``ketch up``'s). A second one on the same ``DIR`` raises
``ClusterInUseError`` naming that pid, as it does when nodes of an earlier launcher that
was killed still hold their own data directories' locks; nothing is written first.

``cluster.json`` (read by tests and the chaos tools)::

    {"cluster_id": ..., "bootstrap_servers": "127.0.0.1:p1,...", "launcher_pid": 99,
     "nodes": [{"id": 1, "role": "broker", "pid": 123, "port": p1,
                "data_dir": "...", "config": ".../server.properties", "log": "..."},
               {"id": 1001, "role": "controller", "pid": ..., "port": ..., "raft_port": ...}]}

This module spawns processes by module name only, so ``clients`` still imports nothing
from the broker or quorum packages.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Collection
from dataclasses import asdict, dataclass, field
from typing import Any

from clients.data_dir_lock import DataDirInUseError, DataDirLock, holder, lock_data_dir
from clients.properties import format_properties, parse_properties
from clients.protocol import NEED_DATA, ApiKey, ClientConnection, messages
from clients.protocol.acls import STANDARD_AUTHORIZER_CLASS

__all__ = ["ClusterInUseError", "ClusterSizeError", "ClusterSpec", "LocalCluster", "NodeSpec", "broker_log_dirs",
           "free_ports"]

CONTROLLER_ID_BASE = 1000
DEFAULT_CONTROLLERS = 3
DEFAULT_BROKERS = 3


# Keys that belong to one broker: not copied from another broker's file to a new one.
_PER_BROKER_KEYS = frozenset({"node.id", "listeners", "advertised.listeners", "log.dirs", "log.dir",
                              "ketch.http.port", "broker.rack"})
# The keys naming the voters, rewritten in every node's file when the voter set changes.
_VOTER_KEYS = frozenset({"controller.quorum.voters", "ketch.raft.voters"})
# Keys that belong to one controller (the same for a new controller's file).
_PER_CONTROLLER_KEYS = frozenset({"node.id", "listeners", "metadata.log.dir", "log.dirs", "log.dir",
                                  "ketch.http.port", "ketch.raft.port.offset"}) | _VOTER_KEYS
# How long a started controller may take to write its meta.properties (its directory id).
_DIRECTORY_ID_WAIT_S = 30.0


class ClusterInUseError(RuntimeError):
    """The directory belongs to a running cluster (or to nodes an earlier launcher left)."""


class ClusterSizeError(ValueError):
    """A node count the directory's cluster cannot change to."""


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int, host: str = "127.0.0.1", exclude: Collection[int] = ()) -> list[int]:
    """``count`` distinct ports that bind now, chosen *below* the kernel's ephemeral range:
    a port from that range, once released, can be taken by any outgoing connection before
    the node binds it (seen when a node restarts), so listeners must live elsewhere.
    ``exclude``: ports already given to nodes that are not running now."""
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
        if port in out or port in exclude:
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
    http_port: int | None = None     # the HTTP admin API, /metrics and the status page


@dataclass
class ClusterSpec:
    dir: str
    cluster_id: str
    nodes: list[NodeSpec] = field(default_factory=list)
    launcher_pid: int | None = None      # the process that runs the cluster (ketch up)
    # ketch up --secure: brokers listen on SASL_SSL only; the client properties to use
    # (admin user, CA) are in this file of the directory (see SecureSetup).
    client_properties: str | None = None

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
        out = {"cluster_id": self.cluster_id, "dir": self.dir,
               "bootstrap_servers": self.bootstrap_servers, "launcher_pid": self.launcher_pid,
               "nodes": [asdict(n) for n in self.nodes]}
        if self.client_properties:
            out["client_properties"] = self.client_properties
        return out

    @classmethod
    def from_json(cls, data: dict) -> "ClusterSpec":
        return cls(data["dir"], data["cluster_id"], [NodeSpec(**n) for n in data["nodes"]],
                   data.get("launcher_pid"), data.get("client_properties"))

    def node(self, node_id: int) -> NodeSpec:
        return next(n for n in self.nodes if n.id == node_id)


class LocalCluster:
    """Formats, starts and stops a local cluster; tests and ``ketch up`` share it.

    ``controllers`` / ``brokers``: the sizes of a new cluster (None: 3 each); on an existing
    ``directory``, None means "what it holds" and a different count raises
    ``ClusterSizeError`` (more brokers are added instead)."""

    def __init__(self, directory: str, controllers: int | None = None, brokers: int | None = None,
                 broker_props: dict[str, str] | None = None,
                 controller_props: dict[str, str] | None = None,
                 broker_racks: dict[int, str] | None = None, broker_log_dirs: int = 1,
                 secure: bool = False) -> None:
        """``broker_log_dirs``: log directories per new broker (JBOD): its data dir, then
        ``data-2``, ``data-3``... beside it. ``secure``: a new directory's brokers listen
        with TLS and SASL only (``SecureSetup``); an existing directory keeps what it was
        formatted with."""
        self.secure_requested = secure
        assert broker_log_dirs >= 1, broker_log_dirs
        self.dir = os.path.abspath(directory)
        self.broker_log_dirs = broker_log_dirs
        self.broker_props = broker_props or {}
        # broker.rack of new brokers, by node id (a formatted cluster keeps its files' own).
        self.broker_racks = broker_racks or {}
        self.controller_props = controller_props or {}
        # What this run's overrides changed in existing server.properties files:
        # (role, key, old value or None, new value) -> node ids.
        self.config_changes: dict[tuple[str, str, str | None, str], list[int]] = {}
        self.added_brokers: list[int] = []
        # The controllers each running broker was started with (its controller.quorum.voters):
        # the ones it surely reaches (it learns added ones at its next voter-set refresh).
        self.known_controllers: dict[int, frozenset[int]] = {}
        self.formatted = False            # True: this run formatted the directory
        self.processes: dict[int, subprocess.Popen] = {}
        # Extra environment per node id (e.g. KETCH_CONNECT_VIA for the chaos proxies).
        self.node_env: dict[int, dict[str, str]] = {}
        self._lock: DataDirLock | None = None
        self._take_lock()
        try:
            self.spec = self._load_or_format(controllers, brokers)
        except BaseException:
            self._release_lock()
            raise
        self.controllers = len(self.spec.controllers)
        self.brokers = len(self.spec.brokers)
        self.security = SecureSetup(self.dir) if self.spec.client_properties else None

    @property
    def json_path(self) -> str:
        return os.path.join(self.dir, "cluster.json")

    # ------------------------------------------------------------ the directory

    def _take_lock(self) -> None:
        """Hold DIR/.lock, and refuse a directory whose nodes are still running."""
        try:
            self._lock = lock_data_dir(self.dir)
        except DataDirInUseError as e:
            raise ClusterInUseError(self._in_use_message(e.pid)) from None
        spec = self._read_spec()
        if spec is None:
            return
        running = [(n, holder(n.data_dir)) for n in spec.nodes]
        running = [(n, pid) for n, pid in running if pid is not None]
        if running:
            self._release_lock()
            names = ", ".join(f"{n.role} {n.id} (pid {pid})" for n, pid in running)
            pids = " ".join(str(pid) for _, pid in running if pid > 0)
            raise ClusterInUseError(
                f"{self.dir} has nodes still running without the launcher that started them "
                f"(was it killed?): {names}; stop them (kill {pids}) or use another directory")

    def _in_use_message(self, pid: int | None) -> str:
        spec = self._read_spec()
        if pid is not None and spec is not None and spec.launcher_pid == pid and _alive(pid):
            who = f"a running cluster: ketch up pid {pid}"
        elif pid is not None:
            who = f"pid {pid}"
        else:
            who = "another process"
        stop = f"stop it (kill {pid}, or Ctrl-C where it runs)" if pid is not None else "stop it"
        return f"{self.dir} is in use by {who} (it holds {self.dir}/.lock); {stop} or use another directory"

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _read_spec(self) -> ClusterSpec | None:
        try:
            with open(self.json_path) as f:
                return ClusterSpec.from_json(json.load(f))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ClusterInUseError(f"{self.json_path} is unreadable ({e}); "
                                    "move the directory aside or repair the file") from None

    def _load_or_format(self, controllers: int | None, brokers: int | None) -> ClusterSpec:
        spec = self._read_spec()
        if spec is not None:
            self._check_size(spec, controllers, brokers)
            # Everything is decided before anything is written: a refusal changes nothing.
            if brokers is not None and brokers > len(spec.brokers):
                self._add_brokers(spec, brokers - len(spec.brokers))
            self._give_http_ports(spec)
            self._update_configs(spec)
            self.write_json(spec)
            write_prometheus_files(spec)
            return spec
        controllers = DEFAULT_CONTROLLERS if controllers is None else controllers
        brokers = DEFAULT_BROKERS if brokers is None else brokers
        self.formatted = True
        os.makedirs(self.dir, exist_ok=True)
        ports = free_ports(3 * controllers + 2 * brokers)
        spec = ClusterSpec(self.dir, new_cluster_id())
        if self.secure_requested:
            SecureSetup.create(self.dir)
            spec.client_properties = SecureSetup.CLIENT_PROPERTIES
        for i in range(controllers):
            node_id = CONTROLLER_ID_BASE + i + 1
            node = self._node(node_id, "controller", ports[3 * i], ports[3 * i + 1])
            node.http_port = ports[3 * i + 2]
            spec.nodes.append(node)
        for i in range(brokers):
            node = self._node(i + 1, "broker", ports[3 * controllers + i])
            node.http_port = ports[3 * controllers + brokers + i]
            spec.nodes.append(node)
        secret_path = os.path.join(self.dir, "cluster.secret")
        with open(os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(secrets.token_urlsafe(32))
        self._write_configs(spec)
        self.write_json(spec)
        write_prometheus_files(spec)
        return spec

    def _give_http_ports(self, spec: ClusterSpec) -> None:
        """Nodes of a directory formatted before every node had an HTTP API get a port now
        (their server.properties learn it from ``_update_configs``)."""
        missing = [n for n in spec.nodes if n.http_port is None]
        if not missing:
            return
        used = {p for n in spec.nodes for p in (n.port, n.raft_port, n.http_port) if p}
        for node, port in zip(missing, free_ports(len(missing), exclude=used)):
            node.http_port = port
            if os.path.exists(node.config):
                with open(node.config) as f:
                    text = f.read()
                _atomic_write(node.config, _set_properties(text, {"ketch.http.port": str(port)}))

    def _check_size(self, spec: ClusterSpec, controllers: int | None, brokers: int | None) -> None:
        have_c, have_b = len(spec.controllers), len(spec.brokers)
        if controllers is not None and controllers != have_c:
            raise ClusterSizeError(
                f"{self.dir} holds a cluster of {_count(have_c, 'controller')}: drop --controllers "
                f"{controllers} to start it as it is, then grow or shrink it while it runs with "
                f"`ketch up --dir {self.dir} --add-controller` / `--remove-controller ID`")
        if brokers is not None and brokers < have_b:
            raise ClusterSizeError(
                f"{self.dir} holds {_count(have_b, 'broker')}; --brokers {brokers} would strand the replicas "
                f"on brokers {brokers + 1}..{have_b}, which this launcher cannot remove: drop "
                f"--brokers (or give {have_b} or more, to add brokers) or use a new directory")

    def _add_brokers(self, spec: ClusterSpec, count: int) -> None:
        """New brokers start from the first broker's server.properties (its hand edits and
        replication settings are the cluster's), with their own id, listener, log dir and
        HTTP port."""
        used = {p for n in spec.nodes for p in (n.port, n.raft_port, n.http_port) if p}
        ports = free_ports(2 * count, exclude=used)
        first = max(b.id for b in spec.brokers) + 1
        new_nodes = []
        for i in range(count):
            node = self._node(first + i, "broker", ports[i])
            node.http_port = ports[count + i]
            new_nodes.append(node)
        spec.nodes.extend(new_nodes)
        for node in new_nodes:
            props = self._new_node_props(spec, node, _PER_BROKER_KEYS, self.broker_props)
            os.makedirs(os.path.dirname(node.config), exist_ok=True)
            _atomic_write(node.config, format_properties(props))
            self.added_brokers.append(node.id)

    def _new_node_props(self, spec: ClusterSpec, node: NodeSpec, own_keys: frozenset[str],
                        overrides: dict[str, str]) -> dict[str, str]:
        """A node added to a formatted cluster starts from the server.properties of the
        lowest id of its role (its hand edits and settings are the cluster's), with its own
        ``own_keys`` and this run's overrides."""
        template_node = min((n for n in spec.nodes if n.role == node.role and n is not node),
                            key=lambda n: n.id)
        try:
            with open(template_node.config) as f:
                template = parse_properties(f.read())
        except FileNotFoundError:
            template = self._node_props(spec, template_node)
        props = {k: v for k, v in template.items() if k not in own_keys}
        props.update({k: v for k, v in self._node_props(spec, node).items()
                      if k in own_keys or k not in props})
        props.update(overrides)
        return props

    def _update_configs(self, spec: ClusterSpec) -> None:
        """Keep each existing server.properties; set this run's overrides on top."""
        for node in spec.nodes:
            if node.id in self.added_brokers:
                continue
            if not os.path.exists(node.config):   # deleted by hand: written afresh
                self._write_node_config(spec, node)
                self.config_changes.setdefault((node.role, "(the whole file, recreated)", None, ""),
                                               []).append(node.id)
                continue
            overrides = self.controller_props if node.role == "controller" else self.broker_props
            with open(node.config) as f:
                text = f.read()
            current = parse_properties(text)
            changed = {k: v for k, v in overrides.items() if current.get(k) != v}
            if not changed:
                continue
            _atomic_write(node.config, _set_properties(text, changed))
            for key, value in changed.items():
                self.config_changes.setdefault((node.role, key, current.get(key), value),
                                               []).append(node.id)

    def _node(self, node_id: int, role: str, port: int, raft_port: int | None = None) -> NodeSpec:
        name = f"{role}-{node_id}"
        base = os.path.join(self.dir, name)
        return NodeSpec(node_id, role, port, os.path.join(base, "data"),
                        os.path.join(base, "server.properties"), os.path.join(base, "node.log"),
                        raft_port)

    def _node_props(self, spec: ClusterSpec, node: NodeSpec) -> dict[str, str]:
        """A new node's server.properties: what the launcher derives, then the overrides."""
        voters = ",".join(f"{c.id}@127.0.0.1:{c.port}" for c in spec.controllers)
        raft_voters = ",".join(f"{c.id}@127.0.0.1:{c.raft_port}" for c in spec.controllers)
        secret_file = os.path.join(self.dir, "cluster.secret")
        replication = str(min(3, len(spec.brokers)))
        props = {"node.id": str(node.id), "process.roles": node.role,
                 "controller.quorum.voters": voters, "ketch.cluster.id": spec.cluster_id}
        if node.role == "controller":
            props.update({
                "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
                "ketch.raft.voters": raft_voters, "ketch.cluster.secret.file": secret_file,
                "metadata.log.dir": node.data_dir,
                "default.replication.factor": replication,
            })
            if node.http_port is not None:
                props["ketch.http.port"] = str(node.http_port)
            if spec.client_properties:
                props.update(SecureSetup(self.dir).controller_props())
            props.update(self.controller_props)
        else:
            props.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                "log.dirs": ",".join(broker_log_dirs(node, self.broker_log_dirs)),
                "default.replication.factor": replication,
                "offsets.topic.replication.factor": replication,
                "min.insync.replicas": "1",
            })
            if node.http_port is not None:
                props["ketch.http.port"] = str(node.http_port)
            if node.id in self.broker_racks:
                props["broker.rack"] = self.broker_racks[node.id]
            if spec.client_properties:
                props.update(SecureSetup(self.dir).broker_props(node.port))
            props.update(self.broker_props)
        return props

    def _write_node_config(self, spec: ClusterSpec, node: NodeSpec) -> None:
        os.makedirs(os.path.dirname(node.config), exist_ok=True)
        _atomic_write(node.config, format_properties(self._node_props(spec, node)))

    def _write_configs(self, spec: ClusterSpec) -> None:
        """Every node's server.properties written afresh (formatting a new directory)."""
        for node in spec.nodes:
            self._write_node_config(spec, node)

    def write_json(self, spec: ClusterSpec | None = None) -> None:
        spec = spec or self.spec
        spec.launcher_pid = os.getpid()    # only the lock's holder writes cluster.json
        tmp = self.json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(spec.to_json(), f, indent=2)
        os.replace(tmp, self.json_path)

    # ------------------------------------------------------------ processes

    def start_node(self, node_id: int) -> subprocess.Popen:
        if self._lock is None:     # started again after stop()
            self._take_lock()
        node = self.spec.node(node_id)
        running = self.processes.get(node_id)
        if running is not None and running.poll() is None:
            # Two processes on one data directory: the second would fight the first for it.
            raise RuntimeError(f"{node.role} {node_id} is already running (pid {running.pid})")
        module = "quorum" if node.role == "controller" else "broker"
        log_file = open(node.log, "ab")
        proc = subprocess.Popen([sys.executable, "-m", module, "--config", node.config],
                                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=self.dir, env={**_child_env(), **self.node_env.get(node_id, {})},
                                start_new_session=True)
        log_file.close()
        node.pid = proc.pid
        self.processes[node_id] = proc
        if node.role == "broker":
            with contextlib.suppress(OSError):
                with open(node.config) as f:
                    voters = parse_properties(f.read()).get("controller.quorum.voters", "")
                self.known_controllers[node_id] = frozenset(
                    int(v.split("@", 1)[0]) for v in voters.split(",") if v.strip())
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
            seen = [_metadata_broker_ids("127.0.0.1", b.port, self.security) for b in self.spec.brokers
                    if self.processes.get(b.id) is not None]
            if seen and all(s is not None and want <= s for s in seen):
                if self.security is not None:
                    self.security.ensure_admin_user(self.spec.bootstrap_servers)
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

    # ------------------------------------------------------------ the controller set (KIP-853)

    def add_controller(self, timeout_s: float = 60.0,
                       progress: Callable[[str], None] = lambda line: None) -> NodeSpec:
        """Grow the running quorum by one controller (the module docstring's steps); the
        new node. Refused (``clients/cli/quorum.py``'s errors, the quorum's reasons) with
        nothing left behind, unless the voter set names the new controller after all (an
        answer lost on the way): then it stays, as the voter it is."""
        assert self.processes, "add_controller needs the cluster running"
        from clients.cli.quorum import add_controller
        spec = self.spec
        node_id = max(c.id for c in spec.controllers) + 1
        while os.path.exists(os.path.dirname(self._node(node_id, "controller", 0).config)):
            node_id += 1        # a directory left by hand: not ours to reuse
        used = {p for n in spec.nodes for p in (n.port, n.raft_port, n.http_port) if p}
        port, raft_port, http_port = free_ports(3, exclude=used)
        node = self._node(node_id, "controller", port, raft_port)
        node.http_port = http_port
        # Joining: its file names the current voters, not itself. Its own Raft address is
        # its listener's port plus ketch.raft.port.offset (quorum/config.py), which
        # `ketch quorum add-controller` reads the same way.
        props = self._new_node_props(spec, node, _PER_CONTROLLER_KEYS, self.controller_props)
        props["ketch.raft.port.offset"] = str(raft_port - port)
        os.makedirs(os.path.dirname(node.config), exist_ok=True)
        _atomic_write(node.config, format_properties(props))
        spec.nodes.append(node)
        voters = [c.id for c in spec.controllers if c.id != node_id]
        try:
            proc = self.start_node(node_id)
            progress(f"ketch: controller {node_id} started (pid {proc.pid}) as an observer of the "
                     f"metadata log; it becomes a voter once it has caught up")
            self._wait_for_directory_id(node, props["metadata.log.dir"], _DIRECTORY_ID_WAIT_S)
            self._quorum_call(voters, lambda admin: add_controller(admin, node.config,
                                                                   int(timeout_s * 1000)))
        except Exception as e:
            voters_now = self._voter_ids(voters)
            if voters_now is None:
                from clients.cli._common import one_line
                raise RuntimeError(
                    f"{one_line(e)}; no controller answered whether {node_id} is a voter now, so "
                    f"it keeps running (see `ketch quorum status --dir {self.dir}`)") from e
            if node_id not in voters_now:
                self.stop_node(node_id)
                spec.nodes.remove(node)
                self.write_json()
                write_prometheus_files(spec)
                shutil.rmtree(os.path.dirname(node.config), ignore_errors=True)
                raise
            progress(f"ketch: controller {node_id} is a voter although the answer was an error ({e})")
        self._write_voters(spec)
        self.write_json()
        write_prometheus_files(spec)
        return node

    def remove_controller(self, node_id: int, timeout_s: float = 60.0) -> NodeSpec:
        """Shrink the running quorum by controller ``node_id`` (the module docstring's
        steps); the removed node. The quorum refuses the last voter and a removal that
        would leave no caught-up majority (``quorum/voters.py``)."""
        from clients.cli.quorum import remove_controller
        spec = self.spec
        node = next((c for c in spec.controllers if c.id == node_id), None)
        if node is None:
            raise ClusterSizeError(f"{node_id} is not a controller of the cluster in {self.dir} "
                                   f"(its controllers: {', '.join(str(c.id) for c in spec.controllers)})")
        left = {c.id for c in spec.controllers} - {node_id}
        # Brokers follow the voter set (broker/controller_endpoints.py), but only from their
        # next DescribeQuorum refresh (every 5 s): one that has not refreshed since the add
        # knows the controllers of its start alone, and removing the last of those would cut
        # it off (Kafka has the same window). Kept while ketch up cannot ask a broker what it
        # has learned.
        stranded = sorted(b for b, known in self.known_controllers.items()
                          if b in self.processes and left and not known & left)
        if stranded:
            raise ClusterSizeError(
                f"brokers {','.join(map(str, stranded))} reach the quorum through controller "
                f"{node_id} alone (the controllers in their server.properties when they started): "
                f"removing it would cut them off; restart `ketch up --dir {self.dir}` first (it "
                "names every controller to them), then remove it")
        voters = sorted({c.id for c in spec.controllers})
        try:
            self._quorum_call(voters, lambda admin: remove_controller(admin, node_id, None,
                                                                      int(timeout_s * 1000)))
        except Exception:
            # An answer lost on the way may hide a removal that happened: then finish it
            # (a removed controller would refuse to start from its directory next time).
            if node_id in (self._voter_ids(voters) or {node_id}):
                raise
        self.stop_node(node_id)
        spec.nodes.remove(node)
        self._write_voters(spec)
        self.write_json()
        write_prometheus_files(spec)
        shutil.rmtree(os.path.dirname(node.config), ignore_errors=True)
        return node

    def _quorum_call(self, controller_ids: Collection[int],
                     call: Callable[[Any], Awaitable[Any]]) -> Any:
        """``call(admin)`` on an admin client of the controllers ``controller_ids`` (logged
        in as the cluster's admin user on a secured cluster)."""
        from clients.aio.controller_admin import ControllerAdmin
        controllers = ",".join(f"127.0.0.1:{self.spec.node(i).port}" for i in sorted(controller_ids))
        props = {"client.id": "ketch-up", "default.api.timeout.ms": 30_000,
                 **(self.security.client_props() if self.security is not None else {})}

        async def run() -> Any:
            async with ControllerAdmin(controllers, props) as admin:
                return await call(admin)
        return asyncio.run(run())

    def _voter_ids(self, controller_ids: Collection[int]) -> set[int] | None:
        """The current voters (None: no controller answered)."""
        async def voters(admin: Any) -> set[int]:
            return {v.replica_id for v in (await admin.describe_quorum()).voters}
        try:
            return self._quorum_call(controller_ids, voters)
        except Exception:
            return None

    def _wait_for_directory_id(self, node: NodeSpec, log_dir: str, timeout_s: float) -> None:
        """Until the started controller has written its meta.properties (its directory id,
        which AddRaftVoter names)."""
        path = os.path.join(log_dir, "meta.properties")
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(path):
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"controller {node.id} wrote no {path} in {timeout_s:g}s; see {node.log}")
            time.sleep(0.05)

    def _write_voters(self, spec: ClusterSpec) -> None:
        """Every node's voters keys set to the spec's controllers (hand edits elsewhere stay)."""
        voters = ",".join(f"{c.id}@127.0.0.1:{c.port}" for c in spec.controllers)
        raft_voters = ",".join(f"{c.id}@127.0.0.1:{c.raft_port}" for c in spec.controllers)
        for node in spec.nodes:
            if not os.path.exists(node.config):
                continue
            values = {"controller.quorum.voters": voters}
            if node.role == "controller":
                values["ketch.raft.voters"] = raft_voters
            with open(node.config) as f:
                text = f.read()
            _atomic_write(node.config, _set_properties(text, values))

    def stop(self, timeout_s: float = 30.0) -> None:
        """Brokers first (controlled shutdown needs the controllers), then controllers."""
        for node in self.spec.brokers:
            self.signal_node(node.id, signal.SIGTERM)
        for node in self.spec.brokers:
            self.stop_node(node.id, timeout_s)
        for node in self.spec.controllers:
            self.stop_node(node.id, timeout_s)
        self._release_lock()

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


PROMETHEUS_DIR = "prometheus"
SCRAPE_INTERVAL_S = 5


def broker_log_dirs(node: NodeSpec, count: int) -> list[str]:
    """A broker's log directories: its data dir, then ``data-2``... beside it."""
    return [node.data_dir] + [f"{node.data_dir}-{i}" for i in range(2, count + 1)]


def write_prometheus_files(spec: ClusterSpec) -> tuple[str, str]:
    """``prometheus/targets.json`` (a file_sd target list: every node's /metrics, labelled
    with its id and role) and a ready ``prometheus/prometheus.yml`` that scrapes it; both
    rewritten whenever the cluster's nodes change. Returns their paths."""
    out_dir = os.path.join(spec.dir, PROMETHEUS_DIR)
    os.makedirs(out_dir, exist_ok=True)
    targets = [{"targets": [f"127.0.0.1:{n.http_port}"],
                "labels": {"ketch_node_id": str(n.id), "ketch_role": n.role,
                           "ketch_cluster_id": spec.cluster_id}}
               for n in sorted(spec.nodes, key=lambda n: (n.role, n.id)) if n.http_port]
    targets_path = os.path.join(out_dir, "targets.json")
    _atomic_write(targets_path, json.dumps(targets, indent=2) + "\n")
    config_path = os.path.join(out_dir, "prometheus.yml")
    _atomic_write(config_path, (
        "# Written by `ketch up`: scrapes every node of this cluster through targets.json.\n"
        "# prometheus --config.file=prometheus.yml --storage.tsdb.path=./tsdb\n"
        "global:\n"
        f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
        f"  evaluation_interval: {SCRAPE_INTERVAL_S}s\n"
        "scrape_configs:\n"
        "  - job_name: ketch\n"
        "    file_sd_configs:\n"
        f"      - files: [{json.dumps(targets_path)}]\n"
        "        refresh_interval: 10s\n"
        # ketch up --secure: HTTPS against the cluster's own CA (/metrics needs no login).
        + (f"    scheme: https\n    tls_config:\n      ca_file: {json.dumps(os.path.join(spec.dir, 'tls', 'ca.pem'))}\n"
           if spec.client_properties else "")))
    return targets_path, config_path


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


def _metadata_broker_ids(host: str, port: int, security: "SecureSetup | None" = None) -> set[int] | None:
    """A blocking Metadata v1 round trip: the ids of the live brokers, or None. On a
    secured cluster over TLS, logged in with PLAIN as the bootstrap admin."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as raw:
            s = raw if security is None else security.client_ssl_context().wrap_socket(
                raw, server_hostname=host)
            conn = ClientConnection(client_id="ketch-up")

            def ask(api_key: int, version: int, body: object) -> object | None:
                _, data = conn.send(api_key, version, body)
                s.sendall(data)
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        return None
                    conn.receive_data(chunk)
                    event = conn.next_event()
                    if event is not NEED_DATA:
                        return event.body
            if security is not None:
                handshake = ask(ApiKey.SASL_HANDSHAKE, 1, messages.SaslHandshakeRequest(mechanism="PLAIN"))
                login = ask(ApiKey.SASL_AUTHENTICATE, 1, messages.SaslAuthenticateRequest(
                    auth_bytes=security.plain_token()))
                if handshake is None or login is None or getattr(login, "error_code", 1) != 0:
                    return None
            body = ask(ApiKey.METADATA, 1, messages.MetadataRequest(topics=[]))
            return None if body is None else {b.node_id for b in body.brokers}   # type: ignore[attr-defined]
    except OSError:
        return None


class SecureSetup:
    """``ketch up --secure``: a private CA and a broker certificate (``tls/``), brokers
    listening on SASL_SSL only, TLS between brokers too, and users: ``admin`` and
    ``ketch-broker`` are PLAIN users of every broker's JAAS table (the accounts that exist
    before the metadata log can hold SCRAM credentials; Kafka bootstraps these with
    ``kafka-storage format --add-scram``, which Ketch has not yet), and once the cluster is
    up ``admin`` also gets SCRAM-SHA-256 and SCRAM-SHA-512 credentials, which clients use.
    The client properties (``client.properties``, mode 0600) hold the admin password.

    The controllers' listener is SASL_SSL too (brokers log in as ``ketch-broker`` with
    PLAIN), and every node's HTTP admin API is HTTPS with Basic logins
    (clients/http_api/auth.py). Every node runs Kafka's StandardAuthorizer with ``admin``
    and ``ketch-broker`` as its super users (Kafka's own advice for the inter-broker and
    controller principals), so any other user (``ketch user``) may do only what ACLs
    (``ketch acl``) give it, on the Kafka listeners and the HTTP API alike."""

    CLIENT_PROPERTIES = "client.properties"
    ADMIN = "admin"
    BROKER_USER = "ketch-broker"

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.tls = os.path.join(directory, "tls")
        with open(os.path.join(directory, "secure.json")) as f:
            self._secrets = json.load(f)

    @classmethod
    def create(cls, directory: str) -> None:
        from clients.security.certs import LocalCA
        ca = LocalCA(os.path.join(directory, "tls"))
        ca.issue("broker", "localhost", organization="Ketch local cluster")
        ca.issue("client", "ketch-client", organization="Ketch local cluster")
        secrets_path = os.path.join(directory, "secure.json")
        with open(os.open(secrets_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump({"admin_password": secrets.token_urlsafe(18),
                       "broker_password": secrets.token_urlsafe(18)}, f)
        setup = cls(directory)
        with open(os.open(os.path.join(directory, cls.CLIENT_PROPERTIES),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(format_properties(setup.client_props()))

    @property
    def ca_path(self) -> str:
        return os.path.join(self.tls, "ca.pem")

    def client_props(self) -> dict[str, str]:
        """What a client sets (librdkafka's and Kafka's names where they differ: both)."""
        password = self._secrets["admin_password"]
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": self.ADMIN, "sasl.password": password,
                "ssl.ca.location": self.ca_path}

    def java_client_props(self) -> dict[str, str]:
        password = self._secrets["admin_password"]
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                    f'required username="{self.ADMIN}" password="{password}";',
                "ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_path}

    def _jaas(self) -> str:
        """The PLAIN table every node shares, logging in as the broker user itself."""
        broker_pw, admin_pw = self._secrets["broker_password"], self._secrets["admin_password"]
        return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{self.BROKER_USER}" password="{broker_pw}" '
                f'user_{self.BROKER_USER}="{broker_pw}" user_{self.ADMIN}="{admin_pw}";')

    def _common_props(self) -> dict[str, str]:
        """What every node has: the controllers' listener SASL_SSL (brokers log in there
        with PLAIN as the broker user), TLS from the local CA, and an HTTP admin API over
        TLS that takes Basic logins (status routes and probes stay open), and the
        authorizer on, the admin and broker users its super users."""
        return {"controller.listener.names": "CONTROLLER",
                "authorizer.class.name": STANDARD_AUTHORIZER_CLASS,
                "super.users": f"User:{self.ADMIN};User:{self.BROKER_USER}",
                "sasl.mechanism.controller.protocol": "PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
                "listener.name.controller.plain.sasl.jaas.config": self._jaas(),
                "ssl.keystore.location": os.path.join(self.tls, "broker.pem"),
                "ssl.truststore.location": self.ca_path,
                "ketch.http.ssl.enabled": "true", "ketch.http.authentication": "basic"}

    def controller_props(self) -> dict[str, str]:
        return {**self._common_props(), "listener.security.protocol.map": "CONTROLLER:SASL_SSL"}

    def broker_props(self, port: int) -> dict[str, str]:
        return {**self._common_props(),
                "listeners": f"SASL_SSL://127.0.0.1:{port}",
                "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": self._jaas()}

    def client_ssl_context(self):
        from clients.security.tls import client_ssl_context
        return client_ssl_context({"ssl.ca.location": self.ca_path}.get)

    def plain_token(self) -> bytes:
        return b"\0" + self.ADMIN.encode() + b"\0" + self._secrets["admin_password"].encode()

    def ensure_admin_user(self, bootstrap_servers: str) -> None:
        """Give ``admin`` its SCRAM credentials (logged in with PLAIN), once."""
        from clients.admin import Admin, UserScramCredentialUpsertion
        password = self._secrets["admin_password"]
        with Admin({"bootstrap.servers": bootstrap_servers, "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "PLAIN", "sasl.username": self.ADMIN, "sasl.password": password,
                    "ssl.ca.location": self.ca_path, "default.api.timeout.ms": 30_000}) as admin:
            if self.ADMIN in admin.describe_user_scram_credentials():
                return
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(self.ADMIN, m, password, 8192)
                for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
            deadline = time.monotonic() + 30
            while self.ADMIN not in admin.describe_user_scram_credentials():
                if time.monotonic() > deadline:
                    raise TimeoutError("the admin user's SCRAM credentials did not reach the brokers")
                time.sleep(0.1)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _atomic_write(path: str, text: str) -> None:
    """A crash leaves the old file or the new one, never half of either."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _set_properties(text: str, values: dict[str, str]) -> str:
    """``text`` with each key of ``values`` set, comments and other lines untouched: a
    key's single-line entries are rewritten in place, a key not there is appended."""
    lines = text.splitlines()
    placed: set[str] = set()
    continued = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        starts_entry = not continued and stripped and stripped[0] not in "#!"
        continued = stripped.endswith("\\") and not stripped.endswith("\\\\")
        if not starts_entry or continued:
            continue
        key = next(iter(parse_properties(stripped)), None)
        if key in values:
            lines[i] = f"{key}={values[key]}"
            placed.add(key)
    lines += [f"{k}={v}" for k, v in values.items() if k not in placed]
    out = "\n".join(lines) + "\n"
    assert all(parse_properties(out).get(k) == v for k, v in values.items()), values
    return out
