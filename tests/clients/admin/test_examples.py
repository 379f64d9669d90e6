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


def test_retry_topics_example_leaves_its_rejected_payments_in_the_dead_letter_topic(cluster) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "retry_topics.py"),
                          cluster.spec.bootstrap_servers], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    # amounts i * 37 % 1000 for i < 30: those above 900 are rejected for good.
    rejected = sum(1 for i in range(30) if i * 37 % 1000 > 900)
    assert out.stdout.count("paid ") == 30 - rejected
    assert f"'dead': {rejected}" in out.stdout and "from payments-" in out.stdout
    assert ".retry.1)" in out.stdout            # the flaky ones were paid from the retry topic
