"""Fast crash detection (issue 17): a broker whose heartbeat connection closed is fenced
``broker_disconnect_fence_ms`` later unless it heartbeats again; a silent broker (paused,
partitioned: its socket stays open) only when its session times out."""
from __future__ import annotations

from quorum.controller.config import ControllerConfig
from tests.quorum.controller.harness import Harness


def _cluster(**config: int) -> Harness:
    h = Harness(ControllerConfig(broker_session_timeout_ms=9000, **config))
    h.start_brokers({1: None, 2: None})
    h.create_topic("t", partitions=1, replication_factor=2)
    return h


def _epoch(h: Harness, broker_id: int) -> int:
    return h.image.cluster.get(broker_id).broker_epoch


def test_a_closed_heartbeat_connection_fences_after_the_grace_and_moves_leadership() -> None:
    h = _cluster(broker_disconnect_fence_ms=250)
    leader = h.partition("t").leader
    other = 3 - leader
    h.controller.handle_broker_disconnected(leader, _epoch(h, leader), h.now_ms)
    result, wait_ms = h.poll()
    assert result.records == () and wait_ms == 250      # the poll is due at the grace's end
    h.advance(249)
    assert h.poll()[0].records == ()
    h.advance(1)
    h.poll()
    assert h.image.cluster.get(leader).fenced
    p = h.partition("t")
    assert (p.leader, p.isr) == (other, (other,))


def test_a_heartbeat_on_a_new_connection_within_the_grace_keeps_the_broker() -> None:
    h = _cluster(broker_disconnect_fence_ms=250)
    h.controller.handle_broker_disconnected(1, _epoch(h, 1), h.now_ms)
    h.advance(100)
    h.heartbeat(1)                      # a benign reconnect: the broker is alive
    h.advance(1000)
    h.heartbeat(2)
    assert h.poll()[0].records == ()
    assert not h.image.cluster.get(1).fenced


def test_a_silent_broker_is_fenced_only_by_its_session() -> None:
    # SIGSTOP: no heartbeats, but no closed connection either.
    h = _cluster(broker_disconnect_fence_ms=250)
    for _ in range(4):
        h.advance(2000)
        h.heartbeat(2)
        assert h.poll()[0].records == ()
    assert not h.image.cluster.get(1).fenced
    h.advance(1000)
    h.heartbeat(2)
    h.poll()
    assert h.image.cluster.get(1).fenced


def test_disabled_stale_epochs_and_standbys_do_not_fence_early() -> None:
    off = _cluster(broker_disconnect_fence_ms=-1)
    off.controller.handle_broker_disconnected(1, _epoch(off, 1), off.now_ms)
    off.advance(5000)
    off.heartbeat(2)
    assert off.poll()[0].records == ()
    # A close reported for an older incarnation says nothing about the current one.
    h = _cluster(broker_disconnect_fence_ms=250)
    h.controller.handle_broker_disconnected(1, _epoch(h, 1) - 1, h.now_ms)
    h.advance(1000)
    h.heartbeat(2)
    assert h.poll()[0].records == ()
    # A controller that is not active keeps no soft state to act on later.
    h.controller.deactivate()
    h.controller.handle_broker_disconnected(2, _epoch(h, 2), h.now_ms)
    h.controller.activate(h.now_ms)
    h.advance(1000)
    h.heartbeat(1)
    h.heartbeat(2)
    assert h.poll()[0].records == ()
