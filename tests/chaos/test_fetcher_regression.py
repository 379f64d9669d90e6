"""Regressions the chaos suite found in the broker, replayed deterministically with the
fault proxies."""
from __future__ import annotations

import pytest

from chaos.cluster import ChaosCluster, wait_until
from chaos.faults import Delay, inject
from chaos.workload import History, KetchProducer, log_end_on_disk
from clients.protocol import ApiKey

pytestmark = [pytest.mark.process]


def test_a_follower_that_learns_of_a_topic_before_its_leader_still_replicates(tmp_path) -> None:
    """The leader's metadata fetches from the controllers are slowed (its heartbeats are
    not, so it is not fenced), so the followers apply the new topic first and their first fetches get UNKNOWN_TOPIC_OR_PARTITION. The fetcher used
    to pause such a partition until the next metadata change for it, which never came:
    the followers never replicated it and left the ISR for good."""
    cluster = ChaosCluster(str(tmp_path / "c"), proxied_links=True)
    cluster.start()
    try:
        for controller in cluster.controller_ids:
            inject(cluster, Delay(1, controller, 1500, api_keys=(ApiKey.FETCH,)))
        cluster.create_topic("late", assignment={0: [1, 2, 3]}, wait_full_isr=False, wait_s=60)
        for controller in cluster.controller_ids:
            inject(cluster, Delay(1, controller, 0))
        with KetchProducer(cluster, History(), "late", acks=1, records_per_batch=10) as producer:
            acked = [a for a in producer.send(0, 50) if a.outcome == "acked"]
        assert len(acked) == 50
        # Both followers hold every record, and stay in the ISR past replica.lag.time.max.ms.
        wait_until(lambda: all(log_end_on_disk(cluster, b, "late", 0) == 50 for b in (2, 3)), 30,
                   "both followers to replicate the topic")
        state = cluster.partition("late", 0, 1)
        assert set(state.isr) == {1, 2, 3}, state
    finally:
        cluster.stop()
