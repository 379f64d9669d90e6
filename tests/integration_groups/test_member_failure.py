"""Group members that die or leave, with unmodified clients in their own processes.

- SIGKILL and clean leave (one test per library): three consumers split the topic and
  commit what they process. The *victim* (session timeout 2 s) is SIGKILLed: the
  coordinator gives its partitions to the two others once its session expires, and they
  start exactly at the victim's committed offsets (nothing re-read below them, nothing
  skipped). Then the *leaver* closes (a LeaveGroup): its session timeout is 30 s, yet the
  coordinator drops it at once and the last consumer takes over all partitions, again from
  the committed offsets. The measured times are printed, not asserted.
- N7 (SCENARIOS.md): enable.auto.commit=false, commit after each processed batch; two
  consumers are SIGKILLed in the middle of a batch while others (one started as a
  replacement) go on. Every record is processed at least once, and everything a killed
  consumer processed after its last commit is processed again by another member
  (duplicates are expected and counted).
- L5: enable.auto.commit=true with a 100 ms interval (confluent-kafka: its auto-commit
  timer runs in librdkafka's thread, independent of the application). A consumer takes one
  batch, the automatic commit covers it (checked at the coordinator with OffsetFetch), and
  the consumer is SIGKILLed before processing it. Its successor resumes after the batch:
  those records are never processed (the documented at-most-once skip), yet the log still
  holds every one of them.
"""
from __future__ import annotations

import subprocess
import time

import pytest

from groups_helpers import (
    committed_offsets, create_topic, describe_group, produce, records_by_partition,
    wait_for_assignment, wait_until,
)

pytestmark = [pytest.mark.process, pytest.mark.interop]

PARTITIONS = 6
VICTIM_SESSION_MS = 2000
LONG_SESSION_MS = 30_000

FAILURE_VARIANTS = [
    ("kafka-python", "range"),
    ("aiokafka", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("kcat", "range"),
]


def wait_committed(cluster, group: str, topic: str, want: dict[int, int], what: str) -> None:
    wait_until(lambda: committed_offsets(cluster, group, topic, PARTITIONS) == want, 30, what)


def consumed(cs, produced) -> bool:
    return {(p, o) for c in cs for p, o, _ in c.records()} >= produced.keys()


def first_offsets(records: list[tuple[int, int, str]], partitions, above: int) -> dict[int, int]:
    """The first offset >= ``above`` read on each partition (what a new owner started at)."""
    by_p = records_by_partition(records)
    return {p: min(o for o in by_p.get(p, []) if o >= above) for p in partitions}


@pytest.mark.parametrize("client,assignor", FAILURE_VARIANTS, ids=[f"{c}-{a}" for c, a in FAILURE_VARIANTS])
def test_sigkilled_member_and_clean_leave(cluster, consumers, client: str, assignor: str) -> None:
    topic = f"fail-{client}"
    group = f"group-{topic}"
    bootstrap = cluster.spec.bootstrap_servers
    create_topic(cluster, topic, PARTITIONS)
    spawn = lambda cid, session_ms: consumers(cluster, client, group, topic, cid, assignor=assignor,  # noqa: E731
                                               session_timeout_ms=session_ms)
    victim = spawn("victim", VICTIM_SESSION_MS)
    leaver = spawn("leaver", LONG_SESSION_MS)
    survivor = spawn("survivor", LONG_SESSION_MS)
    view = wait_for_assignment(cluster, group, topic, {"victim", "leaver", "survivor"}, PARTITIONS)
    victim_partitions = view.assignment()["victim"]
    assert victim_partitions

    phase1 = produce(bootstrap, topic, 50, PARTITIONS, tag="phase1")
    wait_until(lambda: consumed([victim, leaver, survivor], phase1), 60, "phase 1 consumed")
    wait_committed(cluster, group, topic, {p: 50 for p in range(PARTITIONS)}, "phase 1 committed")

    # SIGKILL: no LeaveGroup. The group rebalances only when the victim's session expires.
    killed_at = time.monotonic()
    victim.kill()
    view2 = wait_for_assignment(cluster, group, topic, {"leaver", "survivor"}, PARTITIONS)
    print(f"\n{client}: group rebalanced {time.monotonic() - killed_at:.2f}s after SIGKILL "
          f"(victim session timeout {VICTIM_SESSION_MS} ms)")
    phase2 = produce(bootstrap, topic, 50, PARTITIONS, tag="phase2")
    wait_until(lambda: consumed([leaver, survivor], phase2), 60, "phase 2 consumed by the survivors")
    wait_committed(cluster, group, topic, {p: 100 for p in range(PARTITIONS)}, "phase 2 committed")
    after_kill = leaver.records() + survivor.records()
    # The new owners started exactly at the victim's committed offsets (50).
    assert first_offsets(after_kill, victim_partitions, 0) == {p: 50 for p in victim_partitions}

    # A clean close: LeaveGroup takes the leaver out now, long before its 30 s session ends.
    leaver_partitions = view2.assignment()["leaver"]
    closed_at = time.monotonic()
    assert leaver.close() == 0, leaver.stderr_tail()
    wait_until(lambda: (lambda g: g is not None and "leaver" not in g.members)(
        describe_group(cluster, group, topic)), LONG_SESSION_MS / 3000, "the leaver gone from the group")
    wait_for_assignment(cluster, group, topic, {"survivor"}, PARTITIONS, timeout_s=LONG_SESSION_MS / 3000)
    print(f"{client}: group rebalanced {time.monotonic() - closed_at:.2f}s after close() "
          f"(leaver session timeout {LONG_SESSION_MS} ms)")
    phase3 = produce(bootstrap, topic, 50, PARTITIONS, tag="phase3")
    wait_until(lambda: consumed([survivor], phase3), 60, "phase 3 consumed by the last member")
    assert survivor.close() == 0, survivor.stderr_tail()
    assert first_offsets(survivor.records(), leaver_partitions, 50) == {p: 100 for p in leaver_partitions}

    produced = {**phase1, **phase2, **phase3}
    seen: dict[tuple[int, int], int] = {}
    for c in (victim, leaver, survivor):
        for p, o, v in c.records():
            assert produced[(p, o)] == v
            seen[(p, o)] = seen.get((p, o), 0) + 1
    assert seen.keys() == produced.keys(), "a record was skipped"
    duplicates = sum(n - 1 for n in seen.values())
    print(f"{client}: {len(produced)} records, {duplicates} processed twice")
    # Everything was committed before each change of owner, so nothing is re-read here.
    assert duplicates == 0


def records_after_last_commit(events: list[dict]) -> set[tuple[int, int]]:
    last = max((i for i, e in enumerate(events) if e["ev"] == "committed"), default=-1)
    return {(e["p"], e["o"]) for e in events[last + 1:] if e["ev"] == "record"}


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_n7_manual_commit_after_processing_survives_sigkill_mid_batch(cluster, consumers, client: str) -> None:
    topic = f"n7-{client}"
    group = f"group-{topic}"
    create_topic(cluster, topic, PARTITIONS)
    produced = produce(cluster.spec.bootstrap_servers, topic, 200, PARTITIONS, tag="n7")
    spawn = lambda cid, **kw: consumers(cluster, client, group, topic, cid, commit="manual",  # noqa: E731
                                         session_timeout_ms=VICTIM_SESSION_MS, max_poll_records=50, **kw)
    def members() -> set[str]:
        g = describe_group(cluster, group, topic)
        return set() if g is None else set(g.members)

    def pause_then_kill(victim, successors) -> None:
        """The victim stops inside a batch, keeping its session (so the group cannot
        rebalance without it); once the successors have joined, it is SIGKILLed."""
        midbatch = wait_until(lambda: victim.first_event("midbatch"), 60, f"{victim.client_id} mid-batch")
        assert midbatch["unprocessed"], "the pause must fall inside a batch"
        want = {s.client_id for s in successors}
        wait_until(lambda: members() >= want, 30, f"{sorted(want)} joining {group}")
        victim.kill()

    # a takes everything and stops mid-batch; b and c join and wait for the rebalance;
    # a dies; b and c share the partitions until b stops mid-batch; d joins; b dies.
    a = spawn("n7-a", pause_at=30)
    wait_until(lambda: a.first_event("midbatch"), 60, "n7-a mid-batch")
    b = spawn("n7-b", pause_at=60)
    c = spawn("n7-c")
    pause_then_kill(a, [b, c])
    wait_for_assignment(cluster, group, topic, {"n7-b", "n7-c"}, PARTITIONS)
    d = spawn("n7-d")
    pause_then_kill(b, [c, d])
    everyone = [a, b, c, d]
    wait_until(lambda: consumed(everyone, produced), 90, "every record processed")
    for cons in everyone[2:]:
        assert cons.close() == 0, cons.stderr_tail()

    processed: dict[tuple[int, int], list[str]] = {}
    for cons in everyone:
        for p, o, v in cons.records():
            assert produced[(p, o)] == v
            processed.setdefault((p, o), []).append(cons.client_id)
    assert processed.keys() == produced.keys()          # at least once: nothing lost
    for victim in (a, b):
        redone = records_after_last_commit(victim.events())
        assert redone, f"{victim.client_id} had processed uncommitted records when killed"
        by_others = {k for k in redone if any(cid != victim.client_id for cid in processed[k])}
        assert by_others == redone, f"{victim.client_id}: uncommitted work not redone: {sorted(redone - by_others)[:5]}"
    duplicates = sum(len(v) - 1 for v in processed.values())
    print(f"\nN7 {client}: {len(produced)} records, {duplicates} processed more than once")
    assert duplicates >= sum(len(records_after_last_commit(v.events())) for v in (a, b))


def test_l5_auto_commit_then_crash_skips_the_batch(cluster, consumers, tmp_path) -> None:
    topic = "l5"
    group = "group-l5"
    create_topic(cluster, topic, PARTITIONS)
    produced = produce(cluster.spec.bootstrap_servers, topic, 100, PARTITIONS, tag="l5")
    crasher = consumers(cluster, "confluent", group, topic, "l5-crasher", commit="auto",
                        auto_commit_interval_ms=100, session_timeout_ms=VICTIM_SESSION_MS,
                        max_poll_records=100, hold_after_autocommit=True)
    held = wait_until(lambda: crasher.first_event("autocommitted"), 60, "the automatic commit")
    polled = {(p, o): v for p, o, v in crasher.first_event("polled")["records"]}
    commits = {int(p): o for p, o in held["offsets"].items()}
    # The coordinator holds the automatic commit: the batch counts as consumed.
    at_broker = committed_offsets(cluster, group, topic, PARTITIONS)
    assert {p: at_broker[p] for p in commits} == commits
    assert all(at_broker[p] == -1 for p in range(PARTITIONS) if p not in commits)
    crasher.kill()                                      # crash: committed, never processed

    successor = consumers(cluster, "confluent", group, topic, "l5-successor", commit="auto",
                          auto_commit_interval_ms=100, session_timeout_ms=VICTIM_SESSION_MS)
    rest = produced.keys() - polled.keys()
    wait_until(lambda: {(p, o) for p, o, _ in successor.records()} >= rest, 60, "the successor to finish")
    assert successor.close() == 0, successor.stderr_tail()

    processed = {(p, o) for p, o, _ in successor.records()}
    assert not processed & polled.keys(), "the successor re-read records covered by the commit"
    skipped = produced.keys() - processed
    assert skipped == polled.keys() and len(skipped) > 0
    # It resumed exactly at the automatic commit (a partition read to its end has nothing left).
    by_p = records_by_partition(successor.records())
    assert {p: min(by_p[p]) for p in commits if p in by_p} == {p: o for p, o in commits.items() if o < 100}
    print(f"\nL5: {len(skipped)} of {len(produced)} records skipped by processing (at-most-once)")

    # The log itself lost nothing: a plain reader (no group) sees every skipped record.
    out = subprocess.run(["kcat", "-C", "-b", cluster.spec.bootstrap_servers, "-t", topic, "-o", "beginning",
                          "-e", "-q", "-f", r"%p %o %s\n"], capture_output=True, timeout=60, check=True)
    in_log = {}
    for line in out.stdout.decode().splitlines():
        p, o, v = line.split(" ", 2)
        in_log[(int(p), int(o))] = v
    assert in_log == produced
    assert all(in_log[k] == polled[k] for k in skipped)
