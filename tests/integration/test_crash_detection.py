"""Fast crash detection (issue 17): a broker process that dies is fenced as soon as its
heartbeat connection closes, not a session timeout later; a paused one (SIGSTOP: its
socket stays open) keeps its registration until its session runs out.

The session here is 60 s, so a fencing seen within the wait below can only come from the
closed connection (``ketch.broker.disconnect.fence.ms``, 250 ms by default)."""
from __future__ import annotations

import signal

import pytest

from clients.protocol import ApiKey, messages
from integration_helpers import STOP_TIMEOUT_S, roundtrip, start_cluster, wait_until

pytestmark = [pytest.mark.process]

SESSION_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = start_cluster(tmp_path_factory, "ketch-crash", controllers=1,
                      controller_props={"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    try:
        yield c
    finally:
        c.stop(timeout_s=STOP_TIMEOUT_S)


def unfenced(cluster) -> set[int]:
    """The registered, unfenced brokers, as the controller's image has them."""
    port = cluster.spec.controllers[0].port
    resp = roundtrip(port, ApiKey.DESCRIBE_CLUSTER, 0, messages.DescribeClusterRequest())
    return {b.broker_id for b in resp.brokers}


def test_a_killed_broker_is_fenced_long_before_its_session_ends_a_paused_one_is_not(cluster):
    ids = [b.id for b in cluster.spec.brokers]
    wait_until(lambda: unfenced(cluster) == set(ids), 60, "every broker unfenced")
    killed, paused = ids[0], ids[1]
    cluster.signal_node(paused, signal.SIGSTOP)
    try:
        cluster.kill_node(killed)
        # A quarter of the session: only the closed connection can fence this soon.
        wait_until(lambda: killed not in unfenced(cluster), SESSION_TIMEOUT_MS / 4000,
                   f"broker {killed} fenced after its process died")
        # Paused at least as long as the killed one took to be fenced, and its heartbeats
        # stopped just the same: its open socket keeps it registered.
        assert paused in unfenced(cluster)
    finally:
        cluster.signal_node(paused, signal.SIGCONT)
    cluster.start_node(killed)
    wait_until(lambda: unfenced(cluster) == set(ids), 60, "the restarted broker unfenced")
