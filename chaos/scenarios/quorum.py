"""N14 (SCENARIOS.md): 3 -> 5 -> 3 controllers while topics are created, with a controller
SIGKILLed in the middle of a membership change (KIP-853).

The cluster's brokers are given only the first controller (``controller.quorum.bootstrap.
servers``) and learn the voters from the quorum (``broker/controller_endpoints.py``).
While a creator thread creates topics through the brokers and two producers write with
acks=all, the scenario:

1. starts controllers 4 and 5 (ids ``CONTROLLER_ID_BASE`` + 4, + 5) as joining observers;
2. adds 4 with AddRaftVoter and SIGKILLs the *active* controller while the request is
   unanswered (as soon as the new voter set shows applied or a second change is refused
   as in flight, at the latest 0.4 s after sending), restarts it, and retries the add
   until the voter set has 4 (an add done too fast to be caught is undone: 4 removed and
   wiped, and tried again);
3. adds 5 and SIGKILLs *5 itself* 30 ms after sending (a joining controller dies
   mid-change; the leader goes on without it), restarts it, and waits until it follows as
   a voter;
4. removes voters 1 and 2 (the active one among them hands leadership over first) and
   stops both: every address a broker was configured with is then gone. The full profile
   also SIGKILLs the active controller in the middle of removing 2 (and restarts it).

While each killed change is unanswered, another thread keeps sending a second change
(adding a controller that does not run: harmless, refused either as "in flight" or as
"not caught up"): the rule of one change at a time, seen on the wire.

Checks: every topic whose CreateTopics was acknowledged exists, on every broker and in the
metadata log read back from each final voter (Fetch on ``__cluster_metadata``); the final
voters' logs are identical and reach the highest high watermark ever sampled (nothing
committed was lost); the voter set ends as {3, 4, 5} on every controller; the second
changes were refused as in flight at least once and never accepted; a sampler of
DescribeQuorum on the active controller never saw the voter set change by more than one
voter between two samples (and saw every step); after 1 and 2 are gone the brokers stay
unfenced and still create topics (they follow the voters); the producers lose nothing
(``read_back``).

Plaintext only: a joining controller's observer fetch does not log in to a secured
controller listener yet (another helper's work, ``quorum/joining.py``).
"""
from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
import uuid
from typing import Any, Callable

from broker.metadata_follower import MetadataImageListener, MetadataObserver
from chaos.checker import Expect
from chaos.cluster import ChaosCluster, ChaosTimeout, wait_until
from chaos.faults import Kill, Restart, Terminate
from chaos.scenarios.base import Context, Scenario, elapsed
from chaos.scenarios.no_loss import (
    SESSION_TIMEOUT_S, TopicCreator, only_retriable_errors, start_producers, stop_all, wait_acks,
)
from clients.cli.launcher import CONTROLLER_ID_BASE
from clients.properties import load_properties
from clients.security.client_auth import ClientSecurity
from clients.protocol import ApiKey, messages
from clients.protocol.errors import ErrorCode
from clients.protocol.types import parse_uuid_text
from metadata_log.committed import CommittedBatch, MetadataSnapshot

__all__ = ["QUORUM_SCENARIOS"]

MID_CHANGE_TRIES = 3
# The active controller is killed at the latest this long after the change was sent (sooner
# when the change is seen in flight); a joining one 30 ms after (the leader goes on without it).
ACTIVE_KILL_BY_S = 0.4
JOINER_KILL_BY_S = 0.03
# A voter change refused for a passing reason: retried, as `ketch quorum` does.
_RETRIABLE = {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER}


class _LogReader(MetadataImageListener):
    """Keeps every committed record by offset, and the image they replay into."""

    def __init__(self) -> None:
        super().__init__()
        self.records: dict[int, bytes] = {}
        self.snapshot_end = 0

    def handle_commit(self, batch: CommittedBatch) -> None:
        super().handle_commit(batch)
        for i, r in enumerate(batch.records):
            self.records[batch.base_offset + i] = r

    def handle_load_snapshot(self, snapshot: MetadataSnapshot) -> None:
        super().handle_load_snapshot(snapshot)
        self.records = {}
        self.snapshot_end = snapshot.end_offset


def read_metadata_log(address: tuple[str, int], high_watermark: int, security: ClientSecurity,
                      timeout_s: float = 30.0) -> _LogReader:
    """The metadata log of one controller up to ``high_watermark``, as a broker fetches it
    (logged in with ``security`` on a secured controllers' listener)."""
    reader = _LogReader()

    async def follow() -> None:
        observer = MetadataObserver([address], reader, fetch_wait_max_ms=100, security=security)
        task = asyncio.ensure_future(observer.run())
        try:
            if high_watermark > 0:
                await observer.wait_for_offset(high_watermark - 1, timeout_s)
        finally:
            observer.close()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    asyncio.run(follow())
    return reader


def directory_id(c: ChaosCluster, node_id: int, timeout_s: float = 30.0) -> uuid.UUID:
    """A controller's directory.id (its meta.properties, written on first start)."""
    path = os.path.join(c.node(node_id).data_dir, "meta.properties")
    wait_until(lambda: os.path.exists(path), timeout_s, f"controller {node_id}'s meta.properties")
    return parse_uuid_text(load_properties(path)["directory.id"])


def add_request(c: ChaosCluster, node_id: int, directory: uuid.UUID) -> Any:
    node = c.node(node_id)
    L = messages.AddRaftVoterRequest.Listener
    return messages.AddRaftVoterRequest(
        cluster_id=None, timeout_ms=10_000, voter_id=node_id, voter_directory_id=directory,
        listeners=[L(name="CONTROLLER", host="127.0.0.1", port=node.port),
                   L(name="RAFT", host="127.0.0.1", port=node.raft_port)])


def absent_controller_request() -> Any:
    """Adding a controller that does not run: refused whatever happens, and harmless."""
    L = messages.AddRaftVoterRequest.Listener
    return messages.AddRaftVoterRequest(
        cluster_id=None, timeout_ms=1000, voter_id=CONTROLLER_ID_BASE + 99,
        voter_directory_id=uuid.uuid4(),
        listeners=[L(name="CONTROLLER", host="127.0.0.1", port=1),
                   L(name="RAFT", host="127.0.0.1", port=2)])


def remove_request(node_id: int, directory: uuid.UUID) -> Any:
    return messages.RemoveRaftVoterRequest(cluster_id=None, voter_id=node_id,
                                           voter_directory_id=directory)


def send_change(c: ChaosCluster, controller_id: int, request: Any) -> Any:
    key = ApiKey.ADD_RAFT_VOTER if isinstance(request, messages.AddRaftVoterRequest) \
        else ApiKey.REMOVE_RAFT_VOTER
    return c.ask(c.port(controller_id), key, 0, request, timeout_s=30)


def voters_on(c: ChaosCluster, controller_id: int) -> tuple[int, ...] | None:
    view = c.describe_voters(controller_id)
    return None if view is None else view.nodes


def change_until_done(ctx: Context, c: ChaosCluster, request: Any, done: Callable[[], bool],
                      what: str, timeout_s: float = 90.0) -> float:
    """Send the change to the active controller until ``done()`` holds (a retry after a
    kill may find it made already); seconds it took."""
    started = time.monotonic()
    deadline = started + timeout_s
    while not _probe(done):
        if time.monotonic() > deadline:
            raise ChaosTimeout(f"{what}: not done after {timeout_s:g}s")
        try:
            active = c.wait_active_controller(30)
            response = send_change(c, active, request)
        except (OSError, ChaosTimeout) as e:
            ctx.history.event(f"{what}: {type(e).__name__}")
            time.sleep(0.2)
            continue
        if response.error_code not in (ErrorCode.NONE, *_RETRIABLE) and not _probe(done):
            # DUPLICATE_VOTER / VOTER_NOT_FOUND when a change killed midway was finished by
            # the next leader: done() says so; anything else is a refusal we did not expect.
            raise AssertionError(f"{what}: {ErrorCode(response.error_code).name} "
                                 f"{response.error_message}")
        if response.error_code != ErrorCode.NONE:
            time.sleep(0.2)
    return elapsed(started)


def _probe(condition: Callable[[], bool]) -> bool:
    try:
        return condition()
    except (OSError, ChaosTimeout):
        return False


class VoterSampler:
    """DescribeQuorum on every live controller every ``interval_s``. Kept: the voter sets
    the active controllers showed of themselves, in order (a leader decides the changes;
    a joining controller shows the static set until it is sent the log, and then jumps),
    and the highest high watermark any leader showed."""

    def __init__(self, c: ChaosCluster, interval_s: float = 0.05) -> None:
        self.c = c
        self.interval_s = interval_s
        self.sets: list[tuple[int, tuple[int, ...]]] = []     # (leader, voters)
        self.max_high_watermark = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="n14-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for cid in self.c.alive_controllers():
                view = self.c.describe_voters(cid)
                if view is None or view.leader != cid:
                    continue
                self.samples += 1
                if not self.sets or self.sets[-1][1] != view.nodes:
                    self.sets.append((cid, view.nodes))
                self.max_high_watermark = max(self.max_high_watermark, view.high_watermark)
            self._stop.wait(self.interval_s)

    def jumps(self) -> list[str]:
        """Changes by more than one voter between two samples. (A new leader may show
        the set before an uncommitted change of the old one: one step back, also one
        voter.)"""
        return [f"leader {a}: {list(before)} -> leader {b}: {list(after)}"
                for (a, before), (b, after) in zip(self.sets, self.sets[1:])
                if len(set(before) ^ set(after)) > 1]

    def story(self) -> str:
        return " -> ".join(f"{list(v)}@{leader}" for leader, v in self.sets)


def n14(ctx: Context) -> None:
    c = ctx.cluster(controller_bootstrap=True)
    ids = c.controller_ids
    assert len(ids) == 3
    first, second, third = ids
    fourth, fifth = CONTROLLER_ID_BASE + 4, CONTROLLER_ID_BASE + 5
    topic = "n14"
    # -- 1. two controllers join as observers (they catch up meanwhile)
    for node_id in (fourth, fifth):
        c.add_controller(node_id)
        c.start_node(node_id)
    c.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    creator = TopicCreator(ctx, c, "n14")
    sampler = VoterSampler(c)
    ctx.closing(sampler.stop)
    t0 = time.monotonic()
    producers = start_producers(ctx, c, topic, [0])
    creator.start()
    sampler.start()
    wait_acks(ctx, ctx.profile.records)
    figures: dict[str, Any] = {}
    d4, d5 = directory_id(c, fourth), directory_id(c, fifth)

    # -- 2. add 4; SIGKILL the active controller mid-change; a second change meanwhile
    # Done: the active controller's voter set says so (the others follow it).
    def is_voter(node_id: int) -> Callable[[], bool]:
        return lambda: node_id in (voters_on(c, c.wait_active_controller(30)) or ())

    def not_voter(node_id: int) -> Callable[[], bool]:
        return lambda: node_id not in (voters_on(c, c.wait_active_controller(30)) or (node_id,))

    probes: list[tuple[int, str]] = []

    def add_killing(node_id: int, directory: uuid.UUID, victim: int | None, label: str,
                    kill_by_s: float) -> tuple[int | None, uuid.UUID]:
        """An add with a kill in its middle; one done too fast to be caught is undone (the
        voter removed, its disk wiped: a removed controller cannot rejoin as it was) and
        tried again."""
        for _ in range(MID_CHANGE_TRIES):
            killed = mid_change(ctx, c, add_request(c, node_id, directory), node_id, victim=victim,
                                figures=figures, label=label, probes=probes, kill_by_s=kill_by_s)
            if killed is not None:
                return killed, directory
            change_until_done(ctx, c, remove_request(node_id, directory), not_voter(node_id),
                              f"undo {label}")
            ctx.inject(c, Terminate(node_id))
            shutil.rmtree(c.node(node_id).data_dir, ignore_errors=True)
            c.start_node(node_id)
            directory = directory_id(c, node_id)
            ctx.note(f"{label}: undone, controller {node_id} back with a new disk; again")
        ctx.check(f"{label}: a controller killed in the middle of it within {MID_CHANGE_TRIES} tries",
                  False)
        return None, directory

    killed, d4 = add_killing(fourth, d4, None, "add 4", ACTIVE_KILL_BY_S)
    figures["add_4_s"] = change_until_done(ctx, c, add_request(c, fourth, d4), is_voter(fourth), "add 4")
    ctx.event(f"controller {fourth} is a voter")
    # Restarted while the next change goes on (4 of the 5 voters-to-be are up meanwhile).
    if killed is not None:
        ctx.inject(c, Restart(killed, wait=False))
    wait_acks(ctx, 20)

    # -- 3. add 5; SIGKILL 5 itself mid-change
    # The joining controller dies soon after the request is sent: the leader goes on.
    killed5, d5 = add_killing(fifth, d5, fifth, "add 5", JOINER_KILL_BY_S)
    if killed5 is not None:
        ctx.inject(c, Restart(fifth))
    figures["add_5_s"] = change_until_done(ctx, c, add_request(c, fifth, d5), is_voter(fifth), "add 5")
    ctx.event(f"controller {fifth} is a voter")
    wait_until(lambda: (v := c.describe_voters(fifth)) is not None and v.leader >= 0
               and fifth in v.nodes, 60, f"controller {fifth} to follow as a voter")
    ctx.event(f"controller {fifth} follows the leader as a voter")
    if killed is not None:
        wait_until(lambda: c.describe_voters(killed) is not None, 60, f"controller {killed} to answer")
    five = tuple(sorted((first, second, third, fourth, fifth)))
    try:
        wait_until(lambda: all(voters_on(c, cid) == five for cid in c.alive_controllers()), 30,
                   "every controller to show 5 voters")
        grown = True
    except ChaosTimeout:
        grown = False
    ctx.check("the quorum grew to 5 voters, as every controller shows", grown,
              str({cid: voters_on(c, cid) for cid in c.alive_controllers()}))
    wait_acks(ctx, 20)

    # -- 4. remove 1 and 2, then stop them: no address a broker was given is left. The full
    # profile also SIGKILLs the active controller in the middle of removing 2.
    for node_id in (first, second):
        directory = directory_id(c, node_id)
        label = f"remove {node_id - CONTROLLER_ID_BASE}"
        restart = None
        if node_id == second and ctx.profile.repeats > 2:
            # Not undone if done too fast (a removed controller would need a new disk): noted.
            restart = mid_change(ctx, c, remove_request(node_id, directory), node_id, victim=None,
                                 figures=figures, label=label, probes=probes,
                                 kill_by_s=ACTIVE_KILL_BY_S)
        figures[f"{label.replace(' ', '_')}_s"] = change_until_done(
            ctx, c, remove_request(node_id, directory), not_voter(node_id), label)
        if restart is not None and restart != node_id:
            ctx.inject(c, Restart(restart))
    ctx.event(f"controllers {first} and {second} removed")
    for node_id in (first, second):
        ctx.inject(c, Terminate(node_id))
    gone = time.monotonic()
    final = (third, fourth, fifth)
    after = len(creator.acknowledged())
    wait_until(lambda: len(creator.acknowledged()) > after + 2, 60,
               "topics created through the brokers after the shrink")
    wait_acks(ctx, 20)
    # Past the session timeout: a broker that lost the controllers would be fenced by now.
    time.sleep(max(0.0, gone + SESSION_TIMEOUT_S + 0.5 - time.monotonic()))
    unfenced = c.unfenced_brokers()
    ctx.check("brokers stay unfenced once every controller they were configured with is gone",
              unfenced == set(c.broker_ids), f"unfenced {unfenced}")

    creator.stop()
    sampler.stop()
    stop_all(producers)
    ctx.window = (t0, time.monotonic())

    try:
        wait_until(lambda: all(voters_on(c, cid) == final for cid in final), 30,
                   "every controller to show the final voters")
    except ChaosTimeout:
        pass
    views = {cid: voters_on(c, cid) for cid in final}
    ctx.check("the voter set ends as {3, 4, 5} on every controller",
              all(v == final for v in views.values()), str(views))
    jumps = sampler.jumps()
    ctx.check("DescribeQuorum never showed more than one voter change at a time "
              f"({sampler.samples} samples of the active controller)",
              len(sampler.sets) >= 5 and not jumps, "; ".join(jumps[:3]) or sampler.story())

    refused = sum("in flight" in m for _, m in probes)
    accepted = [m for code, m in probes if code == ErrorCode.NONE]
    ctx.check(f"second voter changes sent while one was in flight were refused as such "
              f"({refused} of {len(probes)}; the others came before or after it), none accepted",
              refused > 0 and not accepted, str(probes[:4]))
    figures["second_changes_refused_in_flight"] = f"{refused}/{len(probes)}"

    ok = creator.check_every_acknowledged_topic_exists()

    leader = c.wait_active_controller(30)
    hw = c.describe_voters(leader).high_watermark
    logs = {cid: read_metadata_log(("127.0.0.1", c.port(cid)), hw, c.security) for cid in final}
    in_log = {cid: set(r.image.topics.by_name) for cid, r in logs.items()}
    absent = {cid: sorted(set(ok) - names)[:5] for cid, names in in_log.items() if set(ok) - names}
    ctx.check("every acknowledged topic is in the metadata log of every final voter", not absent,
              str(absent))
    common = min(max(r.records, default=-1) for r in logs.values())
    reference = logs[leader].records
    differ = [cid for cid, r in logs.items()
              if {o: v for o, v in r.records.items() if o <= common} !=
              {o: v for o, v in reference.items() if o <= common}]
    ctx.check(f"the final voters' metadata logs are identical up to offset {common}", not differ,
              f"differ: {differ}")
    ctx.check("no committed metadata record lost: the log reaches the highest high watermark "
              f"sampled ({sampler.max_high_watermark})", hw >= sampler.max_high_watermark,
              f"final high watermark {hw}")
    figures.update(topics_created=len(ok), topic_tries=len(creator.created), samples=sampler.samples,
                   metadata_high_watermark=hw)
    ctx.extra.update(figures)
    ctx.note(f"voter changes: {figures}")
    only_retriable_errors(ctx)
    ctx.read_back(c, topic, [0])


def mid_change(ctx: Context, c: ChaosCluster, request: Any, subject: int, *, victim: int | None,
               figures: dict[str, Any], label: str, probes: list[tuple[int, str]],
               kill_by_s: float, timeout_s: float = 60.0) -> int | None:
    """Send ``request`` to the active controller and SIGKILL ``victim`` (None: the active
    controller) while the request is unanswered: as soon as the active controller shows the
    new voter set applied or refuses a second change as "in flight", and at the latest
    ``kill_by_s`` after sending (a change takes a few Raft commits: 0.1-1 s here). The
    check is that the request was still unanswered at the kill; what had been seen of the
    change by then is reported with it. A request refused before the kill (not caught up
    yet, leadership moving) is sent again, the victim restarted first. None: the change
    was done before it could be killed (the caller undoes it and tries again).

    The second changes: from another thread, while the request is unanswered, adding a
    controller that does not run, again and again (harmless: refused as "in flight" while a
    change is, as "not caught up" otherwise); their answers go to ``probes``."""
    deadline = time.monotonic() + timeout_s
    adding = isinstance(request, messages.AddRaftVoterRequest)
    while True:
        active = c.wait_active_controller(30)
        target = active if victim is None else victim
        answer: dict[str, Any] = {}
        seen: list[str] = []
        wake = threading.Event()

        def send() -> None:
            try:
                answer["response"] = send_change(c, active, request)
            except OSError as e:
                answer["error"] = e
            answer["at"] = time.monotonic()
            wake.set()

        def probe() -> None:
            while "at" not in answer:
                try:
                    r = send_change(c, active, absent_controller_request())
                except OSError:
                    return
                probes.append((r.error_code, r.error_message or ""))
                if "in flight" in (r.error_message or ""):
                    seen.append("in flight")
                    wake.set()

        def watch() -> None:
            while "at" not in answer and not wake.is_set():
                nodes = voters_on(c, active)
                if nodes is not None and (subject in nodes) == adding:
                    seen.append("applied")
                    wake.set()
                time.sleep(0.002)
        threads = [threading.Thread(target=f, daemon=True) for f in (send, probe, watch)]
        started = time.monotonic()
        for t in threads:
            t.start()
        wake.wait(kill_by_s)
        killed_at: float | None = None
        if "at" not in answer:
            killed_at = time.monotonic()
            ctx.inject(c, Kill(target))
        for t in threads:
            t.join(40)
        response = answer.get("response")
        if killed_at is None or answer["at"] < killed_at:
            if response is not None and response.error_code == ErrorCode.NONE:
                ctx.note(f"{label}: done in {elapsed(started)}s, before it could be killed")
                if killed_at is not None:
                    ctx.inject(c, Restart(target))
                return None
            # Refused before the kill (not caught up yet, leadership moving): again.
            if killed_at is not None:
                ctx.note(f"{label}: refused just before the kill: {response or answer.get('error')!r}"[:200])
                ctx.inject(c, Restart(target))
            if time.monotonic() > deadline:
                raise ChaosTimeout(f"{label}: never accepted ({answer})")
            time.sleep(0.2)
            continue
        if victim is not None and response is not None and response.error_code not in (
                ErrorCode.NONE, ErrorCode.NOT_CONTROLLER):
            # Decided after the kill and refused (the victim was not caught up any more):
            # nothing was in flight. Again, with the victim back.
            ctx.note(f"{label}: refused after the kill ({response.error_message}); again")
            ctx.inject(c, Restart(target))
            time.sleep(1.0)
            continue
        figures[f"{label.replace(' ', '_')}_killed_after_s"] = round(killed_at - started, 3)
        ctx.check(f"{label}: controller {target} SIGKILLed with the request unanswered "
                  f"(the change seen: {seen[0] if seen else 'nothing yet'})", True,
                  f"answered {answer['at'] - killed_at:+.3f}s after the kill: "
                  f"{response or answer.get('error')!r}"[:300])
        if victim is None:
            new = c.wait_active_controller(30, not_in=(target,))
            nodes = voters_on(c, new) or ()
            ctx.note(f"{label}: after the kill the new active controller {new} shows the change "
                     + ("made" if (subject in nodes) == adding else "not made (retried)"))
        return target


QUORUM_SCENARIOS = [
    Scenario("N14", "3 -> 5 -> 3 controllers while topics are created; SIGKILL the active "
             "controller, then a joining one, in the middle of a membership change",
             Expect(), n14),
]
