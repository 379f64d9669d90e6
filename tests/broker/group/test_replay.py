"""Replaying the acknowledged ``__consumer_offsets`` records rebuilds the live durable state.

A second coordinator loads each partition from the batches the first one had acknowledged
(through bytes: encode, batch, offsets, decode), and must agree with the first on every
group that is Stable or Empty (mid-rebalance groups have nothing durable yet) and on every
committed offset. A scripted story covers each kind of write; a seeded simulation of
simple clients (join, sync, heartbeat, commit, leave, crash, restart, delete) covers their
interleavings.
"""
from __future__ import annotations

import random

import pytest

from broker.group import GroupCoordinator, GroupState
from clients.protocol.errors import ErrorCode
from group_harness import Harness, assignment

E = ErrorCode
S = GroupState


def durable_view(c: GroupCoordinator, partition: int, skip: set[str] = frozenset()) -> dict:
    image = c.image(partition)
    ids = image.group_ids() | {g.group_id for g in c.groups()
                               if g.state is S.STABLE and c.partition_for(g.group_id) == partition}
    view: dict = {}
    for group_id in sorted(ids - skip):
        g = c.group(group_id)
        if g is None:
            view[group_id] = None
            continue
        assert g.state in (S.STABLE, S.EMPTY), g
        members = tuple(
            (m.member_id, m.group_instance_id, m.client_id, m.client_host,
             m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(g.protocol_name),
             m.assignment) for m in g.members.values()) if g.state is S.STABLE else ()
        view[group_id] = (
            g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
            members, g.subscribed_topics,
            # Only an Empty group's state time is durable in a way that matters (retention).
            g.current_state_timestamp_ms if g.state is S.EMPTY and g.protocol_type else None,
            dict(image.offsets.get(group_id, {})))
    return view


def mid_rebalance(c: GroupCoordinator) -> set[str]:
    return {g.group_id for g in c.groups() if g.state not in (S.STABLE, S.EMPTY)}


def reload_and_compare(h: Harness) -> GroupCoordinator:
    assert not h.pending_appends
    fresh = GroupCoordinator(h.config)
    skip = mid_rebalance(h.coordinator)
    for p in sorted(h.log.batches):
        fresh.begin_load(p)
        fresh.complete_load(p, h.log.load(p).image, h.now_ms)
        live = durable_view(h.coordinator, p, skip)
        loaded = durable_view(fresh, p, skip)
        assert loaded == live, f"partition {p}"
    return fresh


def test_scripted_story_replays_to_the_live_state() -> None:
    h = Harness()
    ids = h.form_group("g", 3)                                    # group snapshot, Stable
    h.commit("g", {("t", 0): 10, ("t", 1): 11}, member_id=ids[0], generation_id=1)
    h.commit("solo", {("u", 0): 1})                               # standalone group
    h.commit("solo", {("u", 0): 2, ("u", 1): 3}, version=2, retention_time_ms=99_000)
    h.join("s", version=5, instance_id="i0")
    h.settle()
    s0 = next(iter(h.group("s").members))
    h.sync("s", s0, 1, {s0: assignment({"t": [0]})}, instance_id="i0")
    h.join("s", version=5, instance_id="i0", client_id="restarted")   # static replacement
    h.leave("g", [(ids[2], None)])
    h.join("g", member_id=ids[0])
    h.join("g", member_id=ids[1])
    g = h.group("g")
    h.sync("g", g.leader_id, 2, {m: assignment({"t": [k]}) for k, m in enumerate(g.members)})
    h.sync("g", next(m for m in g.members if m != g.leader_id), 2)
    assert g.state is S.STABLE and g.generation_id == 2
    h.form_group("e", 1)
    h.leave("e", [(next(iter(h.group("e").members)), None)])       # Empty snapshot
    h.commit("doomed", {("t", 0): 1})
    h.delete_groups(["doomed"])                                   # tombstones
    h.offset_delete("solo", {"u": [1]})
    fresh = reload_and_compare(h)
    assert fresh.group("doomed") is None
    assert fresh.group("g").generation_id == 2 and fresh.group("e").state is S.EMPTY
    assert fresh.group("s").members.keys() == h.group("s").members.keys()


def test_reloaded_coordinator_serves_the_same_members() -> None:
    h = Harness()
    ids = h.form_group("g", 2)
    h.commit("g", {("t", 0): 4}, member_id=ids[1], generation_id=1)
    p = h.coordinator.partition_for("g")
    # Failover: the partition moves to a new coordinator, which loads it.
    h.run(h.coordinator.unload_partition(p, h.now_ms))
    h.coordinator.begin_load(p)
    h.run(h.coordinator.complete_load(p, h.log.load(p).image, h.now_ms))
    assert h.heartbeat("g", ids[0], 1) == E.NONE and h.heartbeat("g", ids[1], 1) == E.NONE
    r = h.response(h.sync("g", ids[1], 1))
    assert r.error_code == 0 and r.assignment == h.group("g").members[ids[1]].assignment
    assert h.fetched("g", {"t": [0]}) == {("t", 0): 4}
    # Loaded members' sessions run from their last heartbeat: silence removes them.
    h.advance(9_999)
    assert h.group("g").state is S.STABLE
    h.advance(1)
    assert h.group("g").state is S.EMPTY and h.group("g").generation_id == 2


# ------------------------------------------------------------------ simulation

class Client:
    """A consumer as clients behave: follow the coordinator's answers, rejoin on cue."""

    def __init__(self, h: Harness, rng: random.Random, name: str, group_id: str,
                 instance_id: str | None, version: int) -> None:
        self.h, self.rng, self.name, self.group_id = h, rng, name, group_id
        self.instance_id, self.version = instance_id, version
        self.member_id = ""
        self.generation = -1
        self.join_token: int | None = None
        self.sync_token: int | None = None
        self.alive = True
        self.calm = False          # only follow the protocol: no commits, leaves or crashes

    def start_join(self) -> None:
        self.join_token = self.h.join(
            self.group_id, self.member_id, version=self.version, instance_id=self.instance_id,
            client_id=self.name, topics=["t"], session_timeout_ms=6_000,
            rebalance_timeout_ms=self.rng.choice([6_000, 12_000]))

    def reset(self) -> None:
        self.member_id, self.generation = "", -1

    def step(self) -> None:
        h = self.h
        if self.join_token is not None:
            r = h.response(self.join_token)
            if r is None:
                return
            self.join_token = None
            if r.error_code == E.MEMBER_ID_REQUIRED:
                self.member_id = r.member_id
                return self.start_join()
            if r.error_code != E.NONE:
                if r.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                    self.reset()
                return
            self.member_id, self.generation = r.member_id, r.generation_id
            assigns = None
            if r.leader == r.member_id and r.members:
                assigns = {m.member_id: assignment({"t": [k]}) for k, m in enumerate(r.members)}
            self.sync_token = h.sync(self.group_id, self.member_id, self.generation, assigns,
                                     instance_id=self.instance_id)
            return
        if self.sync_token is not None:
            r = h.response(self.sync_token)
            if r is None:
                return
            self.sync_token = None
            if r.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID, E.ILLEGAL_GENERATION):
                self.reset()
            if r.error_code != E.NONE:
                self.start_join()
            return
        if self.generation < 0:
            return self.start_join()
        roll = 0.0 if self.calm else self.rng.random()
        if roll < 0.6:
            error = h.heartbeat(self.group_id, self.member_id, self.generation,
                                instance_id=self.instance_id)
            if error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID, E.ILLEGAL_GENERATION):
                self.reset()
            if error != E.NONE:
                self.start_join()
        elif roll < 0.85:
            h.commit(self.group_id, {("t", self.rng.randrange(3)): self.rng.randrange(1000)},
                     member_id=self.member_id, generation_id=self.generation,
                     instance_id=self.instance_id)
        elif roll < 0.9:
            h.leave(self.group_id, [(self.member_id, self.instance_id)])
            self.alive = False
        elif roll < 0.95:
            self.alive = False           # crash: silence
        else:
            self.start_join()            # a leader's or follower's voluntary rejoin


def simulate(seed: int, steps: int = 250) -> tuple[Harness, list[Client]]:
    rng = random.Random(seed)
    h = Harness(seed=seed)
    clients: list[Client] = []
    groups = ["ga", "gb"]
    serial = 0
    for _ in range(steps):
        roll = rng.random()
        live = [c for c in clients if c.alive]
        if roll < 0.15 or not live:
            serial += 1
            static = rng.random() < 0.4
            instance = f"inst{rng.randrange(4)}" if static else None
            if instance is not None and any(c.alive and c.instance_id == instance for c in clients):
                # A restart of a static member: the old process is gone.
                for c in clients:
                    if c.instance_id == instance:
                        c.alive = False
            c = Client(h, rng, f"c{serial}", rng.choice(groups), instance, rng.choice([3, 5, 9]))
            clients.append(c)
            c.start_join()
        elif roll < 0.8:
            rng.choice(live).step()
        elif roll < 0.85:
            h.commit("standalone", {("s", rng.randrange(2)): rng.randrange(100)})
        elif roll < 0.87:
            h.delete_groups([rng.choice(groups + ["standalone"])])
        else:
            h.advance(rng.randrange(0, 4_000))
    return h, clients


def quiesce(h: Harness, clients: list[Client]) -> None:
    """The surviving clients keep following the protocol until their groups are Stable."""
    for c in clients:
        c.calm = True
    for _ in range(100):
        for c in clients:
            if c.alive:
                c.step()
        if all(g.state in (S.STABLE, S.EMPTY) for g in h.coordinator.groups()):
            return
        h.advance(1_000)
    raise AssertionError(f"groups did not settle: {h.coordinator.groups()}")


@pytest.mark.parametrize("seed", range(12))
def test_simulation_replays_to_the_live_state(seed: int) -> None:
    h, clients = simulate(seed)
    reload_and_compare(h)
    quiesce(h, clients)
    assert any(g.state is S.STABLE for g in h.coordinator.groups())
    fresh = reload_and_compare(h)
    assert not mid_rebalance(h.coordinator)
    # The reloaded coordinator has the survivors exactly where the live one has them.
    for c in clients:
        if c.alive and c.generation >= 0 and h.group(c.group_id).has(c.member_id):
            assert fresh.group(c.group_id).has(c.member_id)
    # And once every survivor stops, sessions expire and the groups empty, durably.
    h.settle(limit_ms=120_000)
    assert all(g.state is S.EMPTY for g in h.coordinator.groups())
    reload_and_compare(h)


@pytest.mark.parametrize("seed", range(6))
def test_simulation_with_failing_appends_answers_every_request_once(seed: int) -> None:
    rng = random.Random(1000 + seed)
    h = Harness(seed=seed, auto_ack=False)
    clients = [Client(h, rng, f"c{i}", "g", f"i{i}" if i % 2 else None, 5) for i in range(4)]
    for c in clients:
        c.start_join()
    for _ in range(300):
        roll = rng.random()
        if roll < 0.6:
            rng.choice(clients).step()
        elif roll < 0.85 and h.pending_appends:
            h.ack_next(rng.choice([E.NONE, E.NONE, E.NOT_ENOUGH_REPLICAS, E.NOT_LEADER_OR_FOLLOWER]))
        else:
            h.advance(rng.randrange(0, 3_000))
    h.ack_all()
    h.settle(limit_ms=600_000)
    h.ack_all()
    h.settle(limit_ms=600_000)
    # Every request the shell parked got exactly one answer (Harness asserts "once").
    assert set(h.responses) == set(h.versions)
