"""Ketch's consumer in groups on a real 3+3 cluster: every assignor splits a 6-partition
topic among three members, a SIGKILLed member's partitions move, cooperative rebalancing
leaves the other members consuming, a static member restarts without a rebalance, and a
Ketch consumer shares a group with confluent-kafka (librdkafka).

Group state is read back with raw DescribeGroups (groups_helpers), not from the client."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from clients.aio import Consumer
from clients.errors import CommitFailedError, RebalanceInProgressError
from clients.types import TopicPartition as TP
from groups_helpers import (
    ConsumerProcess, create_topic, describe_group, produce, wait_for_assignment, wait_until,
)

pytestmark = [pytest.mark.process]

ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]


def ketch_config(bootstrap: str, group: str, client_id: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
            "fetch.max.wait.ms": 200, **extra}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_three_ketch_consumers_split_six_partitions(cluster, bootstrap, assignor) -> None:
    topic, group = f"split-{assignor}", f"g-split-{assignor}"
    create_topic(cluster, topic, partitions=6)
    landed = produce(bootstrap, topic, per_partition=20, partitions=6, tag=assignor)

    async def run() -> tuple[dict[str, set], dict[tuple[int, int], str]]:
        consumers = [Consumer(ketch_config(bootstrap, group, f"{group}-{i}",
                                           **{"partition.assignment.strategy": assignor})) for i in range(3)]
        got: dict[tuple[int, int], str] = {}
        stop = asyncio.Event()

        async def consume(c: Consumer) -> None:
            await c.start()
            c.subscribe([topic])
            while not stop.is_set():
                for r in await c.poll(200):
                    got[(r.partition, r.offset)] = r.value.decode()
                try:
                    await c.commit()
                except (RebalanceInProgressError, CommitFailedError):
                    # as Kafka's commitSync: poll() completes the rebalance, commit after it
                    pass

        tasks = [asyncio.create_task(consume(c)) for c in consumers]
        try:
            def split() -> bool:
                view = describe_group(cluster, group, topic)
                return (view is not None and view.state == "Stable" and view.protocol == assignor
                        and len(view.members) == 3
                        and sorted(len(p) for p in view.assignment().values()) == [2, 2, 2]
                        and all(len(c.assignment()) == 2 for c in consumers) and len(got) == len(landed))
            deadline = time.monotonic() + 60
            while not await asyncio.to_thread(split):
                assert time.monotonic() < deadline, f"no 2/2/2 split: {[c.assignment() for c in consumers]}"
                await asyncio.sleep(0.2)
            return {c.config["client.id"]: c.assignment() for c in consumers}, got
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for c in consumers:
                await c.close()

    assignment, got = asyncio.run(run())
    owned = [tp for parts in assignment.values() for tp in parts]
    assert sorted(owned) == [TP(topic, p) for p in range(6)]
    assert got == landed
    # everyone left with LeaveGroup on close
    assert describe_group(cluster, group, topic).state == "Empty"
    if assignor == "range":       # Kafka's range: members in member-id order get 0-1, 2-3, 4-5
        assert sorted(map(sorted, ({tp.partition for tp in a} for a in assignment.values()))) == [
            [0, 1], [2, 3], [4, 5]]


def test_sigkilled_member_partitions_move_to_the_others(cluster, bootstrap, members) -> None:
    topic, group = "kill", "g-kill"
    create_topic(cluster, topic, partitions=6)
    procs = [members(bootstrap, group, topic, f"kill-{i}", assignor="range") for i in range(3)]
    first = wait_for_assignment(cluster, group, topic, {p.client_id for p in procs}, 6, timeout_s=60)
    victim = procs[0]
    victim_partitions = first.assignment()[victim.client_id]
    assert len(victim_partitions) == 2
    victim.kill()
    # no LeaveGroup: the session timeout (6 s) removes it, the others take its partitions
    after = wait_for_assignment(cluster, group, topic, {p.client_id for p in procs[1:]}, 6, timeout_s=60)
    assert sorted(len(p) for p in after.assignment().values()) == [3, 3]
    landed = produce(bootstrap, topic, per_partition=10, partitions=6, tag="after-kill")

    def survivors_read_everything() -> bool:
        seen = {(p, o) for s in procs[1:] for p, o, _ in s.records()}
        return set(landed) <= seen
    wait_until(survivors_read_everything, 30, "the survivors read every record, the victim's partitions too")
    moved = {p for s in procs[1:] for p, _, _ in s.records()} & set(victim_partitions)
    assert moved == set(victim_partitions)
    for s in procs[1:]:
        assert s.alive(), s.stderr_tail()
        assert s.close() == 0 and s.first_event("closed")


def test_cooperative_rebalance_does_not_stop_the_other_members(cluster, bootstrap) -> None:
    """Two cooperative-sticky members consume while a producer writes; a third joins. The
    two never revoke everything, and each receives records between the third's subscribe()
    and the moment the third is given partitions (the rebalance, both rounds of it)."""
    topic, group = "coop", "g-coop"
    create_topic(cluster, topic, partitions=6)
    stop_producing = threading.Event()

    def producer() -> None:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        i = 0
        while not stop_producing.is_set():
            for part in range(6):
                p.produce(topic, value=f"c-{part}-{i}".encode(), partition=part)
            p.poll(0)
            i += 1
            time.sleep(0.01)
        p.flush(10)

    class Log:
        def __init__(self) -> None:
            self.events: list[tuple[float, str, frozenset]] = []

        def on_partitions_assigned(self, c, parts):
            self.events.append((time.monotonic(), "assigned", frozenset(parts)))

        def on_partitions_revoked(self, c, parts):
            self.events.append((time.monotonic(), "revoked", frozenset(parts)))

        def on_partitions_lost(self, c, parts):
            self.events.append((time.monotonic(), "lost", frozenset(parts)))

    async def run():
        cfg = {"partition.assignment.strategy": "cooperative-sticky"}
        old = [Consumer(ketch_config(bootstrap, group, f"coop-{i}", **cfg)) for i in range(2)]
        logs = [Log(), Log(), Log()]
        received: list[list[float]] = [[], [], []]
        stop = asyncio.Event()

        async def consume(i: int, c: Consumer) -> None:
            await c.start()
            c.subscribe([topic], listener=logs[i])
            while not stop.is_set():
                if await c.poll(100):
                    received[i].append(time.monotonic())

        tasks = [asyncio.create_task(consume(i, c)) for i, c in enumerate(old)]
        try:
            deadline = time.monotonic() + 60
            while not (sorted(len(c.assignment()) for c in old) == [3, 3] and all(received[:2])):
                assert time.monotonic() < deadline, "the first two never split the topic"
                await asyncio.sleep(0.1)
            newcomer = Consumer(ketch_config(bootstrap, group, "coop-2", **cfg))
            joined_at = time.monotonic()
            tasks.append(asyncio.create_task(consume(2, newcomer)))
            old.append(newcomer)
            while not (sorted(len(c.assignment()) for c in old) == [2, 2, 2]):
                assert time.monotonic() < deadline, f"no 2/2/2: {[c.assignment() for c in old]}"
                await asyncio.sleep(0.05)
            got_at = next(t for t, ev, parts in logs[2].events if ev == "assigned" and parts)
            return joined_at, got_at, logs, received
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for c in old:
                await c.close()

    thread = threading.Thread(target=producer)
    thread.start()
    try:
        joined_at, got_at, logs, received = asyncio.run(run())
    finally:
        stop_producing.set()
        thread.join()
    for i in (0, 1):
        during = [t for t in received[i] if joined_at <= t <= got_at]
        assert during, f"member {i} received nothing during the rebalance: {logs[i].events}"
        # (a member alone at first gave three to the second one before: not this rebalance)
        revoked = [parts for t, ev, parts in logs[i].events if ev == "revoked" and joined_at <= t <= got_at]
        # each gave up exactly the one partition that moved, never all three
        assert all(len(parts) == 1 for parts in revoked) and len(revoked) <= 1, logs[i].events
        assert not any(ev == "lost" for _, ev, _ in logs[i].events)


def test_static_member_restart_within_session_timeout_keeps_its_partitions(cluster, bootstrap, members) -> None:
    topic, group = "static", "g-static"
    create_topic(cluster, topic, partitions=6)
    common = dict(assignor="range", session_timeout_ms=15000)
    a = members(bootstrap, group, topic, "static-a", instance_id="inst-a", **common)
    b = members(bootstrap, group, topic, "static-b", instance_id="inst-b", **common)
    first = wait_for_assignment(cluster, group, topic, {"static-a", "static-b"}, 6, timeout_s=60)

    def told(p, client_id: str):
        """The member's listener heard its part of the stable assignment (it runs inside
        poll(), so it may lag the coordinator's view)."""
        assigned = [e for e in p.events() if e["ev"] == "assigned"]
        return assigned and set(assigned[-1]["partitions"]) == set(first.assignment()[client_id]) and assigned[-1]
    a_generation = wait_until(lambda: told(a, "static-a"), 30, "a's listener")["generation"]
    wait_until(lambda: told(b, "static-b"), 30, "b's listener")
    b_events_before = len([e for e in b.events() if e["ev"] in ("assigned", "revoked", "lost")])
    a.kill()
    a2 = members(bootstrap, group, topic, "static-a", instance_id="inst-a", **common)
    wait_until(lambda: a2.first_event("assigned") is not None and
               len([e for e in a2.events() if e["ev"] == "assigned"]) >= 1, 30, "the restarted member's assignment")
    assigned = [e for e in a2.events() if e["ev"] == "assigned"]
    assert set(assigned[-1]["partitions"]) == set(first.assignment()["static-a"])
    # KIP-345: the coordinator handed the old assignment back, no new generation
    assert assigned[-1]["generation"] == a_generation
    view = wait_for_assignment(cluster, group, topic, {"static-a", "static-b"}, 6, timeout_s=30)
    assert view.assignment() == first.assignment()
    # the other member saw no rebalance at all
    assert len([e for e in b.events() if e["ev"] in ("assigned", "revoked", "lost")]) == b_events_before
    for p in (a2, b):
        assert p.close() == 0, p.stderr_tail()


@pytest.mark.interop
@pytest.mark.parametrize("client,assignor,other_leads", [
    ("confluent", "range", False), ("confluent", "roundrobin", True), ("confluent", "cooperative-sticky", False),
    ("confluent", "cooperative-sticky", True), ("kafka-python", "roundrobin", True), ("aiokafka", "range", False)])
def test_ketch_and_another_client_share_a_group(cluster, bootstrap, members, tmp_path, client, assignor,
                                                other_leads) -> None:
    """Ketch's assignors and ConsumerProtocol bytes against librdkafka's, kafka-python's
    and aiokafka's: the member that joins first leads (the coordinator keeps its leader),
    so ``other_leads`` has the other client assign partitions to Ketch, else Ketch assigns."""
    topic, group = f"mixed-{client}-{assignor}-{other_leads}", f"g-mixed-{client}-{assignor}-{other_leads}"
    create_topic(cluster, topic, partitions=6)
    landed = produce(bootstrap, topic, per_partition=10, partitions=6, tag="mixed")

    def other() -> ConsumerProcess:
        return ConsumerProcess(str(tmp_path), client, bootstrap, group, topic, "mixed-other",
                               assignor=assignor, session_timeout_ms=6000)
    if other_leads:
        librd = other()
        wait_for_assignment(cluster, group, topic, {"mixed-other"}, 6, timeout_s=60)
        ketch = members(bootstrap, group, topic, "mixed-ketch", assignor=assignor)
    else:
        ketch = members(bootstrap, group, topic, "mixed-ketch", assignor=assignor)
        wait_for_assignment(cluster, group, topic, {"mixed-ketch"}, 6, timeout_s=60)
        librd = other()
    try:
        view = wait_for_assignment(cluster, group, topic, {"mixed-ketch", "mixed-other"}, 6, timeout_s=60)
        assert view.protocol == assignor
        assert sorted(len(p) for p in view.assignment().values()) == [3, 3]

        def all_read() -> bool:
            seen = {(p, o): v for proc in (ketch, librd) for p, o, v in proc.records()}
            return set(landed) <= set(seen)
        wait_until(all_read, 60, "the two consumers together read every record")
        seen = {(p, o): v for proc in (ketch, librd) for p, o, v in proc.records()}
        assert {k: seen[k] for k in landed} == landed
        # records written after the split go to whichever member owns their partition
        after = produce(bootstrap, topic, per_partition=5, partitions=6, tag="after-split")
        owner = {p: cid for cid, parts in view.assignment().items() for p in parts}

        def split_read() -> bool:
            return all(set(after) & {(p, o) for p, o, _ in proc.records()} ==
                       {k for k in after if owner[k[0]] == proc.client_id} for proc in (ketch, librd))
        wait_until(split_read, 60, "each member reads the new records of its own partitions, only those")
        assert librd.close() == 0 and ketch.close() == 0
    finally:
        librd.reap()


def test_a_member_that_stops_polling_leaves_and_loses_its_partitions(cluster, bootstrap) -> None:
    """max.poll.interval.ms: a member whose application stops calling poll() leaves the
    group (heartbeats alone do not keep it in), the other member gets every partition; a
    commit from the stale member is refused (CommitFailedError); when it polls again, its
    listener hears on_partitions_lost and it rejoins."""
    from clients.errors import CommitFailedError
    topic, group = "stuck", "g-stuck"
    create_topic(cluster, topic, partitions=6)

    class Log:
        def __init__(self) -> None:
            self.events: list[tuple[str, frozenset]] = []

        def on_partitions_assigned(self, c, parts):
            self.events.append(("assigned", frozenset(parts)))

        def on_partitions_revoked(self, c, parts):
            self.events.append(("revoked", frozenset(parts)))

        def on_partitions_lost(self, c, parts):
            self.events.append(("lost", frozenset(parts)))

    async def run() -> None:
        cfg = {"max.poll.interval.ms": 2000, "enable.auto.commit": False}
        busy = Consumer(ketch_config(bootstrap, group, "stuck-busy", **cfg))
        stuck = Consumer(ketch_config(bootstrap, group, "stuck-stuck", **cfg))
        busy_log, stuck_log = Log(), Log()
        await busy.start()
        await stuck.start()
        busy.subscribe([topic], listener=busy_log)
        stuck.subscribe([topic], listener=stuck_log)
        try:
            deadline = time.monotonic() + 60
            while sorted((len(busy.assignment()), len(stuck.assignment()))) != [3, 3]:
                assert time.monotonic() < deadline
                await asyncio.gather(busy.poll(100), stuck.poll(100))
            owned = stuck.assignment()
            # the stuck one stops polling; the busy one goes on and ends up with all six
            while len(busy.assignment()) != 6:
                assert time.monotonic() < deadline, "the stuck member's partitions never moved"
                await busy.poll(100)
            with pytest.raises(CommitFailedError, match="g-stuck"):
                await stuck.commit({tp: 0 for tp in owned})
            while not any(ev == "lost" for ev, _ in stuck_log.events):
                assert time.monotonic() < deadline, f"no on_partitions_lost: {stuck_log.events}"
                await stuck.poll(100)
            assert ("lost", frozenset(owned)) in stuck_log.events
            assert not any(ev == "revoked" for ev, _ in stuck_log.events)
            while sorted((len(busy.assignment()), len(stuck.assignment()))) != [3, 3]:
                assert time.monotonic() < deadline, "the stuck member never came back"
                await asyncio.gather(busy.poll(100), stuck.poll(100))
        finally:
            await busy.close()
            await stuck.close()

    asyncio.run(run())


def test_group_survives_its_coordinator_being_sigkilled(cluster, bootstrap, members) -> None:
    """The broker coordinating the group is SIGKILLed: the members find the new
    coordinator, form the group again there and go on reading, nothing skipped (manual
    commits after each poll). It restarts the broker it killed and waits for it."""
    from groups_helpers import find_coordinator
    topic, group = "coord-fail", "g-coord-fail"
    create_topic(cluster, topic, partitions=6)
    procs = [members(bootstrap, group, topic, f"cf-{i}", assignor="cooperative-sticky") for i in range(2)]
    wait_for_assignment(cluster, group, topic, {p.client_id for p in procs}, 6, timeout_s=60)
    first = produce(bootstrap, topic, per_partition=10, partitions=6, tag="before")
    wait_until(lambda: set(first) <= {(p, o) for s in procs for p, o, _ in s.records()}, 30, "the first records")
    coordinator = wait_until(lambda: find_coordinator(cluster, group), 30, "the coordinator")
    cluster.kill_node(coordinator)
    try:
        wait_until(lambda: find_coordinator(cluster, group) not in (None, coordinator), 60, "a new coordinator")
        second = produce(bootstrap, topic, per_partition=10, partitions=6, tag="after")
        wait_until(lambda: set(second) <= {(p, o) for s in procs for p, o, _ in s.records()}, 60,
                   "the members read on after the coordinator moved")
        wait_for_assignment(cluster, group, topic, {p.client_id for p in procs}, 6, timeout_s=60)
        for s in procs:
            assert s.alive(), s.stderr_tail()
            assert s.close() == 0, s.stderr_tail()
    finally:
        cluster.start_node(coordinator)
        cluster.wait_until_ready(timeout_s=60)      # the next test needs all three brokers


def test_a_slow_revocation_listener_keeps_its_session(cluster, bootstrap) -> None:
    """The revocation listener takes longer than session.timeout.ms (6 s): the member keeps
    heartbeating while it runs, so the coordinator does not remove it (it keeps its member
    id, and the other member is never handed all six partitions meanwhile)."""
    topic, group = "slow-listener", "g-slow-listener"
    create_topic(cluster, topic, partitions=6)
    events: list[str] = []
    other_sizes: list[int] = []

    class Slow:
        async def on_partitions_revoked(self, c, parts):
            events.append("revoked")
            await asyncio.sleep(7)                  # longer than the session timeout
            events.append("revoked-done")

        def on_partitions_assigned(self, c, parts):
            events.append(f"assigned-{len(parts)}")

        def on_partitions_lost(self, c, parts):
            events.append("lost")

    class Other:
        def on_partitions_assigned(self, c, parts):
            other_sizes.append(len(c.assignment()))

    async def run() -> tuple[str, str]:
        cfg = {"partition.assignment.strategy": "range"}
        slow = Consumer(ketch_config(bootstrap, group, "slow-0", **cfg))
        other = Consumer(ketch_config(bootstrap, group, "slow-1", **cfg))
        await slow.start()
        slow.subscribe([topic], listener=Slow())
        deadline = time.monotonic() + 60
        while len(slow.assignment()) != 6:
            assert time.monotonic() < deadline
            await slow.poll(100)
        member_before = slow.member_id
        await other.start()
        other.subscribe([topic], listener=Other())
        stop = asyncio.Event()

        async def keep_polling(c: Consumer) -> None:
            while not stop.is_set():
                await c.poll(100)
        tasks = [asyncio.create_task(keep_polling(c)) for c in (slow, other)]
        try:
            while sorted((len(slow.assignment()), len(other.assignment()))) != [3, 3]:
                assert time.monotonic() < deadline, events
                await asyncio.sleep(0.1)
            return member_before, slow.member_id
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            await other.close()
            await slow.close()

    member_before, member_after = asyncio.run(run())
    assert events[:4] == ["assigned-6", "revoked", "revoked-done", "assigned-3"], events
    assert "lost" not in events
    assert member_after == member_before, "the slow member was removed and joined as a new one"
    assert 6 not in other_sizes, other_sizes
