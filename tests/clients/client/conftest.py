"""One real 3-controller / 3-broker cluster per test module (stopped by pid at teardown)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ketch_client_helpers import STOP_TIMEOUT_S, start_cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, name="ketch-client",
                      broker_props={"auto.create.topics.enable": "false"})
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)
