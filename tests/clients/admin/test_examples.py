"""examples/ run as a user would run them, against a real cluster."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.process]

ROOT = Path(__file__).resolve().parents[3]


def test_quickstart_runs_end_to_end(cluster) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py"),
                          cluster.spec.bootstrap_servers], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "acknowledged at partition" in out.stdout
    assert out.stdout.count("b'record ") == 8                 # every async record read back
    assert "retention.ms is now 3600000 (source DYNAMIC_TOPIC_CONFIG)" in out.stdout
