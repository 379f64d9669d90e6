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
