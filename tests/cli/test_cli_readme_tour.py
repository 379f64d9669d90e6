"""README's "Five minutes with the ketch CLI", run as written: the commands are read from
README.md (the ``tour-up`` and ``tour`` blocks), so the tour cannot drift from what is
tested. ``ketch up`` runs in a fresh directory (its default ``./ketch-data`` under it);
each tour line runs through bash there, with ``ketch`` on PATH meaning this checkout's
``python -m clients.cli``. The cluster is stopped at the end with Ctrl-C (SIGINT to the
``ketch up`` process we started), as the README says.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from tests.integration.integration_helpers import STOP_TIMEOUT_S, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI_TIMEOUT_S = 120


def readme_block(marker: str) -> list[str]:
    text = open(os.path.join(ROOT, "README.md")).read()
    m = re.search(rf"<!-- {marker} -->\n```sh\n(.*?)```", text, re.S)
    assert m, f"README.md has no {marker} block"
    return [line for line in m.group(1).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def tour_dir(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("tour")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "ketch"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m clients.cli "$@"\n')
    shim.chmod(0o755)
    home = work / "home"
    home.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "KETCH_BOOTSTRAP"},
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": ROOT}
    [up] = readme_block("tour-up")
    proc = subprocess.Popen(["bash", "-c", f"exec {up}"], cwd=home, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        lines: list[str] = []
        def up_line() -> bool:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "".join(lines)
            lines.append(line)
            return "is up" in line
        wait_until(up_line, 180, "ketch up reports the cluster up")
        yield home, env
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S * 3)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_readme_tour_end_to_end(tour_dir) -> None:
    home, env = tour_dir
    outputs = []
    for line in readme_block("tour"):
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=home, env=env,
                              capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
        outputs.append((line, proc.stdout))
    by_verb = {line.split("#")[0].strip(): out for line, out in outputs}
    consumed = by_verb["ketch consume orders --group billing --num 400"].splitlines()
    assert len(consumed) == 400 and set(consumed) <= {str(i) for i in range(1, 1001)}
    first_describe = next(out for line, out in outputs if line.startswith("ketch group describe billing "))
    assert "total lag 600" in first_describe
    [final] = json.loads(by_verb["ketch group describe billing --output json"])
    assert final["total_lag"] == 995 and final["state"] == "Empty"
    assert sum(p["log_end_offset"] for p in final["partitions"]) == 1000
    for p in final["partitions"]:
        assert p["lag"] == p["log_end_offset"] - p["committed_offset"]
    assert "leader" in by_verb["ketch quorum status"].lower()
