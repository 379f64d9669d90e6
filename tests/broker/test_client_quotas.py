"""Client quotas: resolution order, the rate and throttle time, describe filters (pure)."""
from __future__ import annotations

from broker.client_quotas import ANONYMOUS, ClientQuotaManager, describe_quotas, resolve_quota
from metadata_log.image import ClientQuotasImage, quota_entity

KEY = "producer_byte_rate"


def image(entries: dict[tuple, float]) -> ClientQuotasImage:
    return ClientQuotasImage({quota_entity(e): {KEY: v} for e, v in entries.items()})


def test_resolution_follows_kafkas_order() -> None:
    u, d = ANONYMOUS, None
    levels = [
        ((("user", u), ("client-id", "app")), 1.0), ((("user", u), ("client-id", d)), 2.0),
        ((("user", u),), 3.0), ((("user", d), ("client-id", "app")), 4.0),
        ((("user", d), ("client-id", d)), 5.0), ((("user", d),), 6.0),
        ((("client-id", "app"),), 7.0), ((("client-id", d),), 8.0),
    ]
    for i in range(len(levels)):
        assert resolve_quota(image(dict(levels[i:])), u, "app", KEY) == levels[i][1]
    assert resolve_quota(image({(("client-id", "other"),): 9.0}), u, "app", KEY) is None
    # Another client id falls to the defaults, never to app's own entity.
    assert resolve_quota(image(dict(levels)), u, "other", KEY) == 2.0


def test_throttle_time_is_the_excess_over_the_bound_times_the_window() -> None:
    quotas = image({(("client-id", "slow"),): 1000.0})
    m = ClientQuotaManager(KEY, window_ms=1000, samples=11)
    # 10 s measured at least: 10,000 bytes is exactly the bound.
    assert m.record(quotas, ANONYMOUS, "slow", 10_000, 0) == 0
    # 20,000 bytes over 10 s = 2,000 B/s: (2000 - 1000) / 1000 x 10 s.
    assert m.record(quotas, ANONYMOUS, "slow", 10_000, 500) == 10_000
    assert m.record(quotas, ANONYMOUS, "fast", 10**9, 500) == 0        # no quota applies
    # Old windows age out: after 11 s only new bytes count.
    assert m.record(quotas, ANONYMOUS, "slow", 100, 12_000) == 0


def test_describe_filters_by_exact_default_and_any_matches() -> None:
    quotas = image({(("client-id", "a"),): 1.0, (("client-id", None),): 2.0,
                    (("user", "u"), ("client-id", "a")): 3.0})
    _, exact = describe_quotas(quotas, [("client-id", 0, "a")], strict=False)
    assert sorted(v[KEY] for _, v in exact) == [1.0, 3.0]
    _, strict = describe_quotas(quotas, [("client-id", 0, "a")], strict=True)
    assert [v[KEY] for _, v in strict] == [1.0]
    _, default = describe_quotas(quotas, [("client-id", 1, None)], strict=True)
    assert [v[KEY] for _, v in default] == [2.0]
    _, everything = describe_quotas(quotas, [], strict=False)
    assert len(everything) == 3
    assert describe_quotas(quotas, [("client-id", 0, None)], False)[0]
    assert describe_quotas(quotas, [("user", 2, None), ("user", 2, None)], False)[0]


def test_request_percentage_is_handling_time_as_a_share_of_one_thread() -> None:
    quotas = ClientQuotasImage({quota_entity((("client-id", "busy"),)): {"request_percentage": 10.0}})
    m = ClientQuotaManager("request_percentage", window_ms=1000, samples=11, scale=0.1)
    # 1,000 ms of handling over the 10 s measured: 100 ms/s = 10% of a thread, the bound.
    assert m.record(quotas, ANONYMOUS, "busy", 1000, 0) == 0
    # 2,000 ms: 20%, twice the bound -> throttled the whole window.
    assert m.record(quotas, ANONYMOUS, "busy", 1000, 100) == 10_000


def test_busy_time_counts_running_not_waiting() -> None:
    import asyncio
    import time

    from broker.apis import BusyTime

    async def handler() -> str:
        end = time.perf_counter() + 0.03
        while time.perf_counter() < end:
            pass                                   # 30 ms of work
        await asyncio.sleep(0.2)                   # 200 ms in "purgatory"
        return "done"

    async def main() -> tuple[str, float]:
        busy = BusyTime(handler())
        return await busy, busy.ms

    answer, ms = asyncio.run(main())
    assert answer == "done" and 30 <= ms < 150, ms


def test_busy_time_passes_cancellation_to_the_handler() -> None:
    import asyncio

    from broker.apis import BusyTime

    cleaned = []

    async def handler() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append(True)

    async def main() -> None:
        task = asyncio.ensure_future(BusyTime(handler()))
        await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    asyncio.run(main())
    assert cleaned == [True]
