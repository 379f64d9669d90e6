"""``ketch up`` as a user runs it: a process that starts 3 controllers and 3 brokers,
writes DIR/cluster.json, prints the bootstrap servers, stops every child on SIGTERM, and
on a second run over the same DIR brings back the same cluster with its data.

One cluster directory, run twice. While the first run is up, a second ``ketch up`` on the
directory is refused naming the first one's pid; while it is stopped, another controller
count is refused; a hand edit in a broker's server.properties survives into the second
run, which also reports what its new ``--broker-prop`` changed; with ``--restart-dead`` a
broker killed with SIGKILL is restarted; when ``ketch up`` itself is SIGKILLed, its nodes
keep the directory locked and a new ``ketch up`` names their pids."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient

from clients.data_dir_lock import holder
from integration_helpers import FAST_BROKER, FAST_CONTROLLER, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
KETCH = [sys.executable, "-m", "clients.cli"]


class KetchUp:
    def __init__(self, directory: str, *extra: str) -> None:
        args = [*KETCH, "up", "--dir", directory, "--timeout", "90", *extra]
        args += [a for k, v in FAST_BROKER.items() for a in ("--broker-prop", f"{k}={v}")]
        args += [a for k, v in FAST_CONTROLLER.items() for a in ("--controller-prop", f"{k}={v}")]
        self.dir = directory
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=ENV, cwd=ROOT, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.decode(errors="replace").rstrip("\n"))

    def bootstrap(self) -> str:
        def probe():
            if self.proc.poll() is not None:
                raise AssertionError(f"ketch up exited with {self.proc.returncode}:\n" + "\n".join(self.lines))
            return next((x.split("=", 1)[1] for x in self.lines if x.startswith("bootstrap.servers=")), None)
        return wait_until(probe, 120, "ketch up to print bootstrap.servers")

    def wait_for_line(self, predicate, what: str) -> str:
        def probe():
            if self.proc.poll() is not None:
                raise AssertionError(f"ketch up exited with {self.proc.returncode}:\n" + "\n".join(self.lines))
            return next((x for x in list(self.lines) if predicate(x)), None)
        return wait_until(probe, 60, what)

    def spec(self) -> dict:
        with open(os.path.join(self.dir, "cluster.json")) as f:
            return json.load(f)

    def stop(self, timeout_s: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        finally:
            self.kill_leftovers()

    def kill_leftovers(self) -> None:
        """Whatever is still running of this run, by pid (only ours: matched by config path)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError, ValueError):
            for node in self.spec()["nodes"]:
                if node.get("pid") and _runs_config(node["pid"], node["config"]):
                    os.kill(node["pid"], signal.SIGKILL)


def _runs_config(pid: int, config: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return config.encode() in f.read()
    except OSError:
        return False


def _kcat(*args: str, stdin: bytes | None = None) -> str:
    result = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def _ketch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*KETCH, *args], capture_output=True, text=True, timeout=120,
                          env=ENV, cwd=ROOT, stdin=subprocess.DEVNULL)


def _files(directory: str) -> dict[str, bytes]:
    """cluster.json and every server.properties, to show a refused run changed nothing."""
    out = {}
    for base, _, names in os.walk(directory):
        for name in names:
            if name in ("cluster.json", "server.properties"):
                with open(os.path.join(base, name), "rb") as f:
                    out[os.path.join(base, name)] = f.read()
    return out


def _racks(bootstrap: str) -> dict[int, str | None]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cluster = admin.describe_cluster(request_timeout=20).result(timeout=30)
    return {node.id: node.rack for node in cluster.nodes}


def test_ketch_version_comes_from_the_installed_package() -> None:
    from importlib.metadata import version
    result = _ketch("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"ketch {version('ketch')}"
    helped = _ketch("up", "--help")
    assert "(default: ./ketch-data)" in " ".join(helped.stdout.split()).replace("ketch- data", "ketch-data")
    assert "examples:" in helped.stdout and "--restart-dead" in helped.stdout


def test_ketch_up_runs_stops_and_restarts_a_cluster_with_its_data(tmp_path) -> None:
    directory = str(tmp_path / "cluster")
    up = KetchUp(directory)
    try:
        bootstrap = up.bootstrap()
        spec = up.spec()
        assert spec["bootstrap_servers"] == bootstrap
        assert spec["launcher_pid"] == up.proc.pid
        roles = sorted((n["role"], n["id"]) for n in spec["nodes"])
        assert roles == [("broker", 1), ("broker", 2), ("broker", 3),
                         ("controller", 1001), ("controller", 1002), ("controller", 1003)]
        for node in spec["nodes"]:
            assert _runs_config(node["pid"], node["config"]), node
            assert os.path.isdir(node["data_dir"]) and os.path.isfile(node["log"])
        assert bootstrap == ",".join(f"127.0.0.1:{n['port']}" for n in sorted(
            (n for n in spec["nodes"] if n["role"] == "broker"), key=lambda n: n["id"]))
        listing = json.loads(_kcat("-L", "-J", "-b", bootstrap))
        assert sorted(b["id"] for b in listing["brokers"]) == [1, 2, 3]
        _kcat("-P", "-b", bootstrap, "-t", "kept", "-p", "0", "-K:", "-X", "acks=all",
              stdin=b"".join(b"k%d:v%d\n" % (i, i) for i in range(10)))

        # A second ketch up on the same directory: refused, naming the running one's pid,
        # with nothing written and every node still running.
        before = _files(directory)
        second = _ketch("up", "--dir", directory, "--timeout", "30")
        assert second.returncode == 1, second.stdout + second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert f"ketch up pid {up.proc.pid}" in second.stderr and directory in second.stderr
        assert _files(directory) == before
        for node in spec["nodes"]:
            assert _runs_config(node["pid"], node["config"]), node
    finally:
        code = up.stop()
    assert code == 0, "\n".join(up.lines)
    assert any("stopped" in line for line in up.lines)
    for node in spec["nodes"]:
        assert not _runs_config(node["pid"], node["config"]), f"node {node['id']} outlived ketch up"

    # Another controller count for this directory: refused, nothing written.
    before = _files(directory)
    resized = _ketch("up", "--dir", directory, "--controllers", "1")
    assert resized.returncode == 2 and "3 controllers" in resized.stderr, resized.stderr
    assert len(resized.stderr.strip().splitlines()) == 1, resized.stderr
    assert _files(directory) == before

    # The operator edits broker 1's server.properties by hand.
    broker1 = next(n for n in spec["nodes"] if n["id"] == 1)
    with open(broker1["config"], "a") as f:
        f.write("# set by hand\nbroker.rack=rack-by-hand\n")

    again = KetchUp(directory, "--restart-dead", "--broker-prop", "message.max.bytes=2000000")
    try:
        assert again.bootstrap() == bootstrap
        spec2 = again.spec()
        assert spec2["cluster_id"] == spec["cluster_id"]
        assert spec2["launcher_pid"] == again.proc.pid
        assert "ketch: brokers 1,2,3: server.properties now has message.max.bytes=2000000 (not set before)" \
            in again.lines, "\n".join(again.lines)
        with open(broker1["config"]) as f:
            text = f.read()
        assert "# set by hand\nbroker.rack=rack-by-hand\n" in text and "message.max.bytes=2000000" in text
        assert wait_until(lambda: _racks(bootstrap).get(1) == "rack-by-hand", 30,
                          "broker 1 to report the rack set by hand")
        out = _kcat("-C", "-b", bootstrap, "-t", "kept", "-p", "0", "-o", "beginning", "-e", "-q",
                    "-f", "%o %k %s\n")
        assert out.splitlines() == [f"{i} k{i} v{i}" for i in range(10)]

        # --restart-dead: broker 2 killed outright comes back (new pid, same config).
        broker2 = next(n for n in spec2["nodes"] if n["id"] == 2)
        assert _runs_config(broker2["pid"], broker2["config"])
        os.kill(broker2["pid"], signal.SIGKILL)
        said = again.wait_for_line(lambda x: x.startswith("ketch: node 2 exited with -9"),
                                   "ketch up to report broker 2's death")
        assert "restarting broker 2 in 1s" in said, said
        restarted = again.wait_for_line(lambda x: x.startswith("ketch: restarted broker 2 (pid "),
                                        "ketch up to restart broker 2")
        pid = int(restarted.rsplit("pid ", 1)[1].rstrip(")"))
        assert pid != broker2["pid"] and _runs_config(pid, broker2["config"])
        assert next(n for n in again.spec()["nodes"] if n["id"] == 2)["pid"] == pid
        # Back: the new process holds broker 2's data directory and answers on its port.
        wait_until(lambda: holder(broker2["data_dir"]) == pid, 60, "broker 2 to lock its data")
        wait_until(lambda: sorted(b["id"] for b in json.loads(_kcat(
            "-L", "-J", "-m", "5", "-b", f"127.0.0.1:{broker2['port']}"))["brokers"]) == [1, 2, 3],
            60, "broker 2 back in the cluster")

        # ketch up killed outright: its nodes keep their directories locked, so the next
        # ketch up names them instead of starting a second copy of each.
        nodes = again.spec()["nodes"]
        again.proc.kill()
        again.proc.wait()
        before = _files(directory)
        orphaned = _ketch("up", "--dir", directory, "--timeout", "30")
        assert orphaned.returncode == 1, orphaned.stdout + orphaned.stderr
        assert len(orphaned.stderr.strip().splitlines()) == 1, orphaned.stderr
        for node in nodes:
            assert f"{node['role']} {node['id']} (pid {node['pid']})" in orphaned.stderr
        assert _files(directory) == before
    finally:
        again.kill_leftovers()
        for node in again.spec()["nodes"]:
            deadline = time.monotonic() + 30
            while _runs_config(node["pid"], node["config"]) and time.monotonic() < deadline:
                time.sleep(0.1)      # waiting for SIGKILL to land, not timing anything


def test_restart_backoff_doubles_while_a_node_keeps_dying_and_starts_over_once_stable() -> None:
    from clients.cli.up import RestartBackoff
    backoff = RestartBackoff(first_ms=1000, max_ms=8000, stable_ms=60_000)
    now = 0
    delays = []
    for _ in range(5):                        # dies again right after each restart
        delays.append(backoff.on_exit(2, now))
        assert backoff.due(now + delays[-1] - 1) == []
        now += delays[-1]
        assert backoff.due(now) == [2] and backoff.due(now) == []
        backoff.on_start(2, now)
        now += 10
    assert delays == [1000, 2000, 4000, 8000, 8000]
    now += 60_000                              # stayed up a minute: starts over
    assert backoff.on_exit(2, now) == 1000
    assert backoff.on_exit(3, now) == 1000     # each node has its own count


def test_a_later_launcher_keeps_edits_refuses_size_changes_and_adds_brokers(tmp_path) -> None:
    """LocalCluster on an existing directory, no process started: what ``ketch up`` decides
    before it starts anything."""
    from clients.cli.launcher import ClusterSizeError, LocalCluster
    from clients.properties import load_properties
    directory = str(tmp_path / "c")
    first = LocalCluster(directory, controllers=1, brokers=1, broker_props={"num.partitions": "3"})
    first.stop()
    broker1 = first.spec.brokers[0]
    with open(broker1.config, "a") as f:
        f.write("# by hand\nlog.retention.hours=5\nbroker.rack=r1\n")
    edited = _files(directory)
    for sizes in ((3, None), (None, 0)):
        with pytest.raises(ClusterSizeError):
            LocalCluster(directory, *sizes)
        assert _files(directory) == edited
    grown = LocalCluster(directory, brokers=3, broker_props={"num.partitions": "6"})
    grown.stop()
    assert grown.added_brokers == [2, 3] and not grown.formatted
    assert grown.config_changes == {("broker", "num.partitions", "3", "6"): [1]}
    with open(broker1.config) as f:
        text = f.read()
    assert "# by hand\nlog.retention.hours=5\nbroker.rack=r1\n" in text
    ports = {n.port for n in grown.spec.nodes} | {n.http_port for n in grown.spec.nodes if n.http_port}
    # Every node's listener and HTTP port, all distinct (the controller has an HTTP API too).
    assert len(ports) == 2 * len(grown.spec.nodes)
    # Prometheus's file_sd targets follow the nodes: the added brokers are scraped too.
    with open(os.path.join(directory, "prometheus", "targets.json")) as f:
        targets = json.load(f)
    assert sorted((t["labels"]["ketch_node_id"], t["targets"]) for t in targets) == sorted(
        (str(n.id), [f"127.0.0.1:{n.http_port}"]) for n in grown.spec.nodes)
    for node in grown.spec.brokers[1:]:
        props = load_properties(node.config)
        assert props["node.id"] == str(node.id) and props["log.dirs"] == node.data_dir
        assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{node.port}"
        assert props["log.retention.hours"] == "5" and props["num.partitions"] == "6"
        assert "broker.rack" not in props                    # one broker's own key
