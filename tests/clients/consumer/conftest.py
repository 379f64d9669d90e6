"""Ketch consumer tests: one real 3-controller / 3-broker cluster per module, tuned for
group tests (tests/integration_groups' settings: no initial rebalance delay, 1 s minimum
session timeout). Helpers for raw round trips and group views come from
tests/integration_groups/groups_helpers.py, so what the tests assert about the group does
not come from the client under test. Every process a test starts is killed by pid."""
from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "integration_groups"))

from groups_helpers import STOP_TIMEOUT_S, start_cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, name="ketch-consumer")
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def bootstrap(cluster) -> str:
    return cluster.spec.bootstrap_servers


@pytest.fixture
def members(tmp_path):
    """``spawn(...)`` -> KetchMember (or a ConsumerProcess of another library); whatever is
    still running at the end is SIGKILLed by pid."""
    from consumer_helpers import KetchMember
    started = []

    def spawn(*args, cls=KetchMember, **kwargs):
        p = cls(str(tmp_path), *args, **kwargs)
        started.append(p)
        return p
    yield spawn
    for p in started:
        p.reap()
