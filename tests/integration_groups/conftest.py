"""A real 3-controller / 3-broker cluster per test module, tuned for group tests:
no initial rebalance delay, 1 s minimum session timeout (so a SIGKILLed consumer is
detected in seconds), 6 ``__consumer_offsets`` partitions. Every process a test starts
(nodes and consumers) is killed by pid at teardown."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from groups_helpers import STOP_TIMEOUT_S, ConsumerProcess, start_cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


@pytest.fixture
def consumers(tmp_path):
    """``spawn(client, group, topic, client_id, **options)`` -> ConsumerProcess; whatever is
    still running at the end of the test is SIGKILLed by pid."""
    started: list[ConsumerProcess] = []

    def spawn(cluster, client: str, group: str, topic: str, client_id: str, **options) -> ConsumerProcess:
        c = ConsumerProcess(str(tmp_path), client, cluster.spec.bootstrap_servers, group, topic,
                            client_id, **options)
        started.append(c)
        return c
    try:
        yield spawn
    finally:
        for c in started:
            c.reap()
