"""Client quota enforcement (Kafka's ClientQuotaManager; KIP-13, KIP-55, KIP-219).

Which quota applies to a client is resolved over ``image.client_quotas`` in Kafka's order,
the first entity that sets the key winning:

    user + client-id, user + default client-id, user,
    default user + client-id, default user + default client-id, default user,
    client-id, default client-id

The user is the connection's principal's name (``ClientInfo.principal``: the SASL user
or the TLS certificate's subject); an unauthenticated client is Kafka's ``ANONYMOUS``. Each (user, client-id) has its own rate: bytes in
``samples`` windows of ``window_ms`` (Kafka's quota.window.num = 11 and
quota.window.size.seconds = 1), measured over at least ``samples - 1`` windows. A request
that takes the rate above the bound is still served; its response carries
``throttle_time_ms`` = (rate - bound) / bound x the measured window, as Kafka computes it,
and the network server mutes the connection for that long (KIP-219: the client waits too).

``request_percentage`` (KIP-124) bounds the time the broker spends on a client's requests,
as a percentage of one thread: the broker counts the milliseconds its event loop spends
running each request's handler (waits in purgatory, for replication or for fetch data,
excluded, as Kafka counts request-handler thread time), a rate of ms per second that
``scale`` turns into percent. controller_mutation_rate (KIP-599) is stored and described but
not enforced (its mutation accounting on the controller is not built).

Pure: time is ``now_ms``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from metadata_log.image import ClientQuotasImage, QuotaEntity, quota_entity

__all__ = ["ANONYMOUS", "ClientQuotaManager", "ClientQuotas", "describe_quotas", "resolve_quota"]

ANONYMOUS = "ANONYMOUS"        # KafkaPrincipal.ANONYMOUS's name
USER, CLIENT_ID = "user", "client-id"


def _candidates(user: str, client_id: str) -> list[QuotaEntity]:
    u, c, d = user, client_id, None
    return [quota_entity(p) for p in (
        [(USER, u), (CLIENT_ID, c)], [(USER, u), (CLIENT_ID, d)], [(USER, u)],
        [(USER, d), (CLIENT_ID, c)], [(USER, d), (CLIENT_ID, d)], [(USER, d)],
        [(CLIENT_ID, c)], [(CLIENT_ID, d)])]


def resolve_quota(quotas: ClientQuotasImage, user: str, client_id: str, key: str) -> float | None:
    """The bound of ``key`` for this client, or None when no entity sets it."""
    if not quotas.entities:
        return None
    for entity in _candidates(user, client_id):
        values = quotas.entities.get(entity)
        if values is not None and key in values:
            return values[key]
    return None


@dataclass(slots=True)
class _Rate:
    windows: deque = field(default_factory=deque)      # [window start ms, amount]

    def record(self, amount: float, now_ms: int, window_ms: int, samples: int) -> None:
        start = now_ms - now_ms % window_ms
        if self.windows and self.windows[-1][0] == start:
            self.windows[-1][1] += amount
        else:
            self.windows.append([start, amount])
        while self.windows and self.windows[0][0] <= now_ms - samples * window_ms:
            self.windows.popleft()

    def measure(self, now_ms: int, window_ms: int, samples: int) -> tuple[float, int]:
        """(rate per second, the window it was measured over in ms)."""
        elapsed = now_ms - self.windows[0][0] if self.windows else 0
        elapsed = max(elapsed, (samples - 1) * window_ms)
        return sum(a for _, a in self.windows) * 1000 / elapsed, elapsed


@dataclass(slots=True)
class ClientQuotaManager:
    key: str                     # producer_byte_rate, consumer_byte_rate
    window_ms: int = 1000        # quota.window.size.seconds
    samples: int = 11            # quota.window.num
    max_throttle_ms: int = 30_000
    scale: float = 1.0           # the measured rate per second -> the quota's unit
    _rates: dict[tuple[str, str], _Rate] = field(default_factory=dict)

    def record(self, quotas: ClientQuotasImage, user: str, client_id: str, amount: float,
               now_ms: int) -> int:
        """Count ``amount`` for this client; the milliseconds to throttle it (0: none)."""
        bound = resolve_quota(quotas, user, client_id, self.key)
        if bound is None:
            self._rates.pop((user, client_id), None)     # no quota: nothing to remember
            return 0
        rate = self._rates.get((user, client_id))
        if rate is None:
            rate = self._rates[(user, client_id)] = _Rate()
        rate.record(amount, now_ms, self.window_ms, self.samples)
        observed, window = rate.measure(now_ms, self.window_ms, self.samples)
        observed *= self.scale
        if observed <= bound:
            return 0
        return min(self.max_throttle_ms, round((observed - bound) / bound * window))


MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2     # DescribeClientQuotas' MatchType


def describe_quotas(quotas: ClientQuotasImage,
                    components: list[tuple[str, int, str | None]], strict: bool
                    ) -> tuple[str | None, list[tuple[QuotaEntity, dict[str, float]]]]:
    """DescribeClientQuotas over the image: (a problem, or None, and the matching entities
    with their values). Each component (entity type, match type, name) must match; with
    ``strict`` an entity may have no other types."""
    types = [t for t, _, _ in components]
    if len(set(types)) != len(types):
        return f"Duplicate entity type in filter {types}", []
    for t, match_type, name in components:
        if match_type == MATCH_EXACT and name is None:
            return f"An exact match of {t} needs a name", []
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return f"Unknown match type {match_type}", []
    out = []
    for entity in sorted(quotas.entities, key=repr):
        names = dict(entity)
        if strict and set(names) != set(types):
            continue
        if all(t in names and (match_type == MATCH_ANY
                               or (match_type == MATCH_DEFAULT and names[t] is None)
                               or (match_type == MATCH_EXACT and names[t] == name))
               for t, match_type, name in components):
            out.append((entity, dict(quotas.entities[entity])))
    return None, out


@dataclass(slots=True)
class ClientQuotas:
    """The broker's quotas: produce (request bytes), fetch (response bytes), and request
    time (ms of handling per second; 1000 ms/s is 100% of one thread)."""
    produce: ClientQuotaManager = field(default_factory=lambda: ClientQuotaManager("producer_byte_rate"))
    fetch: ClientQuotaManager = field(default_factory=lambda: ClientQuotaManager("consumer_byte_rate"))
    request: ClientQuotaManager = field(
        default_factory=lambda: ClientQuotaManager("request_percentage", scale=0.1))
