"""SCENARIOS.md, simulated: every data-plane id holds its promise (N) or shows its hazard (L)
at every seed, and a seed replays a run exactly."""
from __future__ import annotations

import logging

import pytest

from tests.sim.explorer import explore
from tests.sim.scenarios import NOT_SIMULATED, SCENARIOS, run_scenario

SEEDS_PER_SCENARIO = 8


@pytest.fixture(autouse=True)
def _quiet_cores():
    # The cores log every election and truncation; thousands of runs would drown pytest.
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_by_seed(scenario: str) -> None:
    for seed in range(SEEDS_PER_SCENARIO):
        run_scenario(scenario, seed)       # raises InvariantViolation naming SIM_SEED


def test_l_scenarios_show_their_loss() -> None:
    # The hazards must show, with the figure SCENARIOS.md names (not just "no violation").
    assert run_scenario("L1", 0).figures.lost_sent > 0
    l2 = run_scenario("L2", 0)
    assert l2.figures.lost_acks1 == l2.notes["acked_by_leader_alone"] > 0
    assert run_scenario("L3", 0).figures.lost > 0
    assert run_scenario("L4", 0).figures.lost > 0
    l6 = run_scenario("L6", 0)
    assert l6.figures.lost == 0 and l6.notes["not_enough_replicas"] > 0


def test_consumer_side_scenarios_say_why_not() -> None:
    assert set(NOT_SIMULATED) == {"N7", "L5"}


def test_a_seed_replays_exactly() -> None:
    first, again = explore(11), explore(11)
    assert (first.ok, first.acked, first.sim_ms, first.events) == \
        (again.ok, again.acked, again.sim_ms, again.events)
    assert explore(12).events != first.events     # and another seed is another run
