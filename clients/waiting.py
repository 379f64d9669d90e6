"""``wait_until``: await a condition by polling it, for tests, tools and the chaos harness.

Ketch's rule is to await conditions instead of sleeping a guessed time: a probe is called
until it returns something truthy, and that value is returned. A probe that raises one of
``retry_on`` (by default connection trouble and a not-yet-parseable answer: the node may be
restarting) counts as "not yet"; the last value and the last error are in the timeout's
message, so a failure says what was seen. Blocking and thread-based on purpose: callers are
synchronous test code and scripts, never an event loop.
"""
from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

__all__ = ["RETRY_ON", "WaitTimeout", "wait_until"]

T = TypeVar("T")

# OSError covers ConnectionError and TimeoutError (socket timeouts).
RETRY_ON: tuple[type[BaseException], ...] = (OSError, ValueError)


class WaitTimeout(AssertionError):
    """A condition awaited by ``wait_until`` did not come true in time (an AssertionError,
    so a test that times out fails rather than errors)."""


def wait_until(probe: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.1,
               *, retry_on: tuple[type[BaseException], ...] = RETRY_ON,
               error: type[WaitTimeout] = WaitTimeout) -> T:
    """Poll ``probe`` until it returns something truthy and return that; after
    ``timeout_s`` raise ``error`` naming ``what``. ``timeout_s`` is a budget, not an
    assertion about speed: set it generously."""
    if timeout_s < 0 or interval_s <= 0:
        raise ValueError(f"timeout_s must be >= 0 and interval_s > 0, got {timeout_s}, {interval_s}")
    deadline = time.monotonic() + timeout_s       # a local timeout: the monotonic clock
    last_error: BaseException | None = None
    last_value: Any = None
    while True:
        try:
            last_value = probe()
            if last_value:
                return last_value
        except retry_on as e:
            last_error = e
        if time.monotonic() >= deadline:
            raise error(f"timed out after {timeout_s:g}s waiting for {what}; "
                        f"last value {last_value!r}, last error {last_error!r}")
        time.sleep(interval_s)
