"""A process pool for the random explorer's seeds, shared by the sim tests of one session."""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Iterator

import pytest

from tests.sim.explorer import process_pool


@pytest.fixture(scope="session")
def explorer_pool() -> Iterator[ProcessPoolExecutor | None]:
    """One worker per core (the explorer is pure CPU); None on a one-core machine, where
    the seeds run in the test's own process."""
    workers = os.cpu_count() or 1
    if workers < 2:
        yield None
        return
    pool = process_pool(workers)
    yield pool
    pool.shutdown(cancel_futures=True)
