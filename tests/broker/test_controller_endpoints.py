"""The broker's knowledge of the controllers (broker/controller_endpoints.py): which
endpoints, which to try next, when to ask the quorum again; and the broker configuration's
``controller.quorum.bootstrap.servers``."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.config import ConfigError, from_properties
from broker.controller_endpoints import (
    BOOTSTRAP_ID_BASE, ControllerEndpoints, parse_bootstrap_servers, voter_endpoints,
)

A, B, C, D, E = (("127.0.0.1", p) for p in (9001, 9002, 9003, 9004, 9005))


def node(node_id, *listeners):
    return SimpleNamespace(node_id=node_id, listeners=[
        SimpleNamespace(name=n, host=h, port=p) for n, h, p in listeners])


def test_static_voters_are_tried_by_id_with_the_active_one_first() -> None:
    ep = ControllerEndpoints(voters={3: C, 1: A, 2: B})
    assert ep.order() == [1, 2, 3]
    ep.accepted(2)
    assert ep.order() == [2, 1, 3]
    assert ep.next_to_try({2}) == 1
    assert ep.next_to_try({1, 2, 3}) is None
    ep.unreachable(2)
    assert ep.active_id is None and ep.order() == [1, 2, 3]


def test_bootstrap_servers_get_kafkas_negative_ids_in_the_order_given() -> None:
    ep = ControllerEndpoints(bootstrap_servers=[C, A])
    assert ep.order() == [BOOTSTRAP_ID_BASE, BOOTSTRAP_ID_BASE - 1] == [-2, -3]
    assert ep.addresses() == [C, A]


def test_static_voters_win_over_bootstrap_servers() -> None:
    ep = ControllerEndpoints(voters={1: A}, bootstrap_servers=[B])
    assert ep.voters() == {1: A}


def test_learned_voters_replace_the_configured_ones_which_stay_as_the_last_resort() -> None:
    ep = ControllerEndpoints(voters={1: A, 2: B, 3: C})
    assert ep.learn({1: A, 2: B, 3: C, 4: D, 5: E}, now_ms=0)
    assert ep.order() == [1, 2, 3, 4, 5]
    # 1 and 2 removed: not tried while a learned voter remains; their configured
    # addresses come last (every voter learned of may be gone).
    assert ep.learn({3: C, 4: D, 5: E}, now_ms=10)
    assert ep.order() == [3, 4, 5, 1, 2]
    assert ep.address(4) == D and ep.voters() == {3: C, 4: D, 5: E}
    # An address a learned voter has is not tried twice under its configured id.
    ep2 = ControllerEndpoints(bootstrap_servers=[A, D])
    ep2.learn({1: A, 7: E}, now_ms=0)
    assert ep2.order() == [1, 7, -3]


def test_learning_the_same_voters_changes_nothing_and_bumps_no_generation() -> None:
    ep = ControllerEndpoints(voters={1: A})
    assert ep.learn({1: A, 2: B}, 0) and ep.generation == 1
    assert not ep.learn({2: B, 1: A}, 5) and ep.generation == 1
    assert not ep.learn({}, 6) and ep.voters() == {1: A, 2: B}   # an empty answer teaches nothing
    assert ep.learn({1: ("127.0.0.1", 9999), 2: B}, 7) and ep.generation == 2   # moved


def test_an_active_controller_that_left_the_voters_is_forgotten() -> None:
    ep = ControllerEndpoints(voters={1: A, 2: B, 3: C})
    ep.accepted(1)
    ep.learn({2: B, 3: C}, 0)
    assert ep.active_id is None
    # A bootstrap server that accepted writes is known by its voter id once learned.
    boot = ControllerEndpoints(bootstrap_servers=[B])
    boot.accepted(-2)
    boot.learn({1: A, 2: B}, 0)
    assert boot.active_id == 2 and boot.order() == [2, 1]


def test_a_hint_naming_a_known_controller_makes_it_active() -> None:
    ep = ControllerEndpoints(voters={1: A, 2: B, 3: C})
    ep.learn({1: A, 2: B, 3: C}, now_ms=0)
    ep.leader_hint(3)
    assert ep.active_id == 3 and ep.next_to_try({1}) == 3
    assert not ep.refresh_due(100)
    ep.leader_hint(-1)                  # an election: nobody active, nothing new to learn
    assert ep.active_id is None and not ep.refresh_due(100)


def test_a_hint_naming_an_unknown_controller_makes_a_refresh_due_at_once() -> None:
    ep = ControllerEndpoints(voters={1: A, 2: B, 3: C})
    ep.learn({1: A, 2: B, 3: C}, now_ms=0)
    ep.leader_hint(4)                   # added since we last asked
    assert ep.active_id is None and ep.refresh_due(1) and ep.poll(1) == 0
    ep.learn({1: A, 2: B, 3: C, 4: D}, now_ms=2)
    ep.leader_hint(4)
    assert ep.active_id == 4 and ep.order()[0] == 4


def test_refresh_timing() -> None:
    ep = ControllerEndpoints(voters={1: A}, refresh_interval_ms=1000)
    assert ep.refresh_due(0) and ep.poll(0) == 0            # never asked
    ep.learn({1: A}, now_ms=100)
    assert not ep.refresh_due(600) and ep.poll(600) == 500
    assert ep.refresh_due(1100) and ep.poll(1100) == 0
    ep.round_failed()                   # every candidate failed: the voters may have moved
    assert ep.refresh_due(200)
    ep.refresh_failed(now_ms=300)       # nobody answered: back off for the interval
    assert not ep.refresh_due(400) and ep.refresh_due(1300)


def test_voter_endpoints_pick_the_controller_listener_and_never_raft() -> None:
    nodes = [node(1, ("CONTROLLER", "h1", 1), ("RAFT", "h1", 11)),
             node(2, ("RAFT", "h2", 12), ("SECURE", "h2", 2)),
             node(3, ("RAFT", "h3", 13)),
             node(-1, ("CONTROLLER", "x", 9))]
    assert voter_endpoints(nodes, "controller") == {1: ("h1", 1), 2: ("h2", 2)}
    assert voter_endpoints(nodes, "SECURE") == {1: ("h1", 1), 2: ("h2", 2)}


def test_parse_bootstrap_servers() -> None:
    assert parse_bootstrap_servers(" 127.0.0.1:9093,[::1]:9094,127.0.0.1:9093 ") == [
        ("127.0.0.1", 9093), ("::1", 9094)]
    assert parse_bootstrap_servers("") == []
    for bad in ("127.0.0.1", "h:0", "h:x", ":9093", "1@h:9093"):
        with pytest.raises(ValueError):
            parse_bootstrap_servers(bad)


BASE = {"node.id": "101", "process.roles": "broker", "log.dirs": "/tmp/ketch-n14-unused"}


def test_broker_config_accepts_bootstrap_servers_instead_of_voters() -> None:
    config = from_properties({**BASE, "controller.quorum.bootstrap.servers": "127.0.0.1:9093,127.0.0.1:9094"})
    assert config.controller_voters == {}
    assert config.controller_bootstrap_servers == (("127.0.0.1", 9093), ("127.0.0.1", 9094))
    both = from_properties({**BASE, "controller.quorum.voters": "1@127.0.0.1:9093",
                            "controller.quorum.bootstrap.servers": "127.0.0.1:9094"})
    assert both.controller_voters == {1: ("127.0.0.1", 9093)}
    with pytest.raises(ConfigError, match="controller.quorum.voters"):
        from_properties(BASE)
    with pytest.raises(ConfigError, match="controller.quorum.bootstrap.servers"):
        from_properties({**BASE, "controller.quorum.bootstrap.servers": "127.0.0.1"})
