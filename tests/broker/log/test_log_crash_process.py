"""A real process appending in a loop is SIGKILLed at random moments (issue 3).

After each kill the parent opens the log (an unclean start) and checks that it is a
valid prefix of what the child appended: offsets contiguous from 0, every record's value
the one the child wrote at that offset, and every acknowledged append present (a killed
process loses nothing the kernel already has). Some rounds also damage the files the way
a power cut can, a torn tail or a flipped byte, and check recovery cuts exactly there.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _log_crash_child import CONFIG, MANAGER, expected_value
from _log_helpers import read_all

from broker.log import FileStorage, LogManager, PartitionLog

CHILD = Path(__file__).with_name("_log_crash_child.py")
REPO = Path(__file__).resolve().parents[3]


def run_child_until_killed(data_dir: str, acks_before_kill: int) -> tuple[int, int]:
    """Start the child, let it acknowledge `acks_before_kill` appends, SIGKILL it.

    Returns (log end offset it started from, end offset of the last acknowledged append).
    """
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, str(CHILD), data_dir], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(REPO))
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == b"READY", (ready, proc.stderr.read() if proc.stderr else b"")
        started_at = int(ready[1])
        acked_end = started_at
        for _ in range(acks_before_kill):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else b""
            acked_end = int(line.split()[1]) + 1
        os.kill(proc.pid, signal.SIGKILL)
        # Acknowledgements already written before the kill landed count too.
        for line in proc.stdout.read().splitlines():
            parts = line.split()
            if len(parts) == 2:
                acked_end = int(parts[1]) + 1
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    return started_at, acked_end


def open_unclean(data_dir: str):
    storage = FileStorage(open_files_max=16)
    manager, reports = LogManager.open(storage, data_dir, now_ms=0, default_config=CONFIG,
                                       manager_config=MANAGER)
    log = manager.get_log("crash", 0)
    assert log is not None
    return storage, log, reports[("crash", 0)]


def assert_valid_prefix(log: PartitionLog) -> None:
    offset = 0
    for batch in read_all(log):
        for record in batch.records:
            assert record.offset == offset
            assert record.value == expected_value(offset), f"wrong bytes at offset {offset}"
            offset += 1
    assert offset == log.log_end_offset


@pytest.mark.process
def test_sigkilled_appender_restarts_as_a_valid_prefix(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    data_dir = str(tmp_path / "data")
    must_have = 0  # every offset below this was acknowledged and must survive
    for round_number in range(6):
        started_at, acked_end = run_child_until_killed(data_dir, rng.randint(3, 120))
        assert started_at >= must_have, f"seed={seed}: lost acknowledged records"
        damage = ("none", "torn", "flip")[round_number % 3]
        if damage != "none":
            storage, log, _ = open_unclean(data_dir)
            segment = log.active_segment
            headers = segment.iter_headers()
            storage.close()
            last = headers[-1]
            if damage == "torn":
                cut = last.position + rng.randint(1, last.header.size_in_bytes - 1)
                os.truncate(segment.log_path, cut)
            else:
                spot = last.position + rng.randint(61, last.header.size_in_bytes - 1)
                with open(segment.log_path, "r+b") as f:
                    f.seek(spot)
                    byte = f.read(1)
                    f.seek(spot)
                    f.write(bytes([byte[0] ^ 0x10]))
            acked_end = last.header.base_offset  # we destroyed the last batch ourselves
        storage, log, report = open_unclean(data_dir)
        try:
            assert log.log_end_offset >= acked_end, f"seed={seed}: {report}"
            if damage != "none":
                assert log.log_end_offset == acked_end, f"seed={seed}: {report}"
                assert report.truncated_bytes > 0
            assert_valid_prefix(log)
            must_have = log.log_end_offset
        finally:
            storage.close()
