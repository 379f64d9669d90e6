"""A real ``ketch up`` cluster (3 controllers, 3 brokers) for the interop tests.

Fast failure-detection settings keep the suite short; every process is stopped by pid at
teardown (LocalCluster.stop escalates to SIGKILL)."""
from __future__ import annotations

import pytest

from clients.launcher import LocalCluster

FAST_BROKER = {
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "num.partitions": "3",
}
FAST_CONTROLLER = {
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "300",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(str(tmp_path_factory.mktemp("ketch")), controllers=3, brokers=3,
                     broker_props=FAST_BROKER, controller_props=FAST_CONTROLLER)
    try:
        c.start(timeout_s=90)
        yield c
    finally:
        c.stop(timeout_s=20)
