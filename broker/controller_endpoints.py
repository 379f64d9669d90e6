"""Where a broker reaches the controllers, and which one to try next (KIP-853). Pure.

A Kafka 4 broker is given either the voters themselves (``controller.quorum.voters``, a
static quorum) or only a few addresses to start from (``controller.quorum.bootstrap.servers``)
and learns the voters' endpoints from the quorum. Ketch brokers learn them from
DescribeQuorum v2, whose ``nodes`` list every voter with its listeners, as the controller
that answers has applied the voter set (``quorum/voters.py``); a voter added later is then
reached, and one removed is no longer tried.

``ControllerEndpoints`` is that knowledge, shared by everything of a broker that talks to
the controllers (the request channel, the heartbeat channel, the metadata fetch):

- the *configured* endpoints: the static voters by id, or the bootstrap servers under
  Kafka's ids for them (-2, -3, ...: ``QuorumConfig``'s bootstrap ids, never a node's);
- the *learned* voters (None until the first answer);
- the active controller, as the last write accepted or a NOT_CONTROLLER hint named it.

``order()`` is the failover order: the active controller first, then the learned voters by
id, then the configured endpoints that are not a learned voter's address (the fall-back
when every voter it learned of is gone, e.g. the whole set was replaced while the broker
was down; Kafka's brokers keep the bootstrap servers for the same reason).

When to ask again (``refresh_due``): never asked yet; a hint named a controller it does not
know (a voter added since); a whole round of candidates failed; otherwise every
``refresh_interval_ms``. The shell asks; this only says when, and keeps what it learns.
"""
from __future__ import annotations

from typing import Any, Collection, Iterable, Mapping, Sequence

__all__ = [
    "BOOTSTRAP_ID_BASE", "REFRESH_INTERVAL_MS_DEFAULT", "ControllerEndpoints",
    "parse_bootstrap_servers", "voter_endpoints",
]

Address = tuple[str, int]

# Kafka's ids for controller.quorum.bootstrap.servers entries: -2, -3, ... (-1 is "none").
BOOTSTRAP_ID_BASE = -2
REFRESH_INTERVAL_MS_DEFAULT = 5000
RAFT_LISTENER = "RAFT"      # Ketch's pysyncobj endpoint in a voter's listeners: not Kafka


def parse_bootstrap_servers(value: str) -> list[Address]:
    """``host:port,host:port`` (Kafka's controller.quorum.bootstrap.servers); ValueError
    naming the bad item."""
    out: list[Address] = []
    for item in filter(None, (s.strip() for s in value.split(","))):
        host, colon, port = item.rpartition(":")
        if not colon or not host or "@" in host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not host:port")
        address = (host.strip("[]"), int(port))
        if address not in out:
            out.append(address)
    return out


def voter_endpoints(nodes: Iterable[Any], listener_name: str) -> dict[int, Address]:
    """The voters' addresses on ``listener_name`` from DescribeQuorum v2's ``nodes``
    (node_id, listeners of name/host/port); a node without that listener is reached on its
    first Kafka listener (a controller answering for another listener name)."""
    out: dict[int, Address] = {}
    for node in nodes:
        listeners = [lst for lst in node.listeners if lst.name.upper() != RAFT_LISTENER]
        chosen = next((lst for lst in listeners if lst.name.upper() == listener_name.upper()),
                      listeners[0] if listeners else None)
        if chosen is not None and node.node_id >= 0:
            out[node.node_id] = (chosen.host, chosen.port)
    return out


class ControllerEndpoints:
    def __init__(self, *, voters: Mapping[int, Address] | None = None,
                 bootstrap_servers: Sequence[Address] = (),
                 refresh_interval_ms: int = REFRESH_INTERVAL_MS_DEFAULT) -> None:
        """Static ``voters`` (controller.quorum.voters) win over ``bootstrap_servers``, as in
        Kafka; one of them must name something."""
        if voters:
            configured = dict(voters)
        else:
            configured = {BOOTSTRAP_ID_BASE - i: a for i, a in enumerate(bootstrap_servers)}
        assert configured, "controller.quorum.voters or controller.quorum.bootstrap.servers"
        assert refresh_interval_ms > 0
        self.configured: dict[int, Address] = configured
        self.refresh_interval_ms = refresh_interval_ms
        self.learned: dict[int, Address] | None = None
        self.active_id: int | None = None
        # Bumped whenever the learned voters' endpoints change: a connection opened before
        # may lead to a controller that is no voter any more.
        self.generation = 0
        self._refreshed_ms: int | None = None
        self._stale = True

    # -- reads --

    def voters(self) -> dict[int, Address]:
        """The voters as last learned, or the configured endpoints before that."""
        return dict(self.learned) if self.learned is not None else dict(self.configured)

    def address(self, node_id: int) -> Address | None:
        if self.learned is not None and node_id in self.learned:
            return self.learned[node_id]
        return self.configured.get(node_id)

    def order(self) -> list[int]:
        """The ids to try, best first (see the module docstring)."""
        learned = self.learned or {}
        ids = sorted(learned)
        taken = set(learned.values())
        ids += [i for i in sorted(self.configured, key=_configured_order)
                if i not in learned and self.configured[i] not in taken]
        if self.active_id in ids:
            ids.remove(self.active_id)
            ids.insert(0, self.active_id)
        return ids

    def next_to_try(self, tried: Collection[int]) -> int | None:
        """The best candidate not tried yet in this round (None: the round is over)."""
        return next((i for i in self.order() if i not in tried), None)

    def addresses(self) -> list[Address]:
        """``order()`` as addresses (the metadata fetch, which any controller serves)."""
        return [a for i in self.order() if (a := self.address(i)) is not None]

    def refresh_due(self, now_ms: int) -> bool:
        return (self._stale or self._refreshed_ms is None
                or now_ms - self._refreshed_ms >= self.refresh_interval_ms)

    def poll(self, now_ms: int) -> int:
        """Milliseconds until the next refresh is due (0: now)."""
        if self._stale or self._refreshed_ms is None:
            return 0
        return max(0, self._refreshed_ms + self.refresh_interval_ms - now_ms)

    # -- what the shell saw --

    def learn(self, voters: Mapping[int, Address], now_ms: int) -> bool:
        """A controller described the voters; True if their endpoints changed. An empty
        answer (a controller that knows none) teaches nothing."""
        if not voters:
            return False
        self._refreshed_ms = now_ms
        self._stale = False
        changed = self.learned != dict(voters)
        if changed:
            self.learned = dict(voters)
            self.generation += 1
            if self.active_id is not None and self.active_id not in self.learned:
                # No voter any more, or a bootstrap server that goes by its voter id now.
                address = self.configured.get(self.active_id) if self.active_id < 0 else None
                self.active_id = next((i for i, a in self.learned.items() if a == address), None)
        return changed

    def refresh_failed(self, now_ms: int) -> None:
        """No controller answered the describe: try again after the interval (the caller
        backs off), not in a tight loop."""
        self._refreshed_ms = now_ms
        self._stale = False

    def leader_hint(self, controller_id: int) -> None:
        """A NOT_CONTROLLER answer named this controller (-1: none known)."""
        if controller_id >= 0 and self.address(controller_id) is not None:
            self.active_id = controller_id
            return
        self.active_id = None
        if controller_id >= 0:
            self._stale = True      # a controller we do not know: the voters changed

    def accepted(self, node_id: int) -> None:
        """A write was answered by this controller: it is the active one."""
        self.active_id = node_id

    def unreachable(self, node_id: int) -> None:
        if self.active_id == node_id:
            self.active_id = None

    def round_failed(self) -> None:
        """Every candidate failed once: maybe the voters moved; ask again."""
        self._stale = True


def _configured_order(node_id: int) -> tuple[int, int]:
    # Static voters by id; bootstrap servers (negative ids) in the order given.
    return (0, node_id) if node_id >= 0 else (1, -node_id)
