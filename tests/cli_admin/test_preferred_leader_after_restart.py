"""Issue 12's last trip-up: after a broker restarts, its partitions' leadership comes back to
it as soon as it is in sync again, not at the periodic rebalance.

The periodic scan is set to an hour (``leader.imbalance.check.interval.seconds``), so a
leader moving back during the test can only come from the controller's follow-up of the
ISR change (quorum/controller/reassignment.py, ``follow_up_changes``).
"""
from __future__ import annotations

import pytest

from clients.admin import NewTopic
from tests.integration.integration_helpers import STOP_TIMEOUT_S, admin_for, start_cluster, wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "preferred-restart",
                      controller_props={"leader.imbalance.check.interval.seconds": "3600"})
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def leaders(cluster, topic: str) -> dict[int, int]:
    (d,) = admin_for(cluster).describe_topics([topic]).values()
    return {p.partition: p.leader for p in d.partitions}


def test_a_restarted_broker_leads_its_preferred_partitions_again_once_in_sync(cluster) -> None:
    assignment = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3, 2]}
    admin_for(cluster).create_topics([NewTopic("back", replica_assignments=assignment)])
    preferred = {p: r[0] for p, r in assignment.items()}
    wait_until(lambda: leaders(cluster, "back") == preferred, 30, "preferred leaders at first")
    cluster.stop_node(1)                        # controlled shutdown moves its leaderships
    try:
        wait_until(lambda: 1 not in leaders(cluster, "back").values(), 30,
                   "leadership off broker 1")
    finally:
        cluster.start_node(1)
    wait_until(lambda: leaders(cluster, "back") == preferred, 60,
               "broker 1 leading partitions 0 and 3 again (the periodic scan is an hour away)")
