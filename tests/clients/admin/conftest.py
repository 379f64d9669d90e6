"""One real 3-controller / 3-broker cluster per test module for the admin client tests,
tuned so that consumer groups settle at once (no initial rebalance delay, a 1 s minimum
session timeout); every process is stopped by pid at teardown."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "integration"))

from integration_helpers import STOP_TIMEOUT_S, start_cluster  # noqa: E402

ADMIN_BROKER = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "6",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, name="ketch-admin", broker_props=ADMIN_BROKER)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)
