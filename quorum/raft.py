"""RaftQuorum: the metadata quorum on pysyncobj 0.3.17. The only module importing pysyncobj.

Theory of operation
-------------------
pysyncobj runs Raft in its own thread ("tick thread") with its own clock and randomness.
Everything that thread touches lives here: the replicated state (``ReplicatedLogState``,
the metadata log as batches with offsets), the journal (``quorum/journal.py``), the dump
(pysyncobj's log compaction). The asyncio side (``QuorumBase`` in ``quorum/port.py``) only
receives plain values, through ``loop.call_soon_threadsafe``, in the order the tick thread
produced them: apply outcomes, role changes, state loads, failed proposals. It proposes by
handing encoded commands to pysyncobj's thread-safe command queue.

Leadership: when this node wins a term it proposes ``LeaderChangeCommand(term, node_id)``.
Once that entry is applied every earlier entry is applied too, and only then does the
node become the *active* controller and may append (see ``quorum/replicated_log.py``).

Settings, and why. Measured on the 2-core machine these sessions run on, 3 processes on
loopback (bench/quorum.py prints the current figures; the machine is shared, so they move
with its load):

- ``appendEntriesUseBatch=False``: with batching on, a command waits for the next heartbeat
  (bare counter, password on, 64 in flight: 104 ms p50, 723 commits/s); off, it is sent at
  once (1 in flight: 0.8-1.6 ms p50; 16 in flight: 1,300-2,800 commits/s).
- ``password=<cluster secret>``: pysyncobj's transport unpickles what it receives. With a
  password every message is Fernet-encrypted and HMAC-authenticated before it is
  unpickled, so only holders of the secret can make a controller unpickle anything. This
  is mandatory here (``RaftSettings`` refuses an empty secret). Its price, measured: 1 in
  flight, 2,300 commits/s and 0.34 ms p50 without it, 1,000/s and 0.83 ms with it.
- ``bindAddress=<raft host:port>``: pysyncobj would otherwise bind 0.0.0.0.
- ``raftMinTimeout=0.15``, ``raftMaxTimeout=0.3``, ``appendEntriesPeriod=0.04`` (pysyncobj
  requires min timeout > 3 x period): SIGKILL of the active controller to the next
  committed write took 225-525 ms (p50 ~270-290 ms) over 15 kills; the defaults (0.4/1.4 s)
  give up to 2.4 s. The price: a node whose thread is starved for more than 150 ms causes
  an election. Causes seen, and what was done: full GC passes over a 100k-partition image
  (``gc.freeze`` in server.py), a third thread competing for the GIL (none now), fsync
  under other processes' I/O (fdatasync 0.2 ms p50 idle, 4 ms p50 / 24 ms p99 under load),
  and CPU overload (load > 3 on 2 cores during a 100k-partition restart). Each such
  election costs a few hundred ms of NOT_CONTROLLER, which clients retry. The timeouts are
  configurable (``ketch.raft.election.timeout.min.ms`` / ``.max.ms``) for busier machines;
  ``RaftQuorum`` logs every stall longer than the minimum timeout.
- The controller process sets ``sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)`` (0.5 ms;
  CPython's default is 5 ms). Each tick gives the GIL up at every poll, send, receive,
  Fernet call and fsync, and each time waits up to one switch interval to win it back
  from the asyncio thread when that thread applies a large committed batch.
  ``python bench/metadata_apply.py --tick-probe`` (a thread doing a tick's steps while the
  apply of 10k partitions' records runs, gc frozen every 1,000 records as server.py does;
  load average ~10): tick time beyond its poll p50 37 ms, p99 85 ms, max 242 ms at 5 ms;
  p50 18 ms, p99 60 ms, max 125 ms at 0.5 ms. The longer stalls (350-530 ms, whatever the
  switch interval) were full garbage collections: with gc off, max 97 ms. What stalls
  the thread in-process is fixed where it comes from (gc frozen, fencing batches bounded,
  cheaper record decoding), and bench/scale.py reports the stalls the controllers logged.
  What is not fixed in-process is a machine with more runnable threads than cores: in one
  100k-partition bench/scale.py run at load average 9-14 on 2 cores (session 12, shared
  with other benchmarks), the three controllers logged 420 stalls over 150 ms in 13
  minutes (p50 240 ms, p90 498 ms, p99 1,074 ms, max 2,713 ms; 8 over 1 s) and 55
  elections. Kafka's default (controller.quorum.election.timeout.ms=1000, randomized up to
  2 s) would have ridden out 98 % of them, at the price of slower failovers; the defaults
  here stay 150-300 ms for fast failover (and the tests and chaos scenarios that count on
  it) until that trade is decided, and ``ketch.raft.election.timeout.min.ms`` /
  ``.max.ms`` raise them for a loaded machine.
- ``connectionRetryTime=0.25`` (default 5 s): a restarted controller rejoins in well under a
  second. ``connectionTimeout=1.0`` (default 3.5 s, must be >= raftMaxTimeout).
- ``leaderFallbackTimeout=1.0`` (default 30 s): a leader cut off from the majority steps
  down after 1 s, so writes fail with NOT_CONTROLLER instead of hanging for 30 s.
- The journal is ``FsyncJournal`` (durable before every ack and vote, fsyncs grouped),
  installed through pysyncobj's ``createJournal`` hook. Its price: about +0.5-1 ms p50 per
  commit (two fsyncs, the leader's overlapped with the followers'); throughput comes from
  records per entry instead (group commit in ``QuorumBase``: ~650 records per entry and
  80,000-140,000 records/s with 256 writers, 35-60x the bare counter's commits/s).
- The dump uses our own format (``_encode_dump``: no pickle on disk) and is fsynced before
  pysyncobj renames it into place; pysyncobj's own dump never is.
- pysyncobj reads sockets only after its election check; ``_onTick`` reads them first when
  the thread was stalled, so a starved follower does not depose a healthy leader whose
  heartbeats sit unread in its socket.
- Pre-vote (KIP-996, ``quorum/prevote.py``; ``pre_vote=True``, key
  ``ketch.raft.pre.vote.enable``): pysyncobj 0.3.17 has none, and its election lives inline
  in ``SyncObj._onTick``. ``_MetadataLogSyncObj._onTick`` runs before it: when pysyncobj's
  election deadline has passed, it pushes the deadline back one election timeout and asks
  the others instead (``pre_vote_request`` / ``pre_vote_response`` messages on pysyncobj's
  own transport, so encrypted and authenticated like the rest); a won round sets the
  deadline to 0 and the next tick lets pysyncobj's unchanged election code run. The
  transport subclass hands those two message types to the pre-vote and notes every
  AppendEntries of the current term (the "heard from a leader" that makes a voter say no)
  before pysyncobj sees it. A leadership transfer (pysyncobj's ``timeout_now``) skips
  pre-vote, as in Raft. What pysyncobj still guarantees alone: election safety (one leader
  per term, votes and terms in the journal before they are sent). What this adds:
  liveness of a healthy leader against a voter that returns from a pause or a partition;
  it changes nothing a vote or a term depends on.

Dynamic controller membership (KIP-853; the rules in ``quorum/voters.py``, carried out by
``quorum/membership.py``). What pysyncobj 0.3.17's ``dynamicMembershipChange`` gives, and
Ketch uses: single-server 'add' / 'rem' entries (``addNodeToCluster`` /
``removeNodeFromCluster``) that take effect on each node when appended (undone if
truncated), and its leader refuses a change until the previous one is applied and its
own first entry of the term is. Raft's single-server rule (Ongaro 4.1) keeps old and new
majorities overlapping. What it lacks, and what Ketch adds:

- restart: pysyncobj restores only the dump's member list and re-applies later membership
  entries when it re-applies the entries, i.e. after it has started electing with the
  older set; a controller grown from 1 to 3 voters would restart as a quorum of one.
  ``membership_after_entries`` replays the dump's members and the journal's membership
  entries *before* pysyncobj starts, and a controller whose journal says it was removed
  refuses to start (``RemovedVoterError``);
- identity: pysyncobj knows a voter by address only. The voter set (a ``VotersRecord`` in
  the replicated state) names each voter's id and directory id; every pysyncobj message
  carries its sender's directory id (``DIRECTORY_KEY``) and a message from a voter's
  address with another directory id is dropped before pysyncobj sees it, so a wiped
  controller cannot vote or acknowledge as the voter it was;
- one change at a time across both (the VotersRecord and pysyncobj's entry), a caught-up
  check before an add (the joining controller fetches the log as an observer,
  ``quorum/joining.py``), never the last voter (``quorum/voters.py``);
- removing the leader itself: pysyncobj refuses it, so the leader transfers leadership
  (pysyncobj's ``transferLeadership``, in the tick thread) and the caller retries.

Dedupe and fencing are in ``ReplicatedLogState.apply``; log compaction is two-level: the
caller installs a metadata snapshot (the image's records at a committed offset) which
shrinks the replicated state, and pysyncobj's own compaction dumps that state (snapshot +
batches after it) and drops the journal entries it covers. A follower too far behind gets
the dump (pysyncobj's install-snapshot) and reports it as a state load.
"""
from __future__ import annotations

import asyncio
import logging
import os
import pickle
import struct
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import crc32c
import pysyncobj.syncobj as _syncobj_module
from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.config import FAIL_REASON
from pysyncobj.monotonic import monotonic as raft_clock   # CLOCK_MONOTONIC_RAW, not time.monotonic
from pysyncobj.syncobj import _RAFT_STATE
from pysyncobj.transport import TCPTransport

from quorum.journal import FsyncJournal, fsync_dir
from quorum.port import LeaderAndEpoch, QuorumBase
from quorum.prevote import (
    PRE_VOTE_REQUEST, PRE_VOTE_RESPONSE, LogEnd, PreVote, PreVoteRequest, PreVoteResponse,
)
from clients.protocol import CorruptFrameError
from clients.protocol.types import ZERO_UUID
from quorum.progress import RaftOffsetIndex, ReplicaProgress, ReplicaTracker
from quorum.replicated_log import (
    NO_LEADER, CorruptCommandError, LeaderChangeCommand, MetadataSnapshot,
    ReplicatedLogState, VotersChanged, encode_command,
)
from quorum.voters import VoterSet

logger = logging.getLogger(__name__)

# The GIL switch interval of a controller process (see the module docstring).
GIL_SWITCH_INTERVAL_S = 0.0005
JOURNAL_FILE = "raft.journal"
DUMP_FILE = "raft.dump"

_FAIL_NAMES = {v: k for k, v in vars(FAIL_REASON).items() if k.isupper()}


@dataclass(frozen=True, slots=True)
class RaftSettings:
    """pysyncobj settings; the defaults are the measured choices described above."""

    cluster_secret: str
    election_timeout_min_s: float = 0.15
    election_timeout_max_s: float = 0.3
    append_entries_period_s: float = 0.04
    connection_timeout_s: float = 1.0
    connection_retry_s: float = 0.25
    leader_fallback_timeout_s: float = 1.0
    append_entries_use_batch: bool = False
    log_compaction_entries_min: int = 20_000
    log_compaction_time_min_s: float = 600.0
    commands_queue_size: int = 100_000
    dedupe_window_size: int = 4096
    pre_vote: bool = True           # ask before campaigning (quorum/prevote.py); answering is always on

    def __post_init__(self) -> None:
        if not self.cluster_secret:
            raise ValueError("the Raft transport unpickles messages: a cluster secret is required")


# -- the journal hook ----------------------------------------------------------------------
# SyncObj.__init__ calls createJournal(conf.journalFile) (imported into pysyncobj.syncobj).
# We route our own file names to FsyncJournal and remember each journal so the transport
# and the tick callback of the same SyncObj can sync it.

_original_create_journal = _syncobj_module.createJournal
_journals: dict[str, FsyncJournal] = {}
_journals_lock = threading.Lock()
# Opened by RaftQuorum before pysyncobj starts (to rebuild the membership), handed over here.
_preopened: dict[str, FsyncJournal] = {}


def _create_journal(journal_file: str | None) -> Any:
    if journal_file is None or not journal_file.endswith(JOURNAL_FILE):
        return _original_create_journal(journal_file)
    with _journals_lock:
        journal = _preopened.pop(journal_file, None)
    if journal is None:
        journal = FsyncJournal(journal_file)
    with _journals_lock:
        _journals[journal_file] = journal
    return journal


_syncobj_module.createJournal = _create_journal


class ChunkedEntryAssembler:
    """Reassembles an entry pysyncobj 0.3.17 sends in chunks, for the receiving side.

    An entry of ``appendEntriesBatchSizeBytes`` (64 KiB) or more goes as append_entries
    messages with ``transmission`` start / process / finish, each carrying a slice of the
    pickled entry. The sender labels a chunk "finish" once it reaches the length of the
    *command*, not of the pickled entry, which is longer (protocol 2 pickles bytes as
    UTF-8 text: about +15 % for metadata records). So the first "finish" often comes a
    chunk or more early, pysyncobj's unpickling of the truncated data raises out of the
    tick ("pickle data was truncated"), and the rest of that tick is lost: seen hundreds
    of times a run when 1,000-partition CreateTopics commit at 10k partitions.

    ``receive`` keeps the chunks per sender and hands pysyncobj either an empty "start"
    (which it answers as it answers every chunk but the last) or, once the data unpickles,
    the plain message pysyncobj sends for a small entry (``entries=[entry]``). A prefix of
    a pickle never unpickles: the STOP opcode comes only after the whole tuple."""

    def __init__(self) -> None:
        self._chunks: dict[Any, bytearray] = {}

    def receive(self, node: Any, message: dict) -> dict:
        transmission = message.get("transmission")
        if transmission is None:
            return message
        data = message.get("data", b"")
        if transmission == "start":
            self._chunks[node] = bytearray(data)
        elif node in self._chunks:
            self._chunks[node] += data
        else:
            return dict(message, transmission="start", data=b"")   # its start was lost
        entry = None
        if transmission == "finish":
            try:
                entry = pickle.loads(bytes(self._chunks[node]))
            except Exception:       # truncated: a later chunk says "finish" again
                entry = None
        if entry is None:
            return dict(message, transmission="start", data=b"")
        del self._chunks[node]
        whole = {k: v for k, v in message.items() if k not in ("transmission", "data")}
        whole["entries"] = [entry]
        return whole


class _SyncBeforeSendTransport(TCPTransport):
    """Makes the journal durable before a message that vouches for it leaves: a follower's
    ack (next_node_idx), a vote. A leader's append_entries is the exception: the leader
    writes its own copy in parallel with the followers (Ongaro's thesis, 10.2.1), which is
    safe because pysyncobj counts the leader towards a majority only at the start of the
    next tick, and the tick callback syncs the journal at the end of every tick, before the
    poll that can receive the acks."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:  # noqa: N803
        with _journals_lock:
            self._journal = _journals[syncObj.conf.journalFile]
        self._assembler = ChunkedEntryAssembler()
        super().__init__(syncObj, selfNode, otherNodes)

    def send(self, node: Any, message: Any) -> bool:
        if not (isinstance(message, dict) and message.get("type") in _SENT_WITHOUT_SYNC):
            self._journal.sync()
        if isinstance(message, dict):
            # Every Raft message says which directory it comes from (KIP-853): a voter is
            # its id and its directory id, and pysyncobj knows only addresses.
            message[DIRECTORY_KEY] = self._syncObj.directory_tag
        return super().send(node, message)

    def _onMessageReceived(self, node: Any, message: Any) -> None:  # noqa: N802 (pysyncobj's name)
        # Pre-vote's messages are ours; pysyncobj's own go on to it after the pre-vote has
        # seen the leader's heartbeats. Tick thread (the transport runs in pysyncobj's poll).
        if isinstance(message, dict):
            if not self._syncObj.admits(node, message.get(DIRECTORY_KEY)):
                return      # a voter's address, another directory: a wiped disk
            if self._syncObj.handle_pre_vote_message(node, message):
                return
            if message.get("type") == "append_entries":
                message = self._assembler.receive(node, message)
        super()._onMessageReceived(node, message)


# A leader's append_entries (see above) and pre-vote messages, which vouch for nothing on disk.
_SENT_WITHOUT_SYNC = frozenset({"append_entries", PRE_VOTE_REQUEST, PRE_VOTE_RESPONSE})
DIRECTORY_KEY = "ketch_directory_id"     # added to every pysyncobj message (a dict key it ignores)
# pysyncobj's command kinds are the first byte of each journal entry (_COMMAND_TYPE).
_MEMBERSHIP_COMMAND = 2


def membership_after_entries(members: list[str], entries: Any) -> list[str]:
    """The Raft member addresses after the dump's ``members`` and then each journal entry
    in order. pysyncobj applies a membership entry when it appends it, and on a restart
    restores only the dump's member list: an entry after the dump counts again only
    once it is re-applied, after the node has already been electing and voting with the
    older member set (a node grown from 1 to 3 voters would restart alone, elect itself
    and commit alone). Ketch replays them here, before pysyncobj starts. The entries are
    this node's own journal (pysyncobj writes ``['add'|'rem', address, node]``, pickled,
    after the kind byte)."""
    result = list(members)
    for command, _index, _term in entries:
        if not command or command[0] != _MEMBERSHIP_COMMAND:
            continue
        kind, address, *_ = pickle.loads(command[1:])  # noqa: S301 (our own journal)
        if kind == "add" and address not in result:
            result.append(address)
        elif kind == "rem" and address in result:
            result.remove(address)
    return result


def _now_ms() -> int:
    return int(raft_clock() * 1000)


class _TruncationNoiseFilter(logging.Filter):
    """pysyncobj logs 'truncating already-applied log entries' at CRITICAL each time a leader
    with appendEntriesUseBatch=False resends entries a follower has (it rewinds nextIndex to
    the last ack). The entries are identical; FsyncJournal restores them without writing and
    logs a real conflict itself (a different entry at a committed index)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("truncating already-applied log entries")


logging.getLogger("pysyncobj.syncobj").addFilter(_TruncationNoiseFilter())


# -- the dump (pysyncobj log compaction) ---------------------------------------------------

_DUMP_MAGIC = b"KETCHRD1"
_DUMP_ENTRY = struct.Struct(">QQI")     # raft index, raft term, command length
_U32 = struct.Struct(">I")


def _encode_dump(entries: tuple[Any, Any], cluster: list[str], state: bytes) -> bytes:
    parts = [_DUMP_MAGIC]
    for command, index, term in entries:
        parts += [_DUMP_ENTRY.pack(index, term, len(command)), bytes(command)]
    members = "\n".join(sorted(cluster)).encode()
    parts += [_U32.pack(len(members)), members, _U32.pack(len(state)), state]
    body = b"".join(parts)
    return body + _U32.pack(crc32c.crc32c(body))


def _decode_dump(data: bytes) -> tuple[tuple[Any, Any], list[str], bytes]:
    if len(data) < len(_DUMP_MAGIC) + 4 or not data.startswith(_DUMP_MAGIC):
        raise CorruptCommandError("not a Ketch raft dump")
    if crc32c.crc32c(memoryview(data)[:-4]) != _U32.unpack_from(data, len(data) - 4)[0]:
        raise CorruptCommandError("raft dump checksum mismatch")
    pos = len(_DUMP_MAGIC)
    entries = []
    try:
        for _ in range(2):
            index, term, size = _DUMP_ENTRY.unpack_from(data, pos)
            pos += _DUMP_ENTRY.size
            entries.append((data[pos:pos + size], index, term))
            pos += size
        (size,) = _U32.unpack_from(data, pos)
        members = data[pos + 4: pos + 4 + size].decode().split("\n")
        pos += 4 + size
        (size,) = _U32.unpack_from(data, pos)
        state = data[pos + 4: pos + 4 + size]
        pos += 4 + size
    except (struct.error, UnicodeDecodeError) as e:
        raise CorruptCommandError(str(e)) from e
    if pos != len(data) - 4:
        raise CorruptCommandError("trailing bytes in raft dump")
    return (entries[0], entries[1]), [m for m in members if m], state


# -- the replicated object -----------------------------------------------------------------


class _MetadataLogSyncObj(SyncObj):
    """The pysyncobj object whose replicated method applies a command to the state."""

    def __init__(self, self_address: str, peer_addresses: list[str], conf: SyncObjConf,
                 quorum: "RaftQuorum") -> None:
        # Everything the tick thread may use must exist before SyncObj.__init__ starts it.
        self._quorum = quorum
        self.pre_vote = PreVote(max(1, int(conf.raftMinTimeout * 1000)))
        self.campaigns = 0      # elections this node started (a term it asked votes for)
        self._asks_before_campaigning = quorum.settings.pre_vote
        self.directory_tag = str(quorum.directory_id)
        super().__init__(self_address, peer_addresses, conf,
                         transportClass=_SyncBeforeSendTransport)

    def admits(self, node: Any, tag: Any) -> bool:
        return self._quorum.admits_in_tick_thread(getattr(node, "address", ""), tag)

    def transfer_leadership_now(self) -> None:
        """Tick thread: hand leadership to the most caught-up connected voter."""
        self.transferLeadership(None, None)

    @replicated
    def apply_command(self, payload: bytes) -> None:
        # pysyncobj applies entry raftLastApplied + 1 and counts it applied afterwards.
        self._quorum.apply_in_tick_thread(payload, self._SyncObj__raftLastApplied + 1)

    def _onTick(self, timeToWait: float = 0.0) -> None:  # noqa: N802 (pysyncobj's name)
        # pysyncobj checks the election deadline at the top of a tick, before it reads the
        # sockets. A follower whose thread was starved (GIL, CPU, a slow fsync) for longer
        # than the election timeout would start an election although the leader's
        # heartbeats sit unread in its socket, deposing a healthy leader. Read first.
        now = time.monotonic()
        if now - self._quorum.last_tick > self._quorum.settings.election_timeout_min_s / 2:
            self._poller.poll(0)
        if self._asks_before_campaigning:
            self._pre_vote_before_election()
        term = self.raftCurrentTerm
        super()._onTick(timeToWait)
        if self.raftCurrentTerm > term and self._SyncObj__raftState == _RAFT_STATE.CANDIDATE:
            self.campaigns += 1         # pysyncobj's election check started one this tick
            logger.info("campaigning for term %d", self.raftCurrentTerm)

    # -- pre-vote (quorum/prevote.py decides; this carries it out on pysyncobj) --
    # pysyncobj's election state is private to SyncObj (name-mangled): this subclass is the
    # one place that reads or moves it, and only its election deadline is ever written.

    def _log_end(self) -> LogEnd:
        return LogEnd(self._SyncObj__getCurrentLogTerm(), self._SyncObj__getCurrentLogIndex())

    def _pre_vote_before_election(self) -> None:
        """Runs just before pysyncobj's election check. If that check would start an
        election, hold it back one timeout and ask first, unless a round was just won."""
        if (self._SyncObj__raftState == _RAFT_STATE.LEADER
                or self._SyncObj__raftElectionDeadline >= raft_clock()
                or not self._SyncObj__connectedToAnyone()
                or self._SyncObj__transferInProgress):      # the leader asked: campaign now
            return
        term = self.raftCurrentTerm
        if self.pre_vote.may_campaign(term):
            self.pre_vote.campaigned()      # pysyncobj's election runs in this tick
            return
        self._SyncObj__raftElectionDeadline = raft_clock() + self._SyncObj__generateRaftTimeout()
        others = list(self.otherNodes)
        request = self.pre_vote.start(term=term, log_end=self._log_end(), voters=len(others) + 1)
        if self.pre_vote.may_campaign(term):
            self._SyncObj__raftElectionDeadline = 0     # alone: campaign at once
            return
        transport = self._SyncObj__transport
        for node in others:
            transport.send(node, request.to_message())

    def handle_pre_vote_message(self, node: Any, message: dict) -> bool:
        """A message from the transport: True if it was pre-vote's (consumed here)."""
        kind = message.get("type")
        if kind == "append_entries":
            if message.get("term", -1) >= self.raftCurrentTerm:
                self.pre_vote.observe_leader(_now_ms())
            return False
        if kind == PRE_VOTE_REQUEST:
            response = self.pre_vote.handle_request(
                PreVoteRequest.from_message(message), term=self.raftCurrentTerm,
                log_end=self._log_end(), leading=self._isLeader(), now_ms=_now_ms())
            if not response.granted:
                logger.debug("pre-vote refused to %s: %s", getattr(node, "address", node),
                             response.reason)
            self._SyncObj__transport.send(node, response.to_message())
            return True
        if kind == PRE_VOTE_RESPONSE:
            if self.pre_vote.handle_response(node, PreVoteResponse.from_message(message)):
                self._SyncObj__raftElectionDeadline = 0     # won: the next tick campaigns
            return True
        return False

    # pysyncobj has no public way to ask these (getStatus() builds a whole report and has
    # no acknowledgement times): this subclass is the one place that reads its internals.
    def is_leader(self) -> bool:
        return self._isLeader()

    def leader_node(self) -> Any:
        """The leader as pysyncobj knows it (a node with an ``address``), or None."""
        return self._getLeader()

    def follower_acks(self) -> tuple[dict, dict]:
        """(match index by node, last acknowledgement time on pysyncobj's clock by node)."""
        return self._SyncObj__raftMatchIndex, self._SyncObj__lastResponseTime


class MembershipChangeError(Exception):
    """pysyncobj did not make a membership change (its reason: REQUEST_DENIED while the
    previous change is not applied, NOT_LEADER, DISCARDED...)."""


class RemovedVoterError(Exception):
    """This controller's own journal says it was removed from the voter set."""


class RaftQuorum(QuorumBase):
    """A controller's membership in the Raft quorum. Create it on the event loop thread."""

    def __init__(self, *, node_id: int, raft_address: str, voters: dict[int, str],
                 data_dir: str, settings: RaftSettings,
                 directory_id: uuid.UUID = ZERO_UUID,
                 in_flight_max: int = 2, entry_bytes_max: int = 1 << 20) -> None:
        """`voters`: the configured Raft addresses by node id (controller.quorum.voters).
        They start a new quorum; once this node's dump or journal holds a membership, that
        membership is used instead. A node not among them joins: it waits to be added
        (AddRaftVoter) by the quorum's leader."""
        super().__init__(node_id, in_flight_max=in_flight_max, entry_bytes_max=entry_bytes_max)
        assert voters.get(node_id, raft_address) == raft_address, "this node's Raft address differs"
        assert len(set(voters.values())) == len(voters), "two voters share a Raft address"
        self.settings = settings
        self.data_dir = data_dir
        self.directory_id = directory_id
        self._loop = asyncio.get_running_loop()
        self._configured_by_address = {address: nid for nid, address in voters.items()}
        self._node_by_address = dict(self._configured_by_address)
        os.makedirs(data_dir, exist_ok=True)
        # KIP-853 state. The voter set (VotersRecord) as last applied: tick thread writes,
        # the asyncio side reads (an immutable value, replaced whole). Refused directories
        # are logged once each.
        self.voter_set: VoterSet | None = None
        self._refused: set[tuple[str, str]] = set()
        self._directories_seen: set[tuple[str, str]] = set()
        self.on_directory_seen: Callable[[int, uuid.UUID], None] = lambda nid, d: None
        self._tick_tasks: list[Callable[[], None]] = []     # asyncio -> tick thread
        # Tick-thread state. Invariant: touched only by the tick thread once it runs.
        self._state = ReplicatedLogState(settings.dedupe_window_size)
        self._reported: tuple[int, int, str | None] | None = None
        self._compactions: list[MetadataSnapshot] = []      # asyncio -> tick thread
        self._compactions_lock = threading.Lock()
        self.dumps_written = 0
        self.dumped_snapshot_end_offset = -1     # the metadata snapshot in the last dump
        self.tick_stalls = 0
        self.last_tick = time.monotonic()   # read by the tick thread
        self._ticked = False
        # DescribeQuorum's view of the voters (quorum/progress.py): written by the tick
        # thread, read by the asyncio thread, under _progress_lock.
        self._progress_lock = threading.Lock()
        self._offset_index = RaftOffsetIndex()
        self._offset_index.record(0, 0)     # an empty log ends at offset 0
        self._voter_tracker = ReplicaTracker()
        self._progress_term = 0
        self._acks_seen: dict[str, float] = {}
        journal_file = os.path.join(data_dir, JOURNAL_FILE)
        conf = SyncObjConf(
            password=settings.cluster_secret,
            bindAddress=raft_address,
            appendEntriesUseBatch=settings.append_entries_use_batch,
            raftMinTimeout=settings.election_timeout_min_s,
            raftMaxTimeout=settings.election_timeout_max_s,
            appendEntriesPeriod=settings.append_entries_period_s,
            connectionTimeout=settings.connection_timeout_s,
            connectionRetryTime=settings.connection_retry_s,
            leaderFallbackTimeout=settings.leader_fallback_timeout_s,
            logCompactionMinEntries=settings.log_compaction_entries_min,
            logCompactionMinTime=settings.log_compaction_time_min_s,
            commandsQueueSize=settings.commands_queue_size,
            journalFile=journal_file,
            fullDumpFile=os.path.join(data_dir, DUMP_FILE),
            serializer=self._write_dump,
            deserializer=self._read_dump,
            onStateChanged=lambda old, new: self._report_role(),
            # KIP-853: pysyncobj's single-server membership changes (module docstring).
            dynamicMembershipChange=True,
        )
        members = self._membership_before_start(journal_file, list(voters.values()))
        if raft_address not in members and self.joined_before:
            raise RemovedVoterError(
                f"controller {node_id} was removed from the voter set (its journal says so): "
                "it cannot vote again; add it back with a fresh directory")
        peers = [a for a in members if a != raft_address]
        self._syncobj = _MetadataLogSyncObj(raft_address, peers, conf, self)
        with _journals_lock:
            self.journal = _journals[journal_file]
        self._syncobj.addOnTickCallback(self._on_tick)

    def _membership_before_start(self, journal_file: str, configured: list[str]) -> list[str]:
        """The Raft members this node starts with: the dump's member list and the journal's
        membership entries after it (membership_after_entries), else the configuration."""
        journal = FsyncJournal(journal_file)
        with _journals_lock:
            _preopened[journal_file] = journal      # _create_journal hands it to pysyncobj
        members: list[str] | None = None
        dump_file = os.path.join(self.data_dir, DUMP_FILE)
        if os.path.exists(dump_file):
            with open(dump_file, "rb") as f:
                _, members, state_bytes = _decode_dump(f.read())
            self._set_voter_set(ReplicatedLogState.decode(state_bytes).voters)
        entries = journal[:]
        has_membership = any(c and c[0] == _MEMBERSHIP_COMMAND for c, _, _ in entries)
        self.joined_before = members is not None or has_membership
        if members is None and not has_membership:
            return configured
        return membership_after_entries(members if members is not None else configured, entries)

    def _set_voter_set(self, record: bytes | None) -> None:
        if record is None:
            return
        try:
            voter_set = VoterSet.decode(record)
        except CorruptFrameError as e:
            logger.error("voter set that does not decode ignored: %s", e)
            return
        self.voter_set = voter_set
        by_address = dict(self._configured_by_address)
        by_address.update({v.raft_address: v.voter_id for v in voter_set.voters})
        self._node_by_address = by_address

    # -- asyncio side --

    def _propose(self, request_id: bytes, payload: bytes) -> None:
        def on_result(_result: Any, error: int) -> None:
            if error != FAIL_REASON.SUCCESS:
                self._post(self._on_proposal_failed, request_id, _FAIL_NAMES.get(error, str(error)))
        self._syncobj.apply_command(payload, callback=on_result)

    def _compact_replicated_state(self, snapshot: MetadataSnapshot) -> None:
        with self._compactions_lock:
            self._compactions.append(snapshot)

    # -- membership (KIP-853): what quorum/membership.py drives --

    @property
    def journal_syncs(self) -> tuple[int, float]:
        return self.journal.entry_syncs, self.journal.entry_sync_seconds

    def raft_members(self) -> set[str]:
        """The addresses pysyncobj counts as voters now, this node's included."""
        return {n.address for n in self._syncobj.otherNodes} | {self._syncobj.selfNode.address}

    def change_raft_membership(self, kind: str, address: str) -> "asyncio.Future[None]":
        """Leader: append pysyncobj's 'add' or 'rem' entry for `address`; resolves when it
        is committed. pysyncobj refuses (REQUEST_DENIED) while its previous change is not
        applied, and removing this node itself."""
        future: asyncio.Future[None] = self._loop.create_future()

        def settle(error: str | None) -> None:
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(MembershipChangeError(error))

        def on_result(_result: Any, error: int) -> None:
            self._post(settle, None if error == FAIL_REASON.SUCCESS
                       else _FAIL_NAMES.get(error, str(error)))
        if kind == "add":
            self._syncobj.addNodeToCluster(address, callback=on_result)
        else:
            assert kind == "remove"
            self._syncobj.removeNodeFromCluster(address, callback=on_result)
        return future

    def transfer_leadership(self) -> None:
        """Ask the tick thread to hand leadership to another caught-up voter."""
        with self._compactions_lock:
            self._tick_tasks.append(self._syncobj.transfer_leadership_now)

    def raft_status(self) -> dict[str, Any]:
        """pysyncobj's status (term, commit index, log length...), for DescribeQuorum."""
        status: dict[str, Any] = self._syncobj.getStatus()
        return status

    def voter_progress(self) -> tuple[int, list[ReplicaProgress]]:
        """(the Raft term this node leads or 0, each other voter's progress as this
        node saw it while leading that term)."""
        members = self.raft_members()
        ids = {nid for address, nid in self._node_by_address.items() if address in members}
        with self._progress_lock:
            return self._progress_term, [self._voter_tracker.get(nid)
                                         for nid in sorted(ids) if nid != self.node_id]

    def caught_up_voters(self, now_ms: int, window_ms: int) -> frozenset[int]:
        """The voters seen at this leader's log end within `window_ms` (wall clock), this
        node included; only itself when it does not lead."""
        term, progress = self.voter_progress()
        others = {p.replica_id for p in progress
                  if term and p.last_caught_up_timestamp >= 0
                  and now_ms - p.last_caught_up_timestamp <= window_ms}
        return frozenset(others | {self.node_id})

    def node_id_of(self, address: str | None) -> int:
        return self._node_by_address.get(address or "", NO_LEADER)

    async def close(self) -> None:
        self._mark_closed()
        await asyncio.to_thread(self._syncobj.destroy_synchronous)

    # -- tick thread --

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            pass    # the loop is closed: we are shutting down

    def apply_in_tick_thread(self, payload: bytes, raft_index: int) -> None:
        outcome = self._state.apply_encoded(payload)
        if isinstance(outcome, VotersChanged):
            self._set_voter_set(outcome.voters)
        with self._progress_lock:
            self._offset_index.record(raft_index, self._state.next_offset)
        self._post(self._on_outcome, outcome)

    def admits_in_tick_thread(self, address: str, tag: Any) -> bool:
        """May a Raft message from `address`, tagged with directory `tag`, count? Not when
        the voter set knows that address as a voter with another directory id."""
        voter_set = self.voter_set
        if voter_set is None:
            return True
        voter = voter_set.by_raft_address(address)
        if voter is None:
            return True
        try:
            directory = uuid.UUID(tag) if isinstance(tag, str) else ZERO_UUID
        except ValueError:
            directory = ZERO_UUID
        if voter_set.admits(voter.voter_id, directory):
            if voter.directory_id == ZERO_UUID and directory != ZERO_UUID \
                    and (address, str(directory)) not in self._directories_seen:
                self._directories_seen.add((address, str(directory)))
                self._post(self.on_directory_seen, voter.voter_id, directory)
            return True
        if (address, str(directory)) not in self._refused:
            self._refused.add((address, str(directory)))
            logger.error("refusing Raft messages from %s: voter %d has directory id %s, this "
                         "controller presents %s (a wiped disk cannot rejoin as the old voter)",
                         address, voter.voter_id, voter.directory_id, directory)
        return False

    def _track_voters(self) -> None:
        """Report each follower acknowledgement pysyncobj received since the last tick as
        a fetch (quorum/progress.py). Tick thread only: pysyncobj's dicts are its own."""
        obj = self._syncobj
        leading = obj.raftCurrentTerm if obj.is_leader() else 0
        if leading != self._progress_term:
            with self._progress_lock:
                self._voter_tracker.reset()
                self._progress_term = leading
            self._acks_seen.clear()
        if not leading:
            return
        match_index, ack_times = obj.follower_acks()
        wall_now, now = time.time(), raft_clock()    # pysyncobj's times are on its clock
        with self._progress_lock:
            for node in list(obj.otherNodes):
                address = getattr(node, "address", None)
                at = ack_times.get(node)
                match = match_index.get(node, 0)
                # match 0: nothing acknowledged this term (pysyncobj sets the time of every
                # follower to "now" when it becomes leader, before any answer).
                if at is None or not match or self._acks_seen.get(address) == at:
                    continue
                self._acks_seen[address] = at
                end = self._offset_index.offset_at(match)
                if end < 0:
                    continue        # older than the index holds: unknown
                at_ms = int((wall_now - (now - at)) * 1000)
                self._voter_tracker.observe_fetch(self.node_id_of(address), end,
                                                  self._state.next_offset, at_ms)

    def _on_tick(self) -> None:
        now = time.monotonic()
        stall = now - self.last_tick
        self.last_tick = now
        if stall > self.settings.election_timeout_min_s and self._ticked:
            # Longer than a follower waits for a heartbeat: elections may follow. Causes: CPU
            # starvation (GIL or cores), a slow fsync, a huge entry.
            self.tick_stalls += 1
            logger.warning("raft tick thread stalled for %.0f ms", stall * 1000)
        self._ticked = True
        with self._compactions_lock:
            compactions, self._compactions = self._compactions, []
            tasks, self._tick_tasks = self._tick_tasks, []
        for task in tasks:
            task()
        for snapshot in compactions:
            if snapshot.end_offset <= self._state.next_offset:
                self._state.compact(snapshot)
        if compactions:
            # Dump now: the journal then shrinks with the metadata log, and a restart loads
            # the snapshot instead of replaying every entry since the last dump.
            self._syncobj.forceLogCompaction()
        self.journal.sync()         # entries added this tick are durable before the next
        self._report_role()
        self._track_voters()

    def _report_role(self) -> None:
        obj = self._syncobj if hasattr(self, "_syncobj") else None
        if obj is None:
            return
        term = obj.raftCurrentTerm
        leader = obj.leader_node()
        leader_address = leader.address if leader is not None else None
        leading_term = term if obj.is_leader() else 0
        report = (leading_term, term, leader_address)
        if report == self._reported:
            return
        became_leader = leading_term and (self._reported is None or self._reported[0] != leading_term)
        self._reported = report
        self._post(self._on_role, leading_term,
                   LeaderAndEpoch(self.node_id_of(leader_address), term))
        if became_leader:
            # Fence earlier terms: once this is applied, everything before it is applied.
            obj.apply_command(encode_command(LeaderChangeCommand(term, self.node_id)))

    def _write_dump(self, file_name: str, data: tuple[Any, Any, Any]) -> None:
        entry_last, entry_before, cluster = data
        members = [getattr(n, "address", str(n)) for n in cluster]
        blob = _encode_dump((entry_last, entry_before), members, self._state.encode())
        with open(file_name, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        # pysyncobj renames file_name into place next; FsyncJournal.deleteEntriesTo fsyncs
        # the directory before it drops the entries this dump covers.
        self.dumps_written += 1
        self.dumped_snapshot_end_offset = (self._state.snapshot.end_offset
                                           if self._state.snapshot is not None else -1)

    def _read_dump(self, file_name: str) -> tuple[Any, Any, Any]:
        with open(file_name, "rb") as f:
            data = f.read()
            os.fsync(f.fileno())    # received from the leader: durable before the journal is cut
        fsync_dir(os.path.dirname(os.path.abspath(file_name)))
        (entry_last, entry_before), members, state_bytes = _decode_dump(data)
        self._state = ReplicatedLogState.decode(state_bytes)
        self._set_voter_set(self._state.voters)
        with self._progress_lock:
            self._offset_index.record(entry_last[1], self._state.next_offset)
        self._post(self._on_state_loaded, self._state.copy())
        return entry_last, entry_before, members
