"""clients.process_exit: a process that ends with ``os._exit`` still hands over what it
wrote (buffered stdout without a newline, a log record in a buffered handler) and its exit
code; an exception out of the main function never reaches it."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = """
import logging, logging.handlers, sys
from clients.process_exit import exit_after_clean_shutdown
target = logging.StreamHandler(sys.stderr)
# Holds records until it is flushed or closed: only logging.shutdown() writes this one.
logging.getLogger().addHandler(logging.handlers.MemoryHandler(100, target=target))
logging.getLogger().warning("logged before the exit")
sys.stdout.write("no newline, still buffered")
exit_after_clean_shutdown(3)
"""


def test_buffered_output_and_the_exit_code_survive_the_fast_exit() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}    # stdout buffered
    proc = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**env, "PYTHONPATH": ROOT})
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "no newline, still buffered"
    assert "logged before the exit" in proc.stderr
