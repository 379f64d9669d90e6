"""``ketch up`` as a user runs it: a process that starts 3 controllers and 3 brokers,
writes DIR/cluster.json, prints the bootstrap servers, stops every child on SIGTERM, and
on a second run over the same DIR brings back the same cluster with its data."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from integration_helpers import FAST_BROKER, FAST_CONTROLLER, wait_until

pytestmark = [pytest.mark.process, pytest.mark.interop]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class KetchUp:
    def __init__(self, directory: str) -> None:
        args = [sys.executable, "-m", "clients.cli", "up", "--dir", directory, "--timeout", "90"]
        args += [a for k, v in FAST_BROKER.items() for a in ("--broker-prop", f"{k}={v}")]
        args += [a for k, v in FAST_CONTROLLER.items() for a in ("--controller-prop", f"{k}={v}")]
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.dir = directory
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, cwd=ROOT, start_new_session=True)
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


def test_ketch_up_runs_stops_and_restarts_a_cluster_with_its_data(tmp_path) -> None:
    directory = str(tmp_path / "cluster")
    up = KetchUp(directory)
    try:
        bootstrap = up.bootstrap()
        spec = up.spec()
        assert spec["bootstrap_servers"] == bootstrap
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
    finally:
        code = up.stop()
    assert code == 0, "\n".join(up.lines)
    assert any("stopped" in line for line in up.lines)
    for node in spec["nodes"]:
        assert not _runs_config(node["pid"], node["config"]), f"node {node['id']} outlived ketch up"

    again = KetchUp(directory)
    try:
        assert again.bootstrap() == bootstrap
        spec2 = again.spec()
        assert spec2["cluster_id"] == spec["cluster_id"]
        out = _kcat("-C", "-b", bootstrap, "-t", "kept", "-p", "0", "-o", "beginning", "-e", "-q",
                    "-f", "%o %k %s\n")
        assert out.splitlines() == [f"{i} k{i} v{i}" for i in range(10)]
    finally:
        assert again.stop() == 0, "\n".join(again.lines)
