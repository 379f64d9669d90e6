"""A real ``ketch up`` cluster (3 controllers, 3 brokers) for the interop tests.

Fast failure-detection settings keep the suite short; every process is stopped by pid at
teardown (LocalCluster.stop escalates to SIGKILL)."""
from __future__ import annotations

import shutil

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
# Teardown escalates to SIGKILL after this; a clean stop takes well under a second, and
# test_faults checks clean exits on its own, so the fixture need not wait long.
STOP_TIMEOUT_S = 10


def start_cluster(tmp_path_factory: pytest.TempPathFactory, name: str = "ketch",
                  broker_props: dict[str, str] | None = None,
                  controller_props: dict[str, str] | None = None,
                  controllers: int = 3, brokers: int = 3, attempts: int = 3) -> LocalCluster:
    """A started cluster, formatted in a fresh directory.

    LocalCluster picks free ports before it starts the nodes, so a port can be taken in
    between (by another process, or by an outgoing connection of a node already running,
    since the kernel hands both out from the same ephemeral range). That start is retried
    on new ports; anything else fails at once."""
    for attempt in range(attempts):
        c = LocalCluster(str(tmp_path_factory.mktemp(name)), controllers=controllers, brokers=brokers,
                         broker_props={**FAST_BROKER, **(broker_props or {})},
                         controller_props={**FAST_CONTROLLER, **(controller_props or {})})
        try:
            c.start(timeout_s=90)
            return c
        except RuntimeError as e:
            c.stop(timeout_s=STOP_TIMEOUT_S)
            if "address already in use" not in str(e) or attempt == attempts - 1:
                raise
            shutil.rmtree(c.dir, ignore_errors=True)
        except BaseException:
            c.stop(timeout_s=STOP_TIMEOUT_S)
            raise
    raise AssertionError("not reached")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory)
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)
