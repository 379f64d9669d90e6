"""The random explorer over the real core: a CI share of seeds, every invariant held."""
from __future__ import annotations

import logging

import pytest

from tests.sim.explorer import search

CI_SEEDS = 2_500          # python -m tests.sim --seeds 100000 for the long search
CHUNK = 250


@pytest.fixture(autouse=True)
def _quiet_cores():
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("start", range(0, CI_SEEDS, CHUNK))
def test_explorer_seeds_hold_every_invariant(start: int, explorer_pool) -> None:
    failed, n, seconds = search(range(start, start + CHUNK), executor=explorer_pool)
    assert failed is None, str(failed)
    assert n == CHUNK
