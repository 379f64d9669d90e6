"""A real ``ketch up`` cluster (3 controllers, 3 brokers) for the interop tests.

Fast failure-detection settings keep the suite short; every process is stopped by pid at
teardown (LocalCluster.stop escalates to SIGKILL). The settings and ``start_cluster`` live
in integration_helpers so that test modules can start clusters of their own."""
from __future__ import annotations

import pytest

from integration_helpers import FAST_BROKER, FAST_CONTROLLER, STOP_TIMEOUT_S, start_cluster

__all__ = ["FAST_BROKER", "FAST_CONTROLLER", "cluster"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)
