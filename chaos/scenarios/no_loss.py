"""The promises of SCENARIOS.md, N1-N13 and N15, and D1 (disk faults on restart).

Each function is one scenario: setup, workload, faults (as data), then ``read_back``. The
comments say how a hazard is *arranged* where timing matters; every arrangement is checked
(``ctx.check``) rather than assumed, so a scenario cannot pass without testing its case.
"""
from __future__ import annotations

import os
import threading
import time
from collections import Counter

from chaos.checker import Expect, acked_after
from chaos.cluster import ChaosCluster, ChaosTimeout, wait_until
from chaos.faults import (
    Cut, Delay, DropResponses, FlipByte, Isolate, Kill, KillMany, Pause, Restart, Resume,
    Terminate, TornTail,
)
from chaos.scenarios.base import Context, Scenario, elapsed
from chaos.workload import (
    ACKED, FAILED, UNKNOWN, ConfluentProducer, ConsumerWorker, KetchProducer, TxnWorker,
    checkpointed_high_watermark, log_end_on_disk, read_isolated, read_partition,
)
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode

__all__ = ["NO_LOSS_SCENARIOS"]

SESSION_TIMEOUT_S = 2.5          # FAST_CONTROLLER's broker.session.timeout.ms
RAFT_ELECTION_TIMEOUT_MAX_S = 0.3    # quorum's ketch.raft.election.timeout.max.ms default

# What a producer may see while leadership moves (SCENARIOS.md N1).
RETRIABLE_SEEN = {
    "NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "REQUEST_TIMED_OUT", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
    "ConnectionClosedError", "ConnectionRefusedError", "ConnectionResetError", "TimeoutError",
    "OSError", "BrokenPipeError",
}


def wait_acks(ctx: Context, more: int, timeout_s: float = 60.0, producer: str | None = None,
              partition: int | None = None) -> None:
    """Until ``more`` further records have been acknowledged."""
    base = ctx.history.count(ACKED, partition, producer)
    wait_until(lambda: ctx.history.count(ACKED, partition, producer) >= base + more, timeout_s,
               f"{more} more acknowledged records" + (f" from {producer}" if producer else ""))


def start_producers(ctx: Context, cluster, topic: str, partitions: list[int], *,
                    confluent: bool = True, **ketch_kwargs) -> list:
    """A Ketch-codec producer (idempotent, acks=all unless told) and a confluent-kafka one
    (idempotent, acks=all), both in the background."""
    kw = {"acks": -1, "idempotent": True, "records_per_batch": 5, **ketch_kwargs}
    ketch = KetchProducer(cluster, ctx.history, topic, "ketch", **kw)
    ctx.closing(ketch.close)
    ketch.start(partitions, interval_s=0.02)
    out = [ketch]
    if confluent:
        conf = ConfluentProducer(cluster, ctx.history, topic, "confluent", rate=300)
        ctx.closing(conf.stop)
        conf.start(partitions)
        out.append(conf)
    return out


def stop_all(producers: list) -> None:
    for p in producers:
        p.stop()


def only_retriable_errors(ctx: Context) -> None:
    errors = ctx.history.errors()
    odd = {e: n for e, n in errors.items() if e not in RETRIABLE_SEEN}
    ctx.check("producers saw only retriable errors", not odd, f"seen {errors}")
    failed = ctx.history.count(FAILED) + ctx.history.count(UNKNOWN)
    ctx.check("every record was eventually acknowledged", failed == 0,
              f"{failed} failed or unknown")


# ---------------------------------------------------------------- N1


def n1(ctx: Context) -> None:
    """SIGKILL the partition leader while producing; restart it; repeat."""
    c = ctx.cluster()
    topic = "n1"
    c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0])
    wait_acks(ctx, 100)
    failovers = []
    for i in range(ctx.profile.repeats):
        before = c.latest_view(topic, 0)
        victim = before.leader
        t_kill = time.monotonic()
        ctx.inject(c, Kill(victim))
        after = c.wait_partition(topic, 0, lambda s: s.leader not in (-1, victim)
                                 and s.leader_epoch > before.leader_epoch, 30, "a new leader")
        failovers.append(elapsed(t_kill))
        ctx.check(f"kill {i + 1}: new leader {after.leader} came from the ISR {list(before.isr)}",
                  after.leader in before.isr)
        wait_acks(ctx, 50)
        ctx.inject(c, Restart(victim))
        c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, f"broker {victim} back in the ISR")
        wait_acks(ctx, 20)
    stop_all(producers)
    ctx.window = (t0, time.monotonic())
    ctx.note(f"leader failovers (kill to new leader in metadata): {failovers} s")
    ctx.extra["failover_s"] = failovers
    only_retriable_errors(ctx)
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- N2


class TopicCreator:
    """Creates topics ``<prefix>-created-<i>`` one after another until stopped, keeping each
    try's (name, error code; -1: no answer): the metadata writes N2 and N14 check survive."""

    def __init__(self, ctx: Context, cluster: ChaosCluster, prefix: str) -> None:
        self.ctx = ctx
        self.cluster = cluster
        self.prefix = prefix
        self.created: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{prefix}-creator", daemon=True)
        ctx.closing(self._stop.set)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def acknowledged(self) -> list[str]:
        return [name for name, code in self.created if code == ErrorCode.NONE]

    def check_every_acknowledged_topic_exists(self) -> list[str]:
        """Checks every acknowledged topic has a leader on every live broker; returns them."""
        ok = self.acknowledged()
        missing = []
        for b in self.cluster.alive_brokers():
            for t in self.cluster.metadata(ok, b).topics:
                if t.error_code != ErrorCode.NONE or len(t.partitions) != 1 or t.partitions[0].leader_id < 0:
                    missing.append((b, t.name, t.error_code))
        self.ctx.check(f"all {len(ok)} topics whose creation succeeded exist with a leader on "
                       "every broker", bool(ok) and not missing, f"missing {missing[:5]}")
        return ok

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"{self.prefix}-created-{i}"
            i += 1
            try:
                code = self.cluster.create_topic(name, 1, 3, wait_s=20, wait_full_isr=False)
            except (OSError, ChaosTimeout) as e:
                code = -1
                self.ctx.history.event(f"create {name}: {type(e).__name__}")
            self.created.append((name, code))
            time.sleep(0.1)


def n2(ctx: Context) -> None:
    """SIGKILL the active controller repeatedly while topics are created and records
    produced to existing leaders."""
    c = ctx.cluster()
    topic = "n2"
    c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    creator = TopicCreator(ctx, c, "n2")
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0])
    creator.start()
    wait_acks(ctx, 100)
    failovers = []
    bound_s = RAFT_ELECTION_TIMEOUT_MAX_S + 2.0
    for i in range(min(ctx.profile.repeats, 3)):
        active = c.wait_active_controller()
        t_kill = time.monotonic()
        ctx.inject(c, Kill(active))
        new = c.wait_active_controller(30, not_in=(active,))
        failovers.append(elapsed(t_kill))
        ctx.check(f"kill {i + 1}: controller {new} active {failovers[-1]}s after {active} died "
                  f"(bound {bound_s:g}s)", failovers[-1] <= bound_s)
        wait_acks(ctx, 50)
        ctx.inject(c, Restart(active))
        wait_until(lambda: (q := c.describe_quorum(active)) is not None and q[0] >= 0, 30,
                   f"controller {active} to follow the new leader")
    creator.stop()
    stop_all(producers)
    ctx.window = (t0, time.monotonic())
    ok = creator.check_every_acknowledged_topic_exists()
    ctx.note(f"controller failovers: {failovers} s; topics created {len(ok)} of {len(creator.created)} tries")
    ctx.extra["controller_failover_s"] = failovers
    only_retriable_errors(ctx)
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- N3


def n3(ctx: Context) -> None:
    """Lose one controller for good, then a second: 2 of 3 works fully, 1 of 3 freezes
    metadata but brokers keep serving; after the restart everything resumes."""
    c = ctx.cluster(broker_props={"request.timeout.ms": "8000"})
    topic = "n3"
    c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0], confluent=False)
    wait_acks(ctx, 50)
    first = c.wait_active_controller()
    ctx.inject(c, Kill(first))
    second = c.wait_active_controller(30, not_in=(first,))
    # 2 of 3: everything works, topic creation and leader changes included.
    code = c.create_topic("n3-two-of-three", 2, 3)
    ctx.check("2 of 3 controllers: CreateTopics succeeds", code == ErrorCode.NONE, ErrorCode(code).name)
    # A controlled shutdown (SIGTERM) needs the controller to move leadership first.
    before = c.latest_view(topic, 0)
    code = c.terminate(before.leader)
    moved = c.latest_view(topic, 0)
    ctx.check("2 of 3 controllers: a controlled shutdown moved the leadership and exited cleanly",
              moved.leader not in (-1, before.leader) and code == 0, f"exit {code}, {moved}")
    ctx.inject(c, Restart(before.leader))
    c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, "full ISR again")
    before = c.latest_view(topic, 0)
    ctx.inject(c, Kill(before.leader))
    after = c.wait_partition(topic, 0, lambda s: s.leader not in (-1, before.leader), 30, "a new leader")
    ctx.check("2 of 3 controllers: a new leader is elected after a crash", after.leader_epoch > before.leader_epoch)
    ctx.inject(c, Restart(before.leader))
    c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, "full ISR again")
    wait_acks(ctx, 20)
    # 1 of 3: no majority. Metadata is frozen; existing partitions keep serving.
    ctx.inject(c, Kill(second))
    frozen = c.latest_view(topic, 0)
    t_frozen = time.monotonic()
    wait_until(lambda: c.active_controller() is None, 30, "no active controller")
    t_create = time.monotonic()
    code = c.create_topic("n3-one-of-three", 1, 3, wait_s=5)
    took = elapsed(t_create)
    ctx.check("1 of 3 controllers: CreateTopics fails with a clear error",
              code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER),
              f"{ErrorCode(code).name} after {took}s")
    acked = ctx.history.count(ACKED)
    wait_acks(ctx, 50, timeout_s=30)
    ctx.check("1 of 3 controllers: brokers keep serving the existing partition",
              ctx.history.count(ACKED) >= acked + 50)
    still = c.latest_view(topic, 0)
    ctx.check("1 of 3 controllers: no leader change", (still.leader, still.leader_epoch) ==
              (frozen.leader, frozen.leader_epoch), f"{frozen} -> {still}")
    ctx.note(f"metadata frozen for {elapsed(t_frozen)} s")
    # Restart both: everything resumes.
    ctx.inject(c, Restart(first))
    ctx.inject(c, Restart(second))
    c.wait_active_controller(30)
    code = c.create_topic("n3-restored", 1, 3)
    ctx.check("after the restart: CreateTopics succeeds", code == ErrorCode.NONE, ErrorCode(code).name)
    names = [topic, "n3-two-of-three", "n3-restored"]
    meta = c.metadata(names)
    present = {t.name: len(t.partitions) for t in meta.topics if t.error_code == ErrorCode.NONE}
    ctx.check("no metadata record lost: every created topic is there with its partitions",
              present == {topic: 1, "n3-two-of-three": 2, "n3-restored": 1}, str(present))
    last = c.latest_view(topic, 0)
    ctx.check("no metadata record lost: the leader epoch did not go back",
              last.leader_epoch >= after.leader_epoch, f"{after.leader_epoch} -> {last.leader_epoch}")
    wait_acks(ctx, 20)
    stop_all(producers)
    ctx.window = (t0, time.monotonic())
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- N4


def n4(ctx: Context) -> None:
    """KIP-101's hazard. RF=2, min.insync.replicas=1: the follower holds the newest acked
    records but a stale high watermark; it restarts; the leader dies before the follower
    can re-fetch. The follower must not truncate to its stale HW.

    Arrangement: the follower B is SIGKILLed right after the last ack, which leaves its
    replication-offset-checkpoint (written every 5 s) behind its log end; that is checked
    on disk, and retried if the checkpoint happened to be fresh. B restarts with its link
    to the leader cut, so it cannot re-fetch; then the leader A is killed."""
    c = ctx.cluster(proxied_links=True)
    topic = "n4"
    a, b = 1, 2
    c.create_topic(topic, assignment={0: [a, b]}, configs={"min.insync.replicas": "1"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, idempotent=True, records_per_batch=10)
    ctx.closing(producer.close)
    arranged = None
    for attempt in range(4):
        attempts = producer.send(0, ctx.profile.records)
        acked_end = max(x.offset for x in attempts if x.outcome == ACKED) + 1
        ctx.inject(c, Kill(b))
        leo = log_end_on_disk(c, b, topic, 0)
        hw = checkpointed_high_watermark(c, b, topic, 0)
        if leo >= acked_end and (hw or 0) < leo:
            arranged = (hw or 0, leo, acked_end)
            break
        ctx.note(f"try {attempt + 1}: follower's checkpoint was fresh (HW {hw}, LEO {leo}); again")
        ctx.inject(c, Restart(b))
        c.wait_partition(topic, 0, lambda s: len(s.isr) == 2, 60, "follower back in the ISR")
    if not ctx.check("arranged: the follower holds acked records above its checkpointed HW",
                     arranged is not None):
        return
    hw, leo, acked_end = arranged
    ctx.note(f"follower {b}: checkpointed HW {hw}, log end {leo}, acked up to {acked_end}")
    ctx.inject(c, Cut(b, a, "both"))
    ctx.inject(c, Restart(b))
    leo_after = log_end_on_disk(c, b, topic, 0)
    ctx.check(f"the restarted follower kept its log (LEO {leo_after}) instead of truncating to HW {hw}",
              leo_after >= acked_end)
    ctx.inject(c, Kill(a))
    # KRaft removed the restarted follower from the ISR when it re-registered, so with
    # unclean election disabled the partition waits for the leader.
    state = c.wait_partition(topic, 0, lambda s: s.leader != a, 30, "the old leader to lose leadership")
    ctx.note(f"with the leader dead: leader {state.leader}, ISR {list(state.isr)}")
    if state.leader == b:
        ctx.check("the follower leads with every acked record", log_end_on_disk(c, b, topic, 0) >= acked_end)
    c.heal()
    ctx.inject(c, Restart(a))
    c.wait_partition(topic, 0, lambda s: len(s.isr) == 2, 60, "both replicas in the ISR")
    producer.send(0, 20)
    ctx.read_back(c, topic, [0])
    # The follower asked the leader (OffsetForLeaderEpoch) once it could: their logs agree,
    # so it truncated nothing and fetched on from its own log end.
    with open(c.node(b).log, errors="replace") as f:
        cuts = [line.strip() for line in f if f"{topic}-0: truncating" in line]
    ctx.check("the follower truncated nothing after asking the leader", not cuts, "; ".join(cuts)[:300])


# ---------------------------------------------------------------- N5


def n5(ctx: Context) -> None:
    """Every replica SIGKILLed at nearly the same moment with unflushed writes (nothing is
    fsynced on the produce path; a process crash keeps the page cache), then restarted
    in the other order. Repeated."""
    c = ctx.cluster()
    topic = "n5"
    c.create_topic(topic, assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0])
    for i in range(max(2, ctx.profile.repeats // 2)):
        wait_acks(ctx, 100)
        state = c.latest_view(topic, 0)
        order = (state.leader,) + tuple(r for r in state.replicas if r != state.leader)
        ctx.inject(c, KillMany(order))
        # Restart only once the controller has fenced them all, so that who may lead
        # is decided by the ISR, and the restart order matters.
        wait_until(lambda: c.unfenced_brokers() == set(), 30, "every broker fenced")
        for node in reversed(order):
            ctx.inject(c, Restart(node))
        back = c.wait_partition(topic, 0, lambda s: s.leader >= 0, 60, "a leader again")
        ctx.note(f"round {i + 1}: killed {list(order)}, restarted {list(reversed(order))}; "
                 f"leader {back.leader} at epoch {back.leader_epoch}")
        c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, "full ISR")
    wait_acks(ctx, 50)
    stop_all(producers)
    ctx.window = (t0, time.monotonic())
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- N6


def n6(ctx: Context) -> None:
    """Idempotent producers; a proxy drops Produce responses after the broker appended, so
    the producers retry batches that are already in the log."""
    c = ctx.cluster(client_proxies=True)
    topic = "n6"
    c.create_topic(topic, assignment={0: [1, 2, 3], 1: [2, 3, 1]}, configs={"min.insync.replicas": "2"})
    proxies = {b: c.hub.links[f"client->{b}"].listen_port for b in c.broker_ids}
    route = {("127.0.0.1", c.port(b)): ("127.0.0.1", p) for b, p in proxies.items()}
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in proxies.values())
    t0 = time.monotonic()
    ketch = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, idempotent=True,
                          records_per_batch=5, route=route)
    ctx.closing(ketch.close)
    ketch.start([0, 1], interval_s=0.02)
    conf = ConfluentProducer(c, ctx.history, topic, "confluent", rate=300, bootstrap=bootstrap,
                             extra={"max.in.flight.requests.per.connection": 5})
    ctx.closing(conf.stop)
    conf.start([0, 1])
    wait_acks(ctx, 100)
    planned = 0

    def drop_rounds(rounds: int, producer: str | None) -> None:
        nonlocal planned
        for i in range(rounds):
            leader = c.leader_of(topic, i % 2)
            ctx.inject(c, DropResponses(leader, count=3))
            planned += 3
            link = c.hub.links[f"client->{leader}"]
            wait_until(lambda: link.drops_pending == 0, 60, "the planned responses to be dropped")
            wait_acks(ctx, 30, producer=producer)
    drop_rounds(ctx.profile.repeats * 2, None)       # both producers
    ketch.stop()
    ctx.event("the Ketch producer stops: the next drops hit librdkafka's requests alone")
    drop_rounds(ctx.profile.repeats, "confluent")
    conf.stop()
    ctx.window = (t0, time.monotonic())
    dropped = sum(c.hub.stats(f"client->{b}").responses_dropped for b in c.broker_ids)
    ctx.check(f"the proxy dropped {dropped} Produce responses after they were served",
              dropped >= planned, f"planned {planned}")
    retried = ctx.history.errors("ketch").get("ConnectionClosedError", 0)
    ctx.check("the Ketch producer retried after losing answers", retried > 0, f"{retried} retried batches")
    only_retriable_errors(ctx)
    for p in (0, 1):
        ctx.read_back(c, topic, [p])


# ---------------------------------------------------------------- N7


def n7(ctx: Context) -> None:
    """A consumer group committing after processing; consumers SIGKILLed mid-batch; the
    group rebalances. Every record is processed at least once."""
    c = ctx.cluster()
    topic = "n7"
    c.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, idempotent=True, records_per_batch=10)
    ctx.closing(producer.close)
    for p in range(3):
        producer.send(p, ctx.profile.group_records // 3)
    acked = {a.value.decode() for a in ctx.history.snapshot() if a.outcome == ACKED}
    workers: list[ConsumerWorker] = []

    def new_worker() -> ConsumerWorker:
        w = ConsumerWorker(c.bootstrap_servers, topic, "n7-group",
                           os.path.join(ctx.workdir, f"worker-{len(workers)}.log"),
                           process_ms=25, batch=20,
                           client_properties=c.client_properties_file).start()
        workers.append(w)
        ctx.event(f"consumer worker {len(workers) - 1} started (pid {w.pid})")
        return w
    ctx.closing(lambda: [w.kill() for w in workers])
    live = [new_worker(), new_worker()]

    def processed() -> set[str]:
        return {v for w in workers for _, _, v in w.processed()}
    kills = 0
    for i in range(min(ctx.profile.repeats, 3)):
        # Mid-batch: the victim has processed records it has not committed yet.
        victim = wait_until(lambda: next((w for w in live if w.uncommitted() >= 3), None)
                            or acked <= processed(), 90, "a consumer in the middle of a batch")
        if victim is True:
            break       # everything got processed first
        victim.kill()
        left = victim.uncommitted()
        ctx.event(f"SIGKILL consumer pid {victim.pid} with {left} processed, uncommitted records")
        ctx.check(f"kill {i + 1}: the consumer died mid-batch", left > 0, f"{left} uncommitted")
        kills += 1
        live.remove(victim)
        fresh = new_worker()
        live.append(fresh)
        # The group rebalanced when the replacement processes something.
        wait_until(lambda: fresh.processed() or acked <= processed(), 90, "the rebalanced group to go on")
    ctx.check("at least two consumers were killed mid-batch", kills >= 2, f"{kills} kills")
    wait_until(lambda: acked <= processed(), 180, "every acked record to be processed")
    for w in workers:
        w.terminate()
    total = sum(len(w.processed()) for w in workers)
    unique = processed()
    duplicates = total - len(unique)
    ctx.extra.update(processed=total, processed_unique=len(unique), processed_duplicates=duplicates)
    ctx.check("every acked record was processed at least once", acked <= unique,
              f"{len(acked - unique)} never processed")
    ctx.note(f"{kills} consumers killed mid-batch; {duplicates} records processed twice (allowed)")
    ctx.read_back(c, topic, [0, 1, 2])


# ---------------------------------------------------------------- N8


def n8(ctx: Context) -> None:
    """Unclean election disabled; every replica down; the stale follower (out of the ISR)
    comes back first: the partition must stay offline until an ISR member returns."""
    c = ctx.cluster()
    topic = "n8"
    a, b, stale = 1, 2, 3
    c.create_topic(topic, assignment={0: [a, b, stale]}, configs={"min.insync.replicas": "2"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, idempotent=True, records_per_batch=10)
    ctx.closing(producer.close)
    producer.send(0, ctx.profile.records)
    ctx.inject(c, Pause(stale))
    c.wait_partition(topic, 0, lambda s: stale not in s.isr, 30, f"broker {stale} out of the ISR")
    written = producer.send(0, ctx.profile.records)
    ctx.check("records acknowledged after the follower fell out of the ISR",
              all(x.outcome == ACKED for x in written))
    ctx.inject(c, Kill(stale))
    ctx.inject(c, Kill(b))
    ctx.inject(c, Kill(a))
    ctx.inject(c, Restart(stale))
    # Once the controller has fenced the dead ISR members, the partition must stay
    # offline, with a clear error, for as long as none is back (3 s of checks, more
    # than ten controller poll intervals).
    wait_until(lambda: c.unfenced_brokers() == {stale}, 30, f"only broker {stale} unfenced")
    states = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        states.append(c.partition(topic, 0, stale))
        time.sleep(0.2)
    offline = all(s.leader == -1 and s.error_code == ErrorCode.LEADER_NOT_AVAILABLE for s in states)
    ctx.check("the stale follower alone does not lead: no leader, LEADER_NOT_AVAILABLE", offline,
              f"last {states[-1]}")
    probe = KetchProducer(c, ctx.history, topic, "probe", acks=-1, delivery_timeout_s=2, pin_broker=stale)
    ctx.closing(probe.close)
    refused = probe.send(0, 1)[0]
    ctx.check("a write to the stale follower is refused", refused.outcome == FAILED, str(refused.error))
    isr = states[-1].isr
    ctx.note(f"ISR while offline: {list(isr)}")
    ctx.inject(c, Restart(isr[0]))
    back = c.wait_partition(topic, 0, lambda s: s.leader >= 0, 30, "a leader from the ISR")
    ctx.check("an ISR member leads again", back.leader in isr, f"leader {back.leader}")
    for node in (a, b):
        if not c.is_running(node):
            ctx.inject(c, Restart(node))
    producer.send(0, 20)
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- N9


def n9(ctx: Context) -> None:
    """SIGSTOP a follower longer than replica.lag.time.max.ms (3 s), then SIGCONT. The
    session timeout is long (20 s), so only the leader's lag check can drop it."""
    c = ctx.cluster(controller_props={"broker.session.timeout.ms": "20000"})
    topic = "n9"
    c.create_topic(topic, assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0])
    wait_acks(ctx, 100)
    follower = 3
    ctx.inject(c, Pause(follower))
    t_pause = time.monotonic()
    shrunk = c.wait_partition(topic, 0, lambda s: follower not in s.isr, 30,
                              f"broker {follower} out of the ISR (committed)")
    ctx.note(f"ISR shrank to {list(shrunk.isr)} {elapsed(t_pause)} s after the pause")
    acked = ctx.history.count(ACKED)
    wait_acks(ctx, 100, timeout_s=30)
    ctx.check("writes continue with the remaining ISR", ctx.history.count(ACKED) >= acked + 100)
    ctx.inject(c, Resume(follower))
    t_resume = time.monotonic()
    # Every live broker's view: the resumed follower's own (stale) image still shows it in
    # the ISR from before the pause.
    c.wait_partition(topic, 0, lambda s: follower in s.isr, 60, f"broker {follower} back in the ISR",
                     everywhere=True)
    ctx.note(f"follower rejoined the ISR {elapsed(t_resume)} s after SIGCONT")
    wait_acks(ctx, 50)
    stop_all(producers)
    ctx.window = (t0, time.monotonic())
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- N10


def n10(ctx: Context) -> None:
    """Cut the leader off from the controllers and the followers (fault proxies), not from
    the producers. It is fenced and replaced; it cannot complete acks=all writes; after
    healing it truncates to the new leader."""
    c = ctx.cluster(proxied_links=True)
    topic = "n10"
    old = 1
    c.create_topic(topic, assignment={0: [old, 2, 3]}, configs={"min.insync.replicas": "2"})
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0])
    pinned = KetchProducer(c, ctx.history, topic, "pinned", acks=-1, records_per_batch=5,
                           pin_broker=old, delivery_timeout_s=12, request_timeout_s=5)
    ctx.closing(pinned.close)
    pinned.start([0], interval_s=0.05)
    wait_acks(ctx, 100)
    before = c.latest_view(topic, 0)
    ctx.inject(c, Isolate(old))
    t_cut = time.monotonic()
    after = c.wait_partition(topic, 0, lambda s: s.leader not in (-1, old)
                             and s.leader_epoch > before.leader_epoch, 30, "a new leader")
    ctx.check(f"the controller elected {after.leader} at a higher leader epoch "
              f"({before.leader_epoch} -> {after.leader_epoch})", True)
    # Keep it isolated until the old leader has let an acks=all write time out (its
    # followers cannot fetch, and it cannot shrink the ISR without the controller).
    timed_out = pinned.error_counts.get("REQUEST_TIMED_OUT", 0)
    wait_until(lambda: pinned.error_counts.get("REQUEST_TIMED_OUT", 0) > timed_out, 30,
               "the isolated leader to time out an acks=all write")
    t_heal = time.monotonic()
    c.heal()
    pinned.stop()
    stop_all(producers)
    ctx.window = (t0, time.monotonic())
    # The batch in flight at the cut may complete just after it (its followers had
    # fetched it); nothing sent to the isolated leader may be acknowledged later.
    late = [x for x in ctx.history.snapshot() if x.producer == "pinned" and x.outcome == ACKED
            and x.t_done > t_cut + 0.5]
    tries = pinned.error_counts.get("REQUEST_TIMED_OUT", 0)
    ctx.check(f"the isolated leader acknowledged no acks=all write while cut off "
              f"({tries} tries timed out there)", not late and tries > 0,
              f"{len(late)} acknowledged after the cut")
    ctx.note(f"isolated for {round(t_heal - t_cut, 1)} s")
    c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, f"broker {old} back in the ISR")
    ctx.read_back(c, topic, [0])
    # What it appended while isolated (the timed-out write) is cut when it follows again.
    with open(c.node(old).log, errors="replace") as f:
        cuts = [line.strip() for line in f if f"{topic}-0: truncating" in line]
    ctx.check("the old leader truncated its isolated suffix when it rejoined", bool(cuts),
              cuts[-1][-120:] if cuts else "no truncation logged")


# ---------------------------------------------------------------- N11


def n11(ctx: Context) -> None:
    """acks=all on a topic created with min.insync.replicas=1. A follower is paused until
    it leaves the ISR; producers keep writing (acked by the two left). Then
    min.insync.replicas is raised to 3 on the live topic while the follower stays paused.

    From the moment the leader describes the change (its metadata image has it), no
    acks=all write may be acknowledged until the follower is back: the ISR cannot hold 3
    while the follower is stopped, so every ack in that window came from fewer than 3
    replicas. The producers must see NOT_ENOUGH_REPLICAS instead (checked, so the window
    is not empty). Judged by when a request left (``checker.acked_after``): an answer
    already on its way when the change landed is not counted, and nothing needs a timing
    allowance. After SIGCONT the follower rejoins, the retried writes are acknowledged by
    all three, and nothing acknowledged is lost."""
    c = ctx.cluster()
    topic = "n11"
    leader, follower = 1, 3
    c.create_topic(topic, assignment={0: [leader, 2, follower]}, configs={"min.insync.replicas": "1"})
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0])
    ketch = producers[0]
    wait_acks(ctx, 100)
    ctx.inject(c, Pause(follower))
    c.wait_partition(topic, 0, lambda s: follower not in s.isr, 30, f"broker {follower} out of the ISR")
    acked = ctx.history.count(ACKED)
    wait_acks(ctx, 50, timeout_s=30)
    ctx.check("min.insync.replicas=1: acks=all writes go on with two in the ISR",
              ctx.history.count(ACKED) >= acked + 50)
    t_alter = time.monotonic()
    code, message = c.alter_topic_configs(topic, {"min.insync.replicas": "3"})
    ctx.check("IncrementalAlterConfigs min.insync.replicas=3 committed", code == ErrorCode.NONE,
              f"{ErrorCode(code).name}: {message}")
    ctx.event("min.insync.replicas=3 committed")
    wait_until(lambda: c.topic_config(topic, "min.insync.replicas", leader) == "3", 15,
               f"leader {leader} to describe min.insync.replicas=3")
    t_visible = time.monotonic()
    ctx.event(f"leader {leader} describes min.insync.replicas=3 ({elapsed(t_alter)} s after the request)")
    refused = ketch.error_counts.get("NOT_ENOUGH_REPLICAS", 0)
    # Keep the follower stopped while a good number of tries are refused.
    wait_until(lambda: ketch.error_counts.get("NOT_ENOUGH_REPLICAS", 0) >= refused + 20, 30,
               "acks=all writes refused with NOT_ENOUGH_REPLICAS")
    still_out = c.partition(topic, 0, leader)
    ctx.check(f"broker {follower} was still out of the ISR when resumed", follower not in still_out.isr,
              str(still_out))
    t_resume = time.monotonic()
    ctx.inject(c, Resume(follower))
    # Every live broker's view: the resumed follower's own image is stale (it still shows
    # the ISR from before the pause) until it catches up.
    c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, f"broker {follower} back in the ISR",
                     everywhere=True)
    ctx.event(f"follower rejoined the ISR {elapsed(t_resume)} s after SIGCONT")
    wait_acks(ctx, 50)
    stop_all(producers)
    ctx.window = (t0, time.monotonic())
    attempts = ctx.history.snapshot()
    late = acked_after(attempts, t_visible, t_resume)
    sent = sum(1 for a in attempts if t_visible < a.t_send < t_resume)
    ctx.check(f"no write sent after the change was acknowledged while broker {follower} was paused "
              f"({sent} records first sent in that window)", not late and sent > 0,
              f"{len(late)} acknowledged, e.g. {[(a.producer, a.seq, a.offset) for a in late[:3]]}")
    in_window = sum(1 for a in attempts if a.outcome == ACKED and t_visible < (a.t_done or 0) < t_resume)
    refusals = ketch.error_counts.get("NOT_ENOUGH_REPLICAS", 0) - refused
    ctx.note(f"{refusals} tries refused with NOT_ENOUGH_REPLICAS in {round(t_resume - t_visible, 1)} s "
             f"after the change; acks completed in that window: {in_window} (requests sent before it)")
    ctx.extra["refused_not_enough_replicas"] = refusals
    only_retriable_errors(ctx)
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- N12


def transaction_coordinator(cluster, transactional_id: str) -> int:
    """The broker coordinating a transactional id (FindCoordinator, key type 1)."""
    cls = messages.FindCoordinatorRequest

    def ask() -> int | None:
        for b in cluster.alive_brokers():
            try:
                r = cluster.ask(cluster.port(b), ApiKey.FIND_COORDINATOR, 3,
                                cls(key=transactional_id, key_type=1))
            except OSError:
                continue
            if r.error_code == ErrorCode.NONE:
                return r.node_id
        return None
    return wait_until(ask, 60, f"the transaction coordinator of {transactional_id!r}")


def n12(ctx: Context, kill_coordinator: bool = False) -> None:
    """Exactly once: a transactional consume-transform-produce worker (confluent-kafka,
    read_committed input, ``send_offsets_to_transaction``) copies a 6-partition topic
    while it is written. The worker is SIGKILLed inside a transaction repeatedly and
    restarted with the same transactional id (which fences the dead one and aborts what
    it left open); with ``kill_coordinator`` (N12C, SCENARIOS.md's second N12 fault) the
    broker hosting its transaction coordinator is then SIGKILLed just as the worker calls
    commit_transaction. The output read with read_committed must hold every input record
    exactly once; read_uncommitted shows what the aborts left behind."""
    c = ctx.cluster()
    src, dst, txn_id, group = "n12-in", "n12-out", "n12-worker", "n12-group"
    parts = list(range(6))
    for t in (src, dst):
        c.create_topic(t, len(parts), 3, {"min.insync.replicas": "2"})
    producer = KetchProducer(c, ctx.history, src, "ketch", acks=-1, idempotent=True, records_per_batch=2)
    ctx.closing(producer.close)
    # About 60 records/s: the worker (2 ms a record, 50 a transaction) keeps up with it.
    producer.start(parts, interval_s=0.2)
    workers: list[TxnWorker] = []

    def new_worker() -> TxnWorker:
        w = TxnWorker(c.bootstrap_servers, group, src, dst, txn_id,
                      os.path.join(ctx.workdir, f"txn-worker-{len(workers)}.log"),
                      batch=50, process_ms=2, client_properties=c.client_properties_file).start()
        workers.append(w)
        ctx.event(f"transactional worker {len(workers) - 1} started (pid {w.pid})")
        return w
    ctx.closing(lambda: [w.kill() for w in workers])
    live = new_worker()
    wait_until(lambda: live.events("C") >= 3, 120, "the worker's first commits")
    for i in range(ctx.profile.repeats):
        wait_until(live.written_in_transaction, 60, "the worker inside a transaction, records written",
                   interval_s=0.002)
        live.kill()
        inside = live.written_in_transaction()
        ctx.event(f"SIGKILL transactional worker pid {live.pid} inside a transaction")
        ctx.check(f"kill {i + 1}: the worker died inside a transaction with records written", inside)
        live = new_worker()
        wait_until(lambda: live.events("C") >= 2, 120, "the restarted worker's commits")

    if kill_coordinator:
        coordinator = transaction_coordinator(c, txn_id)
        calls = live.events("E")
        wait_until(lambda: live.events("E") > calls, 60, "the worker calling commit_transaction",
                   interval_s=0.002)
        ctx.inject(c, Kill(coordinator))
        ctx.note(f"broker {coordinator} was the transaction coordinator; transaction {calls + 1} was committing")
        committed = sum(w.events("C") for w in workers)

        def progressed() -> bool:
            # librdkafka #5456/#5511: once the group coordinator's broker is gone from the
            # metadata, send_offsets_to_transaction can block for ever; the worker's
            # watchdog then ends it (an H line) and it is restarted, as a supervisor would.
            nonlocal live
            if not live.running:
                ctx.note(f"worker pid {live.pid} exited: {(live.lines() or ['?'])[-1]}; restarted")
                live = new_worker()
            return sum(w.events("C") for w in workers) >= committed + 3
        wait_until(progressed, 240, "commits after the coordinator moved", interval_s=0.2)
        moved_to = transaction_coordinator(c, txn_id)
        ctx.check("the transaction coordinator moved to another broker", moved_to != coordinator,
                  f"broker {coordinator} -> {moved_to}")
        ctx.inject(c, Restart(coordinator))
    producer.stop()

    # Everything written to the input is copied and its offsets committed.
    ends = {p: c.high_watermark(src, p) for p in parts}
    from clients.admin import Admin
    from clients.types import TopicPartition
    with Admin({**c.client_props, "bootstrap.servers": c.bootstrap_servers}) as admin:
        def caught_up() -> bool:
            try:
                got = admin.list_consumer_group_offsets(group, [TopicPartition(src, p) for p in parts])
            except Exception:
                return False
            return all(got.get(TopicPartition(src, p)) is not None
                       and got[TopicPartition(src, p)].offset >= ends[p] for p in parts)
        wait_until(caught_up, 180, "the worker to commit the whole input", interval_s=0.5)
    live.terminate()
    ctx.check("no worker met a fatal transaction error", not any(w.events("F") for w in workers),
              "; ".join(line for w in workers for line in w.lines() if line.startswith("F ")))
    hung = [line for w in workers for line in w.lines() if line.startswith("H ")]
    ctx.extra["worker_hangs"] = len(hung)
    if hung:
        ctx.note(f"workers ended by their watchdog (librdkafka #5511): {hung}")

    login = c.client_props
    inputs = {p: v for p, v in read_isolated(c.bootstrap_servers, src, parts, "read_uncommitted",
                                             client_props=login).items()}
    committed_out = read_isolated(c.bootstrap_servers, dst, parts, "read_committed", client_props=login)
    uncommitted_out = read_isolated(c.bootstrap_servers, dst, parts, "read_uncommitted", client_props=login)
    lost = duplicated = 0
    for p in parts:
        want = Counter(inputs[p])
        got = Counter(committed_out[p])
        lost += sum((want - got).values())
        duplicated += sum((got - want).values())
        ctx.check(f"partition {p}: read_committed output is the input, in order",
                  committed_out[p] == inputs[p], f"{len(committed_out[p])} of {len(inputs[p])} records")
    aborted = sum(len(uncommitted_out[p]) - len(committed_out[p]) for p in parts)
    aborts = sum(w.events("A") for w in workers)
    ctx.extra.update(output_lost=lost, output_duplicated=duplicated, aborted_records_seen_uncommitted=aborted,
                     transactions_committed=sum(w.events("C") for w in workers), worker_aborts=aborts)
    ctx.check("exactly once: no input record missing from the read_committed output", lost == 0, f"{lost} missing")
    ctx.check("exactly once: no input record twice in the read_committed output", duplicated == 0,
              f"{duplicated} extra")
    ctx.check("the killed workers' open transactions left aborted records that read_uncommitted sees",
              aborted > 0, f"{aborted} aborted records")
    ctx.note(f"{sum(w.events('C') for w in workers)} transactions committed; {aborted} records of aborted "
             f"transactions visible only to read_uncommitted; {aborts} aborts by the worker itself")
    ctx.read_back(c, src, parts)


# ---------------------------------------------------------------- D1


def n15(ctx: Context) -> None:
    """SIGKILL the process leading a partition (its host stays up): the controller fences
    it when its heartbeat connection closes (ketch.broker.disconnect.fence.ms), so a new
    leader acknowledges writes within 1 s although the session timeout is 20 s. Then
    SIGSTOP the leader: its socket stays open, so it is fenced only by the session timeout."""
    session_s = 20.0
    c = ctx.cluster(controller_props={"broker.session.timeout.ms": str(int(session_s * 1000)),
                                      "ketch.broker.disconnect.fence.ms": "250"})
    topic = "n15"
    c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0])
    wait_acks(ctx, 100)
    before = c.latest_view(topic, 0)
    victim = before.leader
    t_kill = time.monotonic()
    ctx.inject(c, Kill(victim))
    c.wait_partition(topic, 0, lambda s: s.leader not in (-1, victim)
                     and s.leader_epoch > before.leader_epoch, session_s / 2, "a new leader")
    ctx.note(f"kill to new leader in metadata: {elapsed(t_kill)} s (session {session_s:g} s)")
    wait_acks(ctx, 50)
    ctx.inject(c, Restart(victim))
    c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, f"broker {victim} back in the ISR")
    wait_acks(ctx, 20)
    # The window the 1 s goal is judged in ends here: a paused leader keeps its partition
    # unavailable until its session runs out, by design.
    ctx.window = (t0, time.monotonic())

    paused = c.latest_view(topic, 0).leader
    t_pause = time.monotonic()
    ctx.inject(c, Pause(paused))
    wait_until(lambda: (live := c.unfenced_brokers()) is not None and paused not in live,
               session_s * 3, f"paused broker {paused} fenced")
    fenced_after = elapsed(t_pause)
    heartbeat_s = int(c.controller_props["broker.heartbeat.interval.ms"]) / 1000
    ctx.check(f"the paused leader was fenced by its session, after {fenced_after} s",
              fenced_after >= session_s - heartbeat_s)
    ctx.inject(c, Resume(paused))
    c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, f"broker {paused} back in the ISR")
    wait_acks(ctx, 20)
    stop_all(producers)
    only_retriable_errors(ctx)
    ctx.read_back(c, topic, [0])


def n13(ctx: Context) -> None:
    """KIP-966 eligible leader replicas (on in new clusters): RF 3, min ISR 2. The
    followers are SIGKILLed one after the other while producing, then the leader is stopped
    cleanly (SIGTERM). The partition has no ISR; its eligible leader replicas are the ones
    that left the ISR while it was under min ISR. Back first: the follower that left while
    the ISR still held min ISR (never eligible: it may lack acknowledged records), then the
    other SIGKILLed follower (an unclean stop: no longer eligible); the partition stays
    without a leader through both. Then the cleanly stopped leader: eligible, it leads again
    with nothing acknowledged lost, and writes resume once a follower is back in the ISR."""
    c = ctx.cluster()
    topic = "n13"
    c.create_topic(topic, assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    # Not idempotent: batches refused for minutes leave gaps an idempotent producer would
    # have to reset its sequence for (L6 produces the same way).
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, records_per_batch=5,
                             delivery_timeout_s=3)
    ctx.closing(producer.close)
    t0 = time.monotonic()
    c.wait_partition(topic, 0, lambda s: s.leader == 1 and len(s.isr) == 3, 30, "ISR [1, 2, 3]")
    producer.start([0], interval_s=0.05)
    wait_acks(ctx, 100)
    ctx.inject(c, Kill(2))
    c.wait_partition(topic, 0, lambda s: s.leader == 1 and s.isr == (1, 3), 30,
                     "broker 2 out of the ISR")
    wait_acks(ctx, 50)
    ctx.inject(c, Kill(3))
    c.wait_partition(topic, 0, lambda s: s.leader == 1 and s.isr == (1,), 30,
                     "broker 3 out of the ISR")
    ctx.check("the follower that left under min ISR is eligible",
              c.eligible_leader_replicas(topic, 0) == (3,), f"{c.eligible_leader_replicas(topic, 0)}")
    wait_until(lambda: ctx.history.errors().get("NOT_ENOUGH_REPLICAS", 0) >= 3, 30,
               "writes refused with NOT_ENOUGH_REPLICAS")
    ctx.inject(c, Terminate(1))
    t_out = time.monotonic()

    def leaderless_for(seconds: float, what: str) -> None:
        end = time.monotonic() + seconds
        leaders = set()
        while time.monotonic() < end:
            view = c.latest_view(topic, 0)
            if view is not None:
                leaders.add(view.leader)
            time.sleep(0.1)
        ctx.check(f"no leader with {what}", leaders <= {-1}, f"leaders seen {sorted(leaders)}")

    ctx.inject(c, Restart(2))
    c.wait_broker_live(2)
    leaderless_for(3.0, "only broker 2 back (it left the ISR while the ISR held min ISR)")
    ctx.inject(c, Restart(3))
    c.wait_broker_live(3)
    leaderless_for(3.0, "broker 3 back from a SIGKILL (no longer eligible)")
    ctx.check("only the cleanly stopped leader is still eligible",
              c.eligible_leader_replicas(topic, 0) == (1,), f"{c.eligible_leader_replicas(topic, 0)}")
    ctx.inject(c, Restart(1))
    c.wait_partition(topic, 0, lambda s: s.leader == 1, 60, "broker 1 leading again")
    ctx.note(f"unavailable from the leader's stop to its return: {elapsed(t_out)} s")
    c.wait_partition(topic, 0, lambda s: len(s.isr) >= 2, 60, "the ISR back at min ISR")
    wait_acks(ctx, 50)
    producer.stop()
    ctx.window = (t0, time.monotonic())
    ctx.read_back(c, topic, [0])


def d1(ctx: Context) -> None:
    """Disk faults on restart (SCENARIOS.md, last section): a follower's active segment
    gets a torn last batch and a flipped byte in an earlier one while it is down. Its
    recovery must cut to the last valid batch and report it; it re-fetches the rest; once
    it leads, it serves no corrupt record."""
    c = ctx.cluster()
    topic = "d1"
    c.create_topic(topic, assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, idempotent=True, records_per_batch=5)
    ctx.closing(producer.close)
    producer.send(0, ctx.profile.records)
    victim = 3
    ctx.inject(c, Kill(victim))
    producer.send(0, 20)
    ctx.inject(c, TornTail(victim, topic, 0))
    ctx.inject(c, FlipByte(victim, topic, 0, batch_index=5))
    leo_damaged = log_end_on_disk(c, victim, topic, 0)
    ctx.inject(c, Restart(victim))
    with open(c.node(victim).log, errors="replace") as f:
        reported = [line.strip() for line in f if "recovery dropped" in line or "truncat" in line.lower()]
    ctx.check("recovery reported what it cut", bool(reported), reported[-1][:200] if reported else "nothing logged")
    c.wait_partition(topic, 0, lambda s: len(s.isr) == 3, 60, f"broker {victim} back in the ISR")
    producer.send(0, 20)
    # Make the repaired replica the leader and read everything from it.
    leader = c.leader_of(topic, 0)
    ctx.inject(c, Kill(leader))
    if leader != victim:
        c.wait_partition(topic, 0, lambda s: s.leader not in (-1, leader), 30, "a new leader")
    if c.leader_of(topic, 0) != victim:
        other = c.leader_of(topic, 0)
        ctx.inject(c, Kill(other))
        c.wait_partition(topic, 0, lambda s: s.leader == victim, 30, f"broker {victim} to lead")
        ctx.inject(c, Restart(other))
    read = read_partition(c, topic, 0)
    ctx.check(f"the repaired replica serves every record with a valid CRC (damaged LEO was {leo_damaged})",
              read.corrupt_batches == 0 and read.leader == victim, f"leader {read.leader}, corrupt {read.corrupt_batches}")
    for node in c.broker_ids:
        if not c.is_running(node):
            ctx.inject(c, Restart(node))
    ctx.read_back(c, topic, [0])


# ---------------------------------------------------------------- X1


def x1(ctx: Context) -> None:
    """Beyond SCENARIOS.md (one-way loss, from its fault list): the leader proposes adding
    a caught-up follower to the ISR; the controller commits it, but every answer to the
    leader is dropped and its metadata fetches stall. The leader must keep counting the
    new member (its proposal stays pending) rather than fall back to the smaller ISR and
    acknowledge writes the member never gets, which the member's clean election after the
    other two die would then lose. Found a broker bug (fixed in bf626f3)."""
    c = ctx.cluster(proxied_links=True, controller_props={"broker.session.timeout.ms": "6000"})
    topic = "x1"
    c.create_topic(topic, assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    producer = KetchProducer(c, ctx.history, topic, "ketch", acks=-1, records_per_batch=10)
    ctx.closing(producer.close)
    producer.send(0, ctx.profile.records)
    ctx.inject(c, Pause(3))
    wait_until(lambda: c.partition(topic, 0, 2).isr == (1, 2), 30, "ISR {1, 2}")
    producer.send(0, ctx.profile.records)
    for controller in c.controller_ids:
        ctx.inject(c, Delay(1, controller, 120_000, api_keys=(ApiKey.FETCH,)))
        c.hub.drop_responses(f"1->{controller}", [ApiKey.ALTER_PARTITION], 1_000_000)
    ctx.event("broker 1: metadata fetches stalled, AlterPartition answers dropped")
    ctx.inject(c, Resume(3))
    wait_until(lambda: set(c.partition(topic, 0, 2).isr) == {1, 2, 3}, 30,
               "the expansion committed (as broker 2 sees it)")
    ctx.check("the leader's ISR expansion committed while it heard nothing back",
              set(c.partition(topic, 0, 1).isr) == {1, 2}, str(c.partition(topic, 0, 1)))
    ctx.inject(c, Cut(3, 1))
    late = KetchProducer(c, ctx.history, topic, "late", acks=-1, records_per_batch=20,
                         delivery_timeout_s=12, request_timeout_s=4)
    ctx.closing(late.close)
    window = late.send(0, 20)
    ctx.note(f"{sum(a.outcome == ACKED for a in window)} of {len(window)} writes acknowledged "
             "while the new ISR member was cut off")
    ctx.inject(c, Kill(1))
    ctx.inject(c, Kill(2))
    state = c.wait_partition(topic, 0, lambda s: s.leader == 3, 60, "broker 3 (in the committed ISR) to lead")
    ctx.check("the member that joined the ISR was elected cleanly", state.leader == 3, str(state))
    c.heal()
    ctx.inject(c, Restart(1))
    ctx.inject(c, Restart(2))
    producer.send(0, 20)
    ctx.read_back(c, topic, [0])


_N = Expect()
NO_LOSS_SCENARIOS = [
    Scenario("N1", "acks=all; SIGKILL the partition leader, restart it, repeat while producing",
             Expect(unavailable_max_s=SESSION_TIMEOUT_S + 2), n1),
    Scenario("N2", "acks=all; SIGKILL the active controller repeatedly while creating topics and producing",
             Expect(unavailable_max_s=2.0), n2),
    Scenario("N3", "acks=all; kill 1 of 3 controllers for good, later a second; restart", _N, n3),
    Scenario("N4", "acks=all, RF=2, min.insync=1; follower with a stale HW restarts, then the leader dies",
             _N, n4),
    Scenario("N5", "acks=all; every replica SIGKILLed at once with unflushed writes, restarted in the other order",
             _N, n5),
    Scenario("N6", "acks=all, idempotent; a proxy drops Produce responses after the append",
             Expect(duplicated_zero=True, reordered_zero=True), n6),
    Scenario("N7", "consumer group, commit after processing; consumers SIGKILLed mid-batch", _N, n7),
    Scenario("N8", "unclean election disabled; all replicas down; the stale follower returns first", _N, n8),
    Scenario("N9", "acks=all; SIGSTOP a follower longer than replica.lag.time.max.ms, then SIGCONT", _N, n9),
    Scenario("N10", "acks=all; cut the leader off from controllers and followers, not from producers", _N, n10),
    Scenario("N11", "acks=all, min.insync=1; raise it to 3 on the live topic with a follower paused out of the ISR",
             _N, n11),
    Scenario("N15", "acks=all; SIGKILL the leader's process (fenced when its connection closes), "
             "then SIGSTOP a leader (fenced by its session only)", Expect(unavailable_max_s=1.0), n15),
    Scenario("N12", "exactly once: transactional consume-transform-produce; the worker SIGKILLed inside "
             "transactions", _N, n12),
    Scenario("N12C", "exactly once: N12, then the transaction coordinator's broker SIGKILLed mid-commit",
             _N, lambda ctx: n12(ctx, kill_coordinator=True)),
    Scenario("N13", "acks=all, min ISR 2, ELR on; SIGKILL both followers in turn, stop the leader; "
             "bring back the others before it", _N, n13),
    Scenario("D1", "disk faults on restart: torn tail and flipped byte in a follower's segment", _N, d1),
    Scenario("X1", "one-way loss: the leader's ISR expansion commits but every answer to it is lost", _N, x1),
]
