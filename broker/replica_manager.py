"""The broker's data-plane core: every partition this broker hosts, as one pure object.

Theory of operation
-------------------
``ReplicaManager`` owns each hosted partition whole: its log (through the synchronous
storage port), its replica state (``PartitionReplica``: LEO, HW, ISR, acks=all waits),
its producer state (idempotence), the follower's fetch state (``FollowerPartition``:
truncating, fetching, paused, retry time) and the leader's ISR proposal with its in-flight
and resend state. Nothing else changes a partition, on a leader or on a follower.

It never touches a socket, the event loop or the clock. A shell (``broker.replica_driver``)
hands it typed inputs and carries out what it asks for, in the spirit of etcd's
``RawNode`` Ready loop:

    inputs                                        effects (``take_effects()``)
    apply_metadata(image, changes, now_ms)        ProduceCompletion(token, error_code)
    append(...), await_replication(...)           SendAlterPartition(proposal, ...)
    read(...)  (consumers and followers)          PartitionsChanged(partitions)
    follower_work(leader) / handle_epoch_answers  LeadershipChanged(partition, leader)
      / handle_fetched / handle_leader_unreachable   FetchFromLeader(leader_id)
    handle_alter_partition_response(...)         LogDirFailed(log_dir, partitions)
    alter_replica_log_dir(...)
    poll(now_ms) -> ms until due

Queries (``read``, ``list_offset``, ``end_offset_for_epoch``, ``append``'s result) are
answered directly; everything that must happen elsewhere or later is an effect.

Metadata. ``apply_metadata`` takes the new image and the typed changes since the last
one (``metadata_log.delta``), and touches only the partitions those changes name and
that this broker hosts or should host (Kafka's ``applyDelta(delta.localChanges(id))``);
``None`` changes (a snapshot was loaded) re-reads every partition. A partition whose
committed leader is this broker becomes leader at that epoch; one naming another leader
becomes a follower that first truncates by leader epoch (``truncation_decision``); one no
longer assigned here is stopped and its log deleted.

ISR proposals. A leader's ``PartitionReplica`` proposes (``AlterIsr``); this core sends at
most one AlterPartition per partition at a time. Only an answer saying the controller did
*not* apply the proposal lets the leader fall back to its committed ISR (Kafka's
``Partition.handleAlterPartitionError``). A lost answer, or a refusal that may hide a
committed change (INVALID_UPDATE_VERSION: our own earlier try may be that change), keeps
the proposal pending, so the high watermark still counts the maximal ISR, and the core
resends it after ``ALTER_PARTITION_RETRY_MS`` until an answer comes or the metadata log
brings the committed state. (Falling back on a lost answer lost acknowledged writes: an
expansion committed, the leader acked with the smaller ISR, and the new member was then
elected cleanly without them; found by the chaos suite, reproduced by the simulator.)

Log directories (JBOD). The logs live in several directories (``broker.log.log_manager``
places them). ``alter_replica_log_dir`` starts a move (KIP-113): a future log in the
target directory, which ``poll`` fills from the current log, at most
``log_dir_move_bytes_per_poll`` a poll, and swaps in once it holds the same offsets; the
copy and the swap run between inputs, so no append can fall between them, and a
truncation of the current log truncates the future log alike. An I/O error in a log
takes its directory offline (Kafka's LogDirFailureChannel): its replicas stop, join
``offline_partitions`` (KAFKA_STORAGE_ERROR to every request, never re-created elsewhere
from the metadata) and a ``LogDirFailed`` effect tells the shell, whose answer for now is
a controlled shutdown (``broker.broker``, step 7). A move whose future log fails is
dropped; the current log goes on serving.

Transactions (issue 15). Each partition's ``ProducerStateTable`` holds the ongoing
transactions; the last stable offset is min(their first offset, HW) (``last_stable_offset``).
``append_txn_marker`` (WriteTxnMarkers) appends a COMMIT/ABORT control batch as the
leader, indexes an aborted transaction in the marker's segment (``.txnindex``) and
emits ``TxnMarkerAppended`` at once; followers replay the same batches into the same
state (``replay_batches``). read_committed reads stop at the LSO and carry the aborted
transactions overlapping what they return (from the index: batch-level work only, the
records stay a zero-copy slice); followers always read uncommitted. Producer state is
snapshotted (``<offset>.snapshot``) at every roll and at shutdown, and a partition's
state is rebuilt from the latest snapshot plus the batches after it
(``_rebuild_producer_state``) when it is created and after a follower truncation.

Following. ``follower_work(leader)`` plans one round for a leader: OffsetForLeaderEpoch
questions for partitions still truncating, fetch positions for the rest. Answers come
back through ``handle_epoch_answers`` / ``handle_fetched`` with the work they answer, so
an answer to a stale plan (the leader epoch or the fetch offset moved meanwhile) is
ignored. FENCED_LEADER_EPOCH pauses a partition until the metadata log names its leader
anew; a leader whose metadata is behind ours (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION) is retried after a backoff: no metadata
change will come to re-add the partition, so pausing it would stop replication for good
(found by the chaos suite).

Mirrors (issue 21). A partition of a mirror topic (``metadata_log.mirror_topics``) is
read-only while active or stopped: Produce, WriteTxnMarkers and DeleteRecords answer
INVALID_REQUEST. Its leader takes the source's batches through ``mirror_append`` (the
follower append path: offsets, epochs, producer ids kept) and truncates with
``mirror_truncate_to`` / ``mirror_restart_at``, each only while it still leads in the
epoch the mirror fetcher (``broker.mirror``) was started for. An active mirror's leader
adds no epoch of its own to the cache (it holds the source's epochs); once promoted, a
leader stamps ``record_epoch_for_leader`` (above every cached epoch) and the source's
producer state is dropped (its producer ids would collide with this cluster's).
"""
from __future__ import annotations

import heapq
import itertools
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, Sequence, Union

from broker.log import (
    AppendOrigin, writable, EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, FileSlice, LastRecord, LogConfig, LogManager, PartitionLog,
)
from broker.log.log_manager import (
    LogDirOfflineError, decode_offset_checkpoint, encode_offset_checkpoint, normalize_dir,
)
from broker.log.transaction_index import AbortedTxn
from broker.producer_state import NO_PRODUCER_ID, ActiveProducer, ProducerStateTable, SnapshotError
from broker.mirror._core import MirrorLogState
from broker.replica.follower import FetchState, FollowerPartition, truncation_decision
from broker.replica.partition import AlterIsr, PartitionReplica, ProduceCompletion, Role
from broker.replica.positions import PositionsByTopic
from broker.replica.quota import UNLIMITED, ReplicationQuota, throttled_here
from clients.frozen import fast_init
from clients.protocol.errors import ErrorCode
from clients.records import (
    BatchHeader, ControlRecordType, RecordError, build_control_batch, end_transaction_marker_value,
    iter_batches, read_transaction_marker, validate_batches,
)
from clients.types import TopicPartition
from metadata_log.config_layers import ConfigLayers
from metadata_log.features import elr_enabled
from metadata_log.delta import (
    ConfigChange, ElrChange, IsrChange, LeaderChange, LeaderRecoveryChange, MetadataChange,
    PartitionCreated, ReplicasChange, TopicCreated, TopicDeleted,
)
from metadata_log.mirror_topics import MirrorConfig, MirrorState, mirror_config, read_only_message
from metadata_log.image import (
    NO_LEADER, ConfigResourceType, LeaderRecoveryState, MetadataImage, PartitionRegistration,
)

log = logging.getLogger(__name__)

__all__ = [
    "ALTER_PARTITION_RETRY_MS", "AlterPartitionAnswer", "CheckpointWrite", "Effect", "EpochAnswer",
    "EpochQuery", "FetchFromLeader", "FetchPosition", "FetchedPartition", "FollowerWork", "HostedPartition",
    "LeadershipChanged", "LogDirDescription", "LogDirFailed", "PartitionsChanged",
    "ReplicaLogDirState", "ProduceCompletion", "ProduceResult", "ReadResult",
    "ReplicaManager", "SendAlterPartition", "TxnMarkerAppended", "READ_UNCOMMITTED",
    "READ_COMMITTED", "MirrorLeadership", "MirrorLogState", "record_epoch_for_leader",
]

HW_CHECKPOINT = "replication-offset-checkpoint"
# Fetch / ListOffsets isolation_level (Kafka's IsolationLevel).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
# Bytes read at a time when producer state is rebuilt from the log.
_REBUILD_CHUNK_BYTES = 8 * 1024 * 1024
ALTER_PARTITION_RETRY_MS = 500
NO_BROKER_EPOCH = -1    # a Fetch before v15 names no broker epoch (KIP-903)

# AlterPartition answers that prove the controller did not apply the proposal.
ALTER_PARTITION_NOT_APPLIED = frozenset({
    ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INVALID_REQUEST,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
})
# Follower fetch answers: our metadata is stale (wait to be re-added with the new epoch) ...
_PAUSE_ERRORS = frozenset({ErrorCode.FENCED_LEADER_EPOCH})
# ... or the leader's is behind ours (try again after the backoff).
_RETRY_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                           # the leader's log directory failed: leadership moves soon
                           ErrorCode.KAFKA_STORAGE_ERROR})
# By default a log directory move copies at most this much per poll (all moves together),
# so a large move never holds the event loop for long (about 1 ms a MiB from page cache).
LOG_DIR_MOVE_BYTES_PER_POLL = 1024 * 1024
# How soon to poll again while a move has more to copy.
LOG_DIR_MOVE_POLL_MS = 10
# Leaderships one metadata delta gives a broker that are logged a line each at INFO.
LEADERSHIP_LINES_MAX = 10
# Partition-level changes this broker acts on (config changes are handled apart).
# ElrChange too: it bumps the partition epoch, which the leader's next AlterPartition names.
_PARTITION_CHANGES = (PartitionCreated, LeaderChange, IsrChange, ReplicasChange, LeaderRecoveryChange,
                      ElrChange)


# ---------------------------------------------------------------- effects

@dataclass(frozen=True, slots=True)
class SendAlterPartition:
    """Effect: carry this ISR proposal to the active controller (AlterPartition); answer
    with ``handle_alter_partition_response`` (``None`` when the answer was lost)."""
    proposal: AlterIsr
    topic_id: uuid.UUID
    new_isr_with_epochs: tuple[tuple[int, int], ...]    # (broker id, broker epoch)


@fast_init
@dataclass(frozen=True, slots=True)
class CheckpointWrite:
    """One log directory's high-watermark checkpoint file, encoded."""
    log_dir: str
    path: str
    data: bytes


@dataclass(frozen=True, slots=True)
class PartitionsChanged:
    """Effect: data, the HW or the role moved: wake long polls on these partitions.
    ``high_watermark_only``: those of them where only a leader's HW moved, which answers
    no follower's fetch (a follower reads up to the log end: Kafka's DelayedFetch
    completes a follower's on new bytes, not on the HW)."""
    partitions: frozenset[TopicPartition]
    high_watermark_only: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class LeadershipChanged:
    """Effect: this broker started or stopped leading the partition (the group
    coordinator loads and unloads ``__consumer_offsets`` partitions with it)."""
    partition: TopicPartition
    leader: bool


@dataclass(frozen=True, slots=True)
class FetchFromLeader:
    """Effect: there is follower work for ``leader_id``: start or wake its fetcher."""
    leader_id: int


@dataclass(frozen=True, slots=True)
class LogDirFailed:
    """Effect: an I/O error took ``log_dir`` offline; ``partitions`` (this broker's
    replicas there) stopped and answer KAFKA_STORAGE_ERROR until the process restarts.
    The shell must get leadership moved off them (``broker.broker``)."""
    log_dir: str
    partitions: frozenset[TopicPartition]


@fast_init
@dataclass(frozen=True, slots=True)
class TxnMarkerAppended:
    """Effect: this leader appended a COMMIT (``committed``) or ABORT marker of
    ``producer_id`` to ``partition`` (WriteTxnMarkers). The shell tells the subscribers
    at once, before replication completes (the group coordinator completes or drops the
    producer's pending offsets; KIP-890 verification forgets the partition)."""
    partition: TopicPartition
    producer_id: int
    committed: bool


Effect = Union[ProduceCompletion, SendAlterPartition, PartitionsChanged, LeadershipChanged,
               FetchFromLeader, LogDirFailed, TxnMarkerAppended]


# ---------------------------------------------------------------- follower plans and answers

@dataclass(frozen=True, slots=True)
class EpochQuery:
    partition: TopicPartition
    current_leader_epoch: int
    leader_epoch: int                  # the local epoch whose end the leader is asked


@fast_init
@dataclass(frozen=True, slots=True)
class FetchPosition:
    partition: TopicPartition
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    topic_id: uuid.UUID         # what Fetch v13+ names the topic by (KIP-516)


@fast_init
@dataclass(frozen=True, slots=True)
class FollowerWork:
    """One round of a follower's requests to one leader; empty: nothing due before
    ``wait_ms`` (then ask again)."""
    leader_id: int
    epoch_queries: tuple[EpochQuery, ...]
    fetches: Sequence[FetchPosition]            # fixed for the round (RoundPositions)
    wait_ms: int
    # The positions that changed since the leader's last round (None: gone), so a fetcher
    # need not compare them all; None: unknown, compare them all.
    changed: Mapping[TopicPartition, FetchPosition | None] | None = None


@dataclass(slots=True)
class _FollowPlan:
    """One leader's round of follower work, kept by partition: each partition in at most
    one of the fetches, the epoch queries, the ones waiting for a retry time and the
    throttled ones (decided per round); ``dirty``: to decide again next round."""
    inputs: tuple[int, int, int]             # what, changed, makes the plan anew
    positions: PositionsByTopic[FetchPosition] = field(default_factory=PositionsByTopic)
    queries: dict[TopicPartition, EpochQuery] = field(default_factory=dict)
    waiting: dict[TopicPartition, int] = field(default_factory=dict)
    throttled: set[TopicPartition] = field(default_factory=set)
    dirty: set[TopicPartition] = field(default_factory=set)
    work: FollowerWork | None = None         # the last round handed out


@dataclass(frozen=True, slots=True)
class EpochAnswer:
    partition: TopicPartition
    error_code: int
    leader_epoch: int
    end_offset: int


@fast_init
@dataclass(frozen=True, slots=True)
class FetchedPartition:
    partition: TopicPartition
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes | bytearray | memoryview | None


@dataclass(frozen=True, slots=True)
class AlterPartitionAnswer:
    error_code: int
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()
    recovering: bool | None = None      # the committed LeaderRecoveryState, when answered


# ---------------------------------------------------------------- results of queries

@fast_init
@dataclass(frozen=True, slots=True)
class ProduceResult:
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()     # KIP-467
    # acks=all: the offset the HW must reach (``await_replication``); None: nothing to wait for.
    required_offset: int | None = None
    records_appended: int = 0       # for MessagesInPerSec (0 for a duplicate or a refusal)


@fast_init
@dataclass(frozen=True, slots=True)
class ReadResult:
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: FileSlice | None = None     # whole batches; the shell sends or copies them
    log: PartitionLog | None = None      # where ``records`` lives
    # KIP-392: the replica the consumer should fetch from instead (-1: this one).
    preferred_read_replica: int = -1
    last_stable_offset: int = -1
    # read_committed: the aborted transactions overlapping the records (maybe none);
    # None for read_uncommitted and followers (Fetch's null AbortedTransactions).
    aborted_transactions: tuple[AbortedTxn, ...] | None = None
    # Tiered storage (KIP-405): whole batches read from remote storage, below the local
    # log (then ``records`` is None).
    remote_records: bytes | None = None

    @property
    def size_in_bytes(self) -> int:
        if self.remote_records is not None:
            return len(self.remote_records)
        return 0 if self.records is None else self.records.length_bytes


@dataclass(frozen=True, slots=True)
class ReplicaLogDirState:
    """One log of a partition in a log directory (DescribeLogDirs)."""
    partition: TopicPartition
    size_bytes: int
    # current log: how far its LEO is below the HW; future log: below the current LEO
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    log_dir: str
    online: bool
    replicas: tuple[ReplicaLogDirState, ...]


@dataclass(frozen=True, slots=True)
class MirrorLeadership:
    """A partition this broker leads whose topic mirrors a source topic (state active):
    its mirror fetcher pulls from the source while ``leader_epoch`` lasts."""
    partition: TopicPartition
    leader_epoch: int
    mirror: MirrorConfig


def record_epoch_for_leader(partition_leader_epoch: int, latest_cached_epoch: int) -> int:
    """The epoch a leader stamps on what it appends (issue 21).

    Normally the partition's leader epoch: every epoch in the cache was stamped by an
    earlier leader, so it is larger. A mirror's cache holds the SOURCE cluster's epochs,
    which may be larger than the destination's own leader epochs; once the mirror is
    promoted (or a leader of a promoted mirror is elected) the leader stamps one more
    than the largest cached epoch instead, so the cache stays strictly increasing and
    OffsetForLeaderEpoch keeps telling the source's history from the new one. Limits,
    documented in ``broker.mirror``: two leaders of the promoted topic that each lack
    the other's newest batches may pick the same number."""
    if latest_cached_epoch < partition_leader_epoch:
        return partition_leader_epoch
    if latest_cached_epoch == partition_leader_epoch:
        return partition_leader_epoch   # this leader re-elected in its own epoch
    return latest_cached_epoch + 1


# ---------------------------------------------------------------- hosted partitions

@dataclass(slots=True)
class HostedPartition:
    tp: TopicPartition
    topic_id: uuid.UUID
    log: PartitionLog
    replica: PartitionReplica
    producers: ProducerStateTable
    registration: PartitionRegistration | None = None
    following: FollowerPartition | None = None      # set while a follower of a live leader
    # This broker's replica is named by the topic's throttled-replicas configs (KIP-73).
    leader_throttled: bool = False
    follower_throttled: bool = False
    # Issue 21: the topic's ketch.mirror.* settings (None: not a mirror).
    mirror: MirrorConfig | None = None
    # The leader epoch this leader stamps on the batches it appends: the partition's
    # leader epoch, except after mirroring (``record_epoch_for_leader``).
    record_epoch: int = -1


@dataclass(slots=True)
class _IsrProposalState:
    """At most one AlterPartition in flight per partition; the newest proposal waits."""
    topic_id: uuid.UUID
    wanted: AlterIsr | None = None
    in_flight: AlterIsr | None = None
    resend_at_ms: int = 0


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, static_properties: Mapping[str, str],
                 replica_lag_time_max_ms: int = 30_000, replica_fetch_backoff_ms: int = 200,
                 rack_aware_reads: bool = False,
                 log_dir_move_bytes_per_poll: int = LOG_DIR_MOVE_BYTES_PER_POLL) -> None:
        assert log_dir_move_bytes_per_poll > 0, log_dir_move_bytes_per_poll
        self.broker_id = broker_id
        self.log_dir_move_bytes_per_poll = log_dir_move_bytes_per_poll
        # replica.selector.class = RackAwareReplicaSelector (KIP-392): a consumer that names
        # its rack is sent to an in-sync replica in that rack.
        self.rack_aware_reads = rack_aware_reads
        self.logs = log_manager
        self.static_properties = dict(static_properties)
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.replica_fetch_backoff_ms = replica_fetch_backoff_ms
        self.partitions: dict[TopicPartition, HostedPartition] = {}
        # Replicas whose log directory failed (Kafka's HostedPartition.Offline): never
        # re-created elsewhere from the metadata (that would be an empty log, and as a
        # leader it would lose acknowledged records); KAFKA_STORAGE_ERROR to requests.
        self.offline_partitions: set[TopicPartition] = set()
        self._applied_once = False
        self.image = MetadataImage()
        # Every config this broker applies or describes resolves through these layers.
        self.config_layers = ConfigLayers(self.image.configs, broker_id, self.static_properties)
        # Per topic, the LogConfig its config layers give: one shared object for all the
        # topic's partitions (parsed once, not per partition). Valid for config_layers.
        self._log_configs: dict[str, LogConfig] = {}
        self._hw_checkpoint = self._read_hw_checkpoint()
        # The replicas whose HW moved since high_watermark_checkpoints last looked (each
        # replica adds itself), so it visits those, not every hosted replica.
        self._hw_changed: set[TopicPartition] = set()
        self._leaderships_taken: list[tuple[TopicPartition, int, tuple[int, ...], int, int]] = []
        # Moves on whenever a topic id may have come or gone (a topic created or deleted):
        # what topic ids resolve to is the same while it stays put, whatever else changed;
        # the second one only when one may have gone (a topic deleted): while it stays
        # put, an id that resolved still does.
        self.topic_ids_version = 0
        self.topic_deletions_version = 0
        # Whether _hw_checkpoint lost an entry, and how many logs had moved, since
        # high_watermark_checkpoints last handed the files out (None: never).
        self._hw_checkpoint_removed = False
        self._hw_checkpoint_moves: int | None = None
        self._isr_proposals: dict[TopicPartition, _IsrProposalState] = {}
        # When each hosted replica's poll is next due (its parked produces' and laggards'
        # deadlines), so ``poll`` visits only the replicas that are due, not every hosted
        # one (at 100k partitions a full pass took seconds, four times a second). A change
        # that can bring a replica's deadline forward (a role or ISR change, a parked
        # produce) makes it due at once (``_poll_soon``); one that only moves it later (a
        # follower catching up) needs nothing: the early poll finds nothing due and says
        # when to come back. Heap entries whose time is not the replica's current one are
        # stale and skipped.
        self._poll_at: dict[TopicPartition, int] = {}
        self._poll_heap: list[tuple[int, int, TopicPartition]] = []
        self._poll_seq = itertools.count()
        # Hosted partitions whose topic is a mirror (``hosted.mirror`` set): the mirror
        # manager asks on every metadata change, which must not scan every partition.
        self._mirror_partitions: set[TopicPartition] = set()
        self._leader_backoff_until: dict[int, int] = {}
        # The partitions following each leader (``hosted.following`` set), so a round of
        # follower work for one leader visits its partitions, not every hosted one.
        self._following_by_leader: dict[int, dict[TopicPartition, HostedPartition]] = {}
        # Per leader, its round of follower work kept up to date partition by partition
        # (_FollowPlan): what changes a partition's part marks it (_mark_following);
        # what may change any (a throttle config, a log move, a retention pass) makes the
        # whole plan again. An idle follower's round at 100k partitions had visited
        # ~33,000 of them.
        self._follow_plans: dict[int, _FollowPlan] = {}
        self._follow_configs = 0            # throttle configs applied so far
        self._next_producer_expiry_ms: int | None = None
        # KIP-903: the broker epoch each follower named in its last Fetch (v15+).
        self._follower_broker_epochs: dict[int, int] = {}
        # When each follower broker's last incremental fetch came: what an idle partition
        # it is caught up on (not visited per fetch) counts as its last caught-up time
        # once this leader appends to it.
        self._follower_fetch_ms: dict[int, int] = {}
        self._effects: list[Effect] = []
        self._changed: set[TopicPartition] = set()
        self._hw_advanced: set[TopicPartition] = set()     # by a follower's report alone
        self.leader_quota = ReplicationQuota()
        self.follower_quota = ReplicationQuota()
        # ISR changes this broker's leaders got committed (Kafka's IsrShrinksPerSec and
        # IsrExpandsPerSec), read by the metrics collector.
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.apply_broker_configs()

    # ------------------------------------------------------------ effects

    def take_effects(self) -> list[Effect]:
        """What the shell must carry out, in order, since the last call."""
        self._handle_offline_dirs()
        if self._changed or self._hw_advanced:
            self._effects.append(PartitionsChanged(
                frozenset(self._changed | self._hw_advanced), frozenset(self._hw_advanced - self._changed)))
            self._changed = set()
            self._hw_advanced = set()
        effects, self._effects = self._effects, []
        return effects

    def _complete(self, completions: Iterable[ProduceCompletion]) -> None:
        self._effects.extend(completions)

    # ------------------------------------------------------------ configs

    def topic_config(self, topic: str) -> dict[str, str]:
        """The effective configs of ``topic`` on this broker (topic, then broker layers)."""
        return self.config_layers.topic_config(topic)

    def log_config_for(self, topic: str) -> LogConfig:
        config = self._log_configs.get(topic)
        if config is None:
            config = self._log_configs[topic] = LogConfig.from_properties(self.topic_config(topic))
        return config

    def min_insync_replicas(self, topic: str) -> int:
        try:
            return max(1, int(self.topic_config(topic).get("min.insync.replicas", "1")))
        except ValueError:
            return 1

    def _apply_topic_config(self, hosted: HostedPartition) -> None:
        """Configs reach the log (size, retention, roll, compaction, timestamps) and the
        replica (min.insync.replicas: the next append and every acks=all completion)."""
        try:
            config = self.log_config_for(hosted.tp.topic)
        except ValueError as e:
            # The controller validates every value it commits; a value this broker cannot
            # parse (a newer controller's) keeps the last good config rather than crashing.
            log.error("%s: config not applied: %s", hosted.tp, e)
            return
        if config != hosted.log.config:
            hosted.log.update_config(config)
        topic_config = self.topic_config(hosted.tp.topic)
        hosted.replica.min_insync_replicas = self.min_insync_replicas(hosted.tp.topic)
        hosted.replica.elr_enabled = elr_enabled(self.image)
        hosted.leader_throttled = throttled_here(topic_config.get("leader.replication.throttled.replicas"),
                                                 hosted.tp.partition, self.broker_id)
        follower_throttled = throttled_here(topic_config.get("follower.replication.throttled.replicas"),
                                            hosted.tp.partition, self.broker_id)
        if follower_throttled != hosted.follower_throttled:
            hosted.follower_throttled = follower_throttled
            self._follow_configs += 1
        was_fetching = hosted.mirror is not None and hosted.mirror.fetching
        hosted.mirror = mirror_config(hosted.tp.topic, topic_config)
        if hosted.mirror is None:
            self._mirror_partitions.discard(hosted.tp)
        else:
            self._mirror_partitions.add(hosted.tp)
        fetching = hosted.mirror is not None and hosted.mirror.fetching
        if was_fetching and (hosted.mirror is None or hosted.mirror.state is MirrorState.PROMOTED):
            self._forget_source_producers(hosted)
        if was_fetching and not fetching and hosted.replica.role is Role.LEADER:
            # Promoted or stopped: the mirror fetcher's answers are refused from here on
            # (``_mirror_leader``); new batches start a new epoch above every source one.
            self._start_record_epoch(hosted)

    def _forget_source_producers(self, hosted: HostedPartition) -> None:
        """A promoted mirror's producer state is the SOURCE cluster's: its producer ids
        mean nothing here and collide with the ones this cluster hands out (a new
        idempotent producer with id 0 got OUT_OF_ORDER_SEQUENCE_NUMBER against the
        source's producer 0). Forget them, with a snapshot so a restart does not replay
        them back from the log. Not done (yet): a replica that was offline when the
        promote committed keeps them (it sees no transition), and a source transaction
        left open at the promote is dropped without an abort marker."""
        hosted.producers.clear()
        try:
            hosted.log.write_producer_snapshot(hosted.log.log_end_offset, hosted.producers.to_snapshot())
        except OSError as e:
            self._log_io_failed(hosted.log, e)

    def apply_broker_configs(self) -> None:
        """The replication throttle rates (dynamic broker configs; a follower round
        decides its throttled partitions against them every time)."""
        def rate(key: str) -> int:
            try:
                return int(self.config_layers.broker_value(key) or UNLIMITED)
            except ValueError:
                return UNLIMITED    # the controller validates; never crash on a value
        self.leader_quota.bytes_per_s = rate("leader.replication.throttled.rate")
        self.follower_quota.bytes_per_s = rate("follower.replication.throttled.rate")

    def _topics_reconfigured(self, changes: Sequence[MetadataChange]) -> set[str] | None:
        """Topics whose effective configs the changes may have changed; None: all (a
        broker-level default changed)."""
        topics: set[str] = set()
        for change in changes:
            if not isinstance(change, ConfigChange):
                continue
            if change.resource_type == ConfigResourceType.TOPIC:
                topics.add(change.resource_name)
            elif (change.resource_type == ConfigResourceType.BROKER
                  and change.resource_name in ("", str(self.broker_id))):
                return None
        return topics

    # ------------------------------------------------------------ metadata

    def apply_metadata(self, image: MetadataImage, changes: Sequence[MetadataChange] | None,
                       now_ms: int) -> None:
        """Make hosted partitions match the committed image. ``changes``: the typed changes
        since the image last applied, in metadata order; None: anything may have changed."""
        if image.configs is not self.image.configs:
            self.config_layers = ConfigLayers(image.configs, self.broker_id, self.static_properties)
            self._log_configs = {}
            self.apply_broker_configs()
        if elr_enabled(image) != elr_enabled(self.image):
            for each in self.partitions.values():
                each.replica.elr_enabled = elr_enabled(image)
        self.image = image
        if changes is None or any(isinstance(c, (TopicCreated, TopicDeleted)) for c in changes):
            self.topic_ids_version += 1
            if changes is None or any(isinstance(c, TopicDeleted) for c in changes):
                self.topic_deletions_version += 1
        if changes is None:
            touched = {TopicPartition(t.name, i) for t, i, reg in image.topics.iter_partitions()
                       if self.broker_id in reg.replicas} | set(self.partitions)
            reconfigured: set[str] | None = None
        else:
            touched = {TopicPartition(c.topic, c.partition) for c in changes
                       if isinstance(c, _PARTITION_CHANGES)}
            for c in changes:
                if isinstance(c, TopicDeleted):
                    touched.update(tp for tp in self.partitions if tp.topic == c.topic)
            reconfigured = self._topics_reconfigured(changes)
        # Replicas this delta places here; at the first apply (start-up) none is new.
        new_here = self._replicas_new_here(changes) if self._applied_once else set()
        self._applied_once = True
        for tp in sorted(touched):
            self._apply_partition(tp, now_ms, tp in new_here)
        self._log_leaderships_taken()
        # Configs: every hosted partition when a broker default changed, else only those
        # of the reconfigured topics (a delta costs what it changes, not what is hosted).
        if reconfigured is None:
            candidates: Iterable[TopicPartition] = list(self.partitions)
        else:
            candidates = [TopicPartition(name, index) for name in sorted(reconfigured)
                          if (topic := image.topics.get(name)) is not None
                          for index in topic.partitions]
        for tp in candidates:
            hosted = self.partitions.get(tp)
            if hosted is not None and tp not in touched:
                self._apply_topic_config(hosted)

    def _log_leaderships_taken(self) -> None:
        """A line per leadership this delta gave the broker; past a few, one line for all
        (each at DEBUG): a failover at 100k partitions wrote 200,000 lines per broker."""
        taken, self._leaderships_taken = self._leaderships_taken, []
        level = logging.INFO if len(taken) <= LEADERSHIP_LINES_MAX else logging.DEBUG
        if level == logging.DEBUG:
            log.info("became leader of %d partitions (%s, ...; a line each at DEBUG)", len(taken),
                     ", ".join(str(tp) for tp, *_ in taken[:3]))
        if log.isEnabledFor(level):
            for tp, epoch, isr, leo, hw in taken:
                log.log(level, "%s: leader at epoch %d, ISR %s, LEO %d, HW %d", tp, epoch, list(isr), leo, hw)

    def _replicas_new_here(self, changes: Sequence[MetadataChange] | None) -> set[TopicPartition]:
        """Partitions the changes create with a replica here, or reassign to this broker."""
        new: set[TopicPartition] = set()
        for c in changes or ():
            if ((isinstance(c, PartitionCreated) and self.broker_id in c.registration.replicas)
                    or (isinstance(c, ReplicasChange) and self.broker_id in c.adding_replicas)):
                new.add(TopicPartition(c.topic, c.partition))
        return new

    def _apply_partition(self, tp: TopicPartition, now_ms: int, new_here: bool = False) -> None:
        topic = self.image.topics.get(tp.topic)
        reg = None if topic is None else topic.partitions.get(tp.partition)
        hosted = self.partitions.get(tp)
        if reg is None or self.broker_id not in reg.replicas:
            if hosted is not None:
                self._stop_partition(tp, delete=True)
            self.offline_partitions.discard(tp)     # its files stay on the failed disk
            return
        if tp in self.offline_partitions:
            return
        assert topic is not None        # a registration exists only within its topic
        if hosted is not None and hosted.topic_id != topic.topic_id:
            # The topic was deleted and recreated with the same name: start afresh.
            self._stop_partition(tp, delete=True)
            hosted = None
        if hosted is None:
            if (self.logs.offline_dirs and not new_here
                    and self.logs.get_log(tp.topic, tp.partition) is None):
                # Kafka's rule (LogManager.getOrCreateLog with isNew=false): an existing
                # replica whose log is not found while a log dir is offline may have its
                # log there. An empty log in another dir could be elected leader and lose
                # acknowledged records: the replica is offline instead.
                log.error("%s: no log in the online log dirs and %s offline: replica offline",
                          tp, ", ".join(sorted(self.logs.offline_dirs)))
                self.offline_partitions.add(tp)
                return
            try:
                hosted = self._create_partition(tp, topic.topic_id, now_ms)
            except OSError as e:
                existing = self.logs.get_log(tp.topic, tp.partition)
                if existing is not None:
                    self._log_io_failed(existing, e)    # reading it failed (producer state)
                log.error("%s: no log directory can hold it: %s", tp, e)
                self.offline_partitions.add(tp)
                return
        # A log opened at start-up has the static defaults: configure it now.
        self._apply_topic_config(hosted)
        if hosted.registration != reg:
            self._apply_registration(hosted, reg, now_ms)

    def _create_partition(self, tp: TopicPartition, topic_id: uuid.UUID, now_ms: int) -> HostedPartition:
        partition_log = self.logs.get_or_create_log(tp.topic, tp.partition, now_ms,
                                                    self.log_config_for(tp.topic))
        replica = PartitionReplica(tp, self.broker_id, self.replica_lag_time_max_ms,
                                   self.min_insync_replicas(tp.topic), self._hw_changed)
        hosted = HostedPartition(tp, topic_id, partition_log, replica,
                                 self._rebuild_producer_state(partition_log))
        self.partitions[tp] = hosted
        return hosted

    @staticmethod
    def _rebuild_producer_state(partition_log: PartitionLog) -> ProducerStateTable:
        """Producer state (idempotence and transactions) as of the LEO: the latest
        readable snapshot, then every batch after it (Kafka's loadProducerState). The
        replay also re-indexes the aborted transactions it meets (idempotently), so an
        index that lost its tail in a crash is whole again. Without a snapshot the whole
        log is read (headers, and the records of control batches only)."""
        table = ProducerStateTable()
        start = partition_log.log_start_offset
        for offset in reversed(partition_log.producer_snapshot_offsets):
            if offset > partition_log.log_end_offset:
                continue
            try:
                table = ProducerStateTable.from_snapshot(partition_log.read_producer_snapshot(offset))
            except (SnapshotError, OSError) as e:
                log.warning("%s: producer snapshot %d unusable (%s)", partition_log.dir_path, offset, e)
                partition_log.delete_producer_snapshot(offset)
                continue
            start = max(offset, partition_log.log_start_offset)
            break
        replay_log(table, partition_log, start)
        return table

    def _apply_registration(self, hosted: HostedPartition, reg: PartitionRegistration, now_ms: int) -> None:
        replica = hosted.replica
        was_leader = replica.role is Role.LEADER
        if reg.leader == self.broker_id:
            if was_leader and reg.leader_epoch == replica.leader_epoch:
                self._complete(replica.apply_committed(
                    reg.leader_epoch, reg.partition_epoch, reg.isr, reg.replicas, now_ms,
                    reg.leader_recovery_state == LeaderRecoveryState.RECOVERING))
            else:
                self._set_following(hosted, None)
                # Kafka's makeLeader (maybeAssignEpochStartOffset): the new epoch starts at
                # our LEO now, not at our first append. A follower ahead of us (we were
                # elected with a shorter log: unclean, or the last ISR member after a power
                # cut) then learns where our epochs end and truncates; with no entry we
                # answered UNDEFINED and it looped truncate/out-of-range for ever (found by
                # tests/sim, --power-cuts seed 10939).
                # An active mirror's cache stays in the source's epoch space: its leader
                # writes nothing of its own (issue 21).
                if hosted.mirror is None or not hosted.mirror.fetching:
                    self._start_record_epoch(hosted, reg.leader_epoch)
                hw = max(self._hw_checkpoint.get(hosted.tp, 0),
                         replica.high_watermark)
                self._complete(replica.become_leader(
                    reg.leader_epoch, reg.partition_epoch, reg.replicas, reg.isr,
                    hosted.log.log_start_offset, hosted.log.log_end_offset, hw, now_ms,
                    recovering=reg.leader_recovery_state == LeaderRecoveryState.RECOVERING))
                self._leaderships_taken.append((hosted.tp, reg.leader_epoch, reg.isr,
                                                hosted.log.log_end_offset, replica.high_watermark))
        else:
            changed_leader = (replica.role is not Role.FOLLOWER or replica.leader_id != reg.leader
                              or replica.leader_epoch != reg.leader_epoch)
            self._complete(replica.become_follower(reg.leader, reg.leader_epoch, reg.partition_epoch,
                                                   reg.replicas, reg.isr))
            if changed_leader:
                self._start_following(hosted, now_ms)
        hosted.registration = reg
        self._changed.add(hosted.tp)
        self._poll_soon(hosted.tp)
        if was_leader != (replica.role is Role.LEADER):
            self._effects.append(LeadershipChanged(hosted.tp, replica.role is Role.LEADER))

    def _start_record_epoch(self, hosted: HostedPartition, leader_epoch: int | None = None) -> None:
        """This leader's epoch for its own appends starts at the LEO (see
        ``record_epoch_for_leader``)."""
        epoch = hosted.replica.leader_epoch if leader_epoch is None else leader_epoch
        hosted.record_epoch = record_epoch_for_leader(epoch, hosted.log.latest_epoch)
        hosted.log.assign_epoch_start(hosted.record_epoch, hosted.log.log_end_offset)

    def _start_following(self, hosted: HostedPartition, now_ms: int) -> None:
        replica = hosted.replica
        if replica.leader_id == NO_LEADER:
            self._set_following(hosted, None)
            return
        plog = hosted.log
        if plog.latest_epoch < 0 and plog.log_end_offset > replica.high_watermark:
            # Records but no epochs to ask the leader about (a log written before epochs
            # were kept): what is above the HW may diverge from the leader's, so it goes,
            # as Kafka's fetcher does then (truncateToHighWatermark).
            log.info("%s: no leader epochs: truncating from %d to the HW %d", hosted.tp,
                     plog.log_end_offset, replica.high_watermark)
            if not self._truncate_following(hosted, replica.high_watermark, now_ms):
                return
        following = FollowerPartition(leader_id=replica.leader_id, leader_epoch=replica.leader_epoch,
                                      fetch_offset=plog.log_end_offset, epoch_to_ask=plog.latest_epoch)
        if plog.latest_epoch < 0:
            following.state = FetchState.FETCHING   # nothing local that could diverge
        self._set_following(hosted, following)
        self._effects.append(FetchFromLeader(replica.leader_id))

    def _set_following(self, hosted: HostedPartition, following: FollowerPartition | None) -> None:
        """The one place ``hosted.following`` changes, with the index by leader."""
        before = hosted.following
        if before is not None:
            self._mark_following(hosted.tp, before.leader_id)
            followers = self._following_by_leader.get(before.leader_id)
            if followers is not None:
                followers.pop(hosted.tp, None)
                if not followers:
                    del self._following_by_leader[before.leader_id]
        hosted.following = following
        if following is not None:
            self._following_by_leader.setdefault(following.leader_id, {})[hosted.tp] = hosted
            self._mark_following(hosted.tp, following.leader_id)

    def _mark_following(self, tp: TopicPartition, leader_id: int) -> None:
        """``tp``'s part in its leader's next round may have changed."""
        plan = self._follow_plans.get(leader_id)
        if plan is not None:
            plan.dirty.add(tp)

    def _stop_partition(self, tp: TopicPartition, delete: bool) -> None:
        hosted = self.partitions.pop(tp, None)
        if hosted is None:
            return
        was_leader = hosted.replica.role is Role.LEADER
        self._set_following(hosted, None)
        self._isr_proposals.pop(tp, None)
        self._poll_at.pop(tp, None)     # its heap entry is stale now
        self._mirror_partitions.discard(tp)
        self._complete(hosted.replica.stop())
        self._changed.add(tp)
        if was_leader:
            self._effects.append(LeadershipChanged(tp, False))
        if delete:
            self.logs.delete_log(tp.topic, tp.partition)
            if self._hw_checkpoint.pop(tp, None) is not None:
                self._hw_checkpoint_removed = True
            log.info("%s: no longer hosted here; log deleted", tp)

    # ------------------------------------------------------------ produce

    def _unknown_code(self, tp: TopicPartition) -> int:
        if tp in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        topic = self.image.topics.get(tp.topic)
        if topic is not None and tp.partition in topic.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def check_produce(self, tp: TopicPartition, records: bytes | bytearray | memoryview | None,
                      acks: int) -> ProduceResult | None:
        """The answer a Produce of ``records`` gets without appending anything: a refusal,
        or an idempotent retry's original offsets (a duplicate); None: ``append`` them.
        Delayed delivery asks before it parks records (``broker.delayed``), so that a
        refused or duplicate batch parks nothing."""
        checked = self._check_append(tp, records, acks, from_coordinator=False)
        return checked if isinstance(checked, ProduceResult) else None

    def _check_append(self, tp: TopicPartition, records: bytes | bytearray | memoryview | None,
                      acks: int, from_coordinator: bool
                      ) -> ProduceResult | tuple[HostedPartition, list[BatchHeader]]:
        """``append``'s checks before the log changes: its answer, or what it appends."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            return ProduceResult(self._unknown_code(tp))
        check = hosted.replica.check_append(acks)
        if check.error_code != ErrorCode.NONE:
            return ProduceResult(check.error_code)
        if hosted.mirror is not None and hosted.mirror.read_only:
            return ProduceResult(ErrorCode.INVALID_REQUEST,
                                 error_message=read_only_message(tp.topic, hosted.mirror))
        if records is None or len(records) == 0:
            return ProduceResult(ErrorCode.NONE, hosted.log.log_end_offset,
                                 log_start_offset=hosted.log.log_start_offset)
        try:
            # Parsed and CRC-checked once: the log takes these headers as they are.
            headers = validate_batches(records)
        except RecordError as e:
            return ProduceResult(e.error_code, error_message=str(e))
        # Idempotence: Kafka clients send one batch per partition; check each in order.
        duplicate = None
        for h in headers:
            seq = hosted.producers.check(h.producer_id, h.producer_epoch, h.base_sequence,
                                         h.last_offset_delta, h.is_transactional)
            if from_coordinator:
                if seq.error_code == ErrorCode.INVALID_PRODUCER_EPOCH:
                    return ProduceResult(seq.error_code,
                                         log_start_offset=hosted.log.log_start_offset)
                continue
            if seq.error_code != ErrorCode.NONE:
                return ProduceResult(seq.error_code, log_start_offset=hosted.log.log_start_offset)
            if seq.duplicate_of is not None:
                duplicate = seq.duplicate_of
        if duplicate is not None and len(headers) == 1:
            # A retry of a batch we already have: acknowledge its original offsets.
            return ProduceResult(ErrorCode.NONE, duplicate.first_offset,
                                 log_start_offset=hosted.log.log_start_offset,
                                 required_offset=duplicate.last_offset + 1 if acks == -1 else None)
        return hosted, headers

    def append(self, tp: TopicPartition, records: bytes | bytearray | memoryview | None, acks: int,
               now_ms: int, from_coordinator: bool = False, reserved_gaps: bool = False) -> ProduceResult:
        """Append to a led partition (idempotence checks first). For acks=all the result
        names the offset the HW must reach before ``await_replication`` completes it.
        ``reserved_gaps``: PartitionLog.append_as_leader's (delayed delivery).

        ``from_coordinator``: the group coordinator's own batches (Kafka's
        AppendOrigin.COORDINATOR), whose TxnOffsetCommit batches all carry base sequence 0:
        only a stale producer epoch refuses them, sequences are not checked."""
        checked = self._check_append(tp, records, acks, from_coordinator)
        if isinstance(checked, ProduceResult):
            return checked
        hosted, headers = checked
        assert records is not None
        # A request's records are a writable view into its own frame (clients.protocol
        # framing): stamped in place, never copied; read-only bytes are copied once.
        buf = records if writable(records) else bytearray(records)
        active_base = hosted.log.active_segment.base_offset
        try:
            result = hosted.log.append_as_leader(buf, hosted.record_epoch, now_ms,
                                                 reserved_gaps=reserved_gaps, headers=headers)
        except OSError as e:
            self._log_io_failed(hosted.log, e)
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(e))
        if result.error_code != ErrorCode.NONE:
            return ProduceResult(result.error_code, error_message=result.error_message,
                                 log_start_offset=hosted.log.log_start_offset,
                                 record_errors=result.record_errors)
        offset = result.base_offset
        for h in headers:
            hosted.producers.update(h.producer_id, h.producer_epoch, h.base_sequence,
                                    h.last_offset_delta, offset, h.max_timestamp, h.is_transactional)
            offset += h.last_offset_delta + 1
        self._maybe_snapshot_producers(hosted, active_base)
        self._leader_appended(hosted, now_ms)
        self._changed.add(tp)
        return ProduceResult(ErrorCode.NONE, result.base_offset, result.log_append_time_ms,
                             result.log_start_offset,
                             required_offset=result.last_offset + 1 if acks == -1 else None,
                             records_appended=result.last_offset - result.base_offset + 1)

    def append_txn_marker(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                          committed: bool, coordinator_epoch: int, now_ms: int) -> ProduceResult:
        """WriteTxnMarkers for one partition (Kafka's appendRecords with origin
        COORDINATOR): a control batch ending ``producer_id``'s transaction, appended by
        this leader; for acks=all the result names the offset the HW must reach. The
        ``TxnMarkerAppended`` effect follows at once."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            # Kafka's getMagic finds no local log: UNKNOWN_TOPIC_OR_PARTITION (the
            # coordinator looks the leader up again), whatever the metadata says.
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR if tp in self.offline_partitions
                                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        replica = hosted.replica
        check = replica.check_append(-1)
        if check.error_code != ErrorCode.NONE:
            return ProduceResult(check.error_code)
        if hosted.mirror is not None and hosted.mirror.read_only:
            # A mirror's markers come from the source, byte-identical with its batches.
            return ProduceResult(ErrorCode.INVALID_REQUEST,
                                 error_message=read_only_message(tp.topic, hosted.mirror))
        code = hosted.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if code != ErrorCode.NONE:
            return ProduceResult(code, log_start_offset=hosted.log.log_start_offset)
        batch = bytearray(build_control_batch(
            ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
            end_transaction_marker_value(coordinator_epoch), timestamp_ms=now_ms,
            producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True))
        active_base = hosted.log.active_segment.base_offset
        try:
            result = hosted.log.append_as_leader(batch, hosted.record_epoch, now_ms,
                                                 AppendOrigin.COORDINATOR)
        except OSError as e:
            self._log_io_failed(hosted.log, e)
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(e))
        if result.error_code != ErrorCode.NONE:
            return ProduceResult(result.error_code, error_message=result.error_message,
                                 log_start_offset=hosted.log.log_start_offset)
        completed = hosted.producers.update_marker(producer_id, producer_epoch, result.base_offset,
                                                   committed, coordinator_epoch, now_ms)
        if completed is not None and completed.is_aborted:
            try:
                hosted.log.append_aborted_txn(AbortedTxn(
                    producer_id, completed.first_offset, completed.last_offset,
                    hosted.producers.last_stable_offset_after(completed)))
            except OSError as e:
                self._log_io_failed(hosted.log, e)
                return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(e))
        self._maybe_snapshot_producers(hosted, active_base)
        self._effects.append(TxnMarkerAppended(tp, producer_id, committed))
        self._leader_appended(hosted, now_ms)
        self._changed.add(tp)       # the LSO may have moved: parked read_committed fetches
        return ProduceResult(ErrorCode.NONE, result.base_offset, log_start_offset=result.log_start_offset,
                             required_offset=result.last_offset + 1, records_appended=1)

    def _maybe_snapshot_producers(self, hosted: HostedPartition, active_base_before: int) -> None:
        """A segment rolled during the last append: snapshot the producer state as of the
        LEO (Kafka snapshots at every roll), so a restart replays at most the active
        segment's batches after it."""
        plog = hosted.log
        if plog.active_segment.base_offset == active_base_before:
            return
        try:
            plog.write_producer_snapshot(plog.log_end_offset, hosted.producers.to_snapshot())
        except OSError as e:
            self._log_io_failed(plog, e)

    def last_stable_offset(self, hosted: HostedPartition) -> int:
        """min(first unstable offset, high watermark): read_committed reads below it."""
        hw = hosted.replica.high_watermark
        first_unstable = hosted.producers.first_unstable_offset()
        return hw if first_unstable is None else min(first_unstable, hw)

    def last_stable_offset_of(self, topic: str, partition: int) -> int:
        """The cleaner's bound: it never cleans at or beyond the first unstable offset
        (nor the HW)."""
        hosted = self.partitions.get(TopicPartition(topic, partition))
        return 0 if hosted is None else self.last_stable_offset(hosted)

    def last_records_of(self, topic: str, partition: int) -> dict[int, LastRecord]:
        """The cleaner's view of the partition's producer state: the batches it keeps."""
        hosted = self.partitions.get(TopicPartition(topic, partition))
        return {} if hosted is None else hosted.producers.last_records()

    def await_replication(self, tp: TopicPartition, token: Hashable, required_offset: int,
                          deadline_ms: int) -> bool:
        """acks=all: complete ``token`` (a ``ProduceCompletion`` effect) once the HW passes
        ``required_offset``, or fails; False: not the leader (nothing parked)."""
        hosted = self.partitions.get(tp)
        if hosted is None or hosted.replica.role is not Role.LEADER:
            return False
        self._complete(hosted.replica.await_replication(token, required_offset, deadline_ms))
        self._poll_soon(tp)
        return True

    def delete_records(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        """DeleteRecords: move the log start offset (-1: to the HW); (error, low watermark)."""
        hosted = self.partitions.get(tp)
        if hosted is None or hosted.replica.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        if hosted.mirror is not None and hosted.mirror.read_only:
            return ErrorCode.INVALID_REQUEST, -1
        hw = hosted.replica.high_watermark
        try:
            code = hosted.log.maybe_increment_log_start_offset(hw if offset == -1 else offset, hw)
        except OSError as e:
            self._log_io_failed(hosted.log, e)
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        hosted.replica.on_log_start_offset(hosted.log.log_start_offset)
        self._changed.add(hosted.tp)    # the followers' sessions are told the new log start
        return code, hosted.log.log_start_offset

    # ------------------------------------------------------------ reads (consumers and followers)

    def check_leader_epoch(self, hosted: HostedPartition, current_leader_epoch: int) -> int:
        """KIP-320: fence requests that name another leader epoch (-1: no check)."""
        if current_leader_epoch < 0:
            return ErrorCode.NONE
        if current_leader_epoch < hosted.replica.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > hosted.replica.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def read(self, tp: TopicPartition, fetch_offset: int, max_bytes: int, current_leader_epoch: int,
             replica_id: int, now_ms: int, min_one_batch: bool,
             client_rack: str | None = None, replica_epoch: int = NO_BROKER_EPOCH,
             isolation_level: int = READ_UNCOMMITTED, update_fetch_state: bool = True) -> ReadResult:
        """Fetch from the leader: consumers read below the HW; a follower (``replica_id``
        >= 0) reads below the LEO, and its fetch offset reports its LEO (Kafka's rule) —
        once per Fetch request: a parked fetch's later reads pass ``update_fetch_state``
        False (Kafka's readFromPurgatory), as its offset says nothing new.
        KIP-392: a consumer whose Fetch carries client metadata (v11+: ``client_rack`` not
        None, maybe empty) may also read from a follower, below the HW the follower knows,
        and a leader sends a consumer in another rack to a replica in the consumer's.
        read_committed (``isolation_level`` 1, consumers only: followers always read
        uncommitted) reads below the last stable offset and gets the aborted
        transactions overlapping what it reads; the records stay a zero-copy slice."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            return ReadResult(self._unknown_code(tp))
        replica = hosted.replica
        if replica.role is not Role.LEADER:
            if replica.role is Role.FOLLOWER and replica_id < 0 and client_rack is not None:
                return self._read_as_follower(hosted, fetch_offset, max_bytes,
                                              current_leader_epoch, min_one_batch, isolation_level)
            return ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        code = self.check_leader_epoch(hosted, current_leader_epoch)
        if code != ErrorCode.NONE:
            return ReadResult(code)
        is_follower = replica_id >= 0
        if not is_follower and client_rack and self.rack_aware_reads:
            preferred = self._preferred_read_replica(hosted, client_rack)
            if preferred != self.broker_id:
                # Kafka answers with no records: the consumer asks the preferred replica.
                return ReadResult(ErrorCode.NONE, replica.high_watermark,
                                  hosted.log.log_start_offset, hosted.log.log_end_offset,
                                  preferred_read_replica=preferred)
        if is_follower:
            if replica_id not in replica.replicas:
                return ReadResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self._follower_broker_epochs[replica_id] = replica_epoch
            if update_fetch_state and fetch_offset <= hosted.log.log_end_offset:
                hw_before = replica.high_watermark
                completions, proposals = replica.on_follower_fetch(replica_id, fetch_offset, now_ms)
                self._complete(completions)
                for proposal in proposals:
                    self._propose_isr(hosted, proposal, now_ms)
                if replica.high_watermark != hw_before:
                    # Consumers long-polling below the old HW can read now.
                    self._hw_advanced.add(tp)
        read_committed = not is_follower and isolation_level == READ_COMMITTED
        lso = self.last_stable_offset(hosted)
        if is_follower:
            upper = hosted.log.log_end_offset
        else:
            upper = lso if read_committed else replica.high_watermark
        log_start, log_end = hosted.log.log_start_offset, hosted.log.log_end_offset
        if log_start <= fetch_offset <= log_end and fetch_offset >= min(upper, log_end):
            # Nothing to read (mostly idle partitions a follower's session names on every
            # fetch): the log's read would answer just this.
            return ReadResult(ErrorCode.NONE, replica.high_watermark, log_start, log_end, None,
                              hosted.log, last_stable_offset=lso,
                              aborted_transactions=() if read_committed else None)
        throttled = is_follower and hosted.leader_throttled and replica_id not in replica.isr
        if throttled and self.leader_quota.is_exceeded(now_ms):
            # KIP-73: a throttled follower gets no data this round (its position counted).
            return ReadResult(ErrorCode.NONE, replica.high_watermark, hosted.log.log_start_offset,
                              hosted.log.log_end_offset, None, hosted.log)
        try:
            result = hosted.log.read(fetch_offset, max_bytes, upper, min_one_batch)
        except OSError as e:
            self._log_io_failed(hosted.log, e)
            return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR)
        records = None
        if result.error_code == ErrorCode.NONE and not result.records.is_empty:
            records = result.records
            if throttled:
                self.leader_quota.record(records.length_bytes, now_ms)
        return ReadResult(result.error_code, replica.high_watermark, result.log_start_offset,
                          result.log_end_offset, records, hosted.log, last_stable_offset=lso,
                          aborted_transactions=self._aborted_in(hosted, fetch_offset, records)
                          if read_committed else None)

    def report_idle_follower_fetches(
            self, replica_id: int, replica_epoch: int,
            positions: Iterable[tuple[TopicPartition, int, int, int, int]], now_ms: int
    ) -> set[TopicPartition]:
        """A follower's incremental fetch (KIP-227), for the session partitions it did not
        name: (partition, fetch offset, current leader epoch, and the HW and log start
        offset it was last told). Those with nothing to answer — this broker leads in that
        epoch, the follower is in sync at this log end, the HW is there too, and the HW and
        log start are the ones it was told — get the follower's fetch-state report a
        ``read`` would make (it is caught up now) and are returned: they need no read and
        no place in the answer. The others are left alone for ``read``. One call per
        fetch; the caller passes only partitions that changed or were not idle at its
        last fetch: one that stays idle needs no report per fetch, as the follower stays
        in sync at the LEO (Kafka's isCaughtUp) and the fetch's time is kept per follower
        (``PartitionReplica.on_local_append``)."""
        self._follower_fetch_ms[replica_id] = now_ms
        self._follower_broker_epochs[replica_id] = replica_epoch
        quiet: set[TopicPartition] = set()
        partitions = self.partitions
        for tp, fetch_offset, leader_epoch, told_hw, told_log_start in positions:
            hosted = partitions.get(tp)
            if hosted is None:
                continue
            replica = hosted.replica
            if ((leader_epoch >= 0 and leader_epoch != replica.leader_epoch)
                    or told_hw != replica.high_watermark
                    or told_log_start != hosted.log.log_start_offset
                    or fetch_offset != hosted.log.log_end_offset
                    or not replica.on_idle_follower_fetch(replica_id, fetch_offset, now_ms)):
                continue
            quiet.add(tp)
        return quiet

    @staticmethod
    def _aborted_in(hosted: HostedPartition, fetch_offset: int,
                    records: FileSlice | None) -> tuple[AbortedTxn, ...]:
        """The aborted transactions a read_committed consumer needs for ``records``:
        those overlapping [fetch_offset, last offset read] (batch-level: the index only)."""
        if records is None:
            return ()
        return tuple(hosted.log.collect_aborted_transactions(fetch_offset, records.last_offset + 1))

    def _preferred_read_replica(self, hosted: HostedPartition, client_rack: str) -> int:
        """Kafka's RackAwareReplicaSelector over the replicas a consumer may read from:
        the leader and its in-sync, unfenced followers. The leader when it is in the
        consumer's rack or no replica is; else the lowest-id replica in that rack."""
        cluster = self.image.cluster
        leader = cluster.get(self.broker_id)
        if leader is not None and leader.rack == client_rack:
            return self.broker_id
        in_rack = sorted(b for b in hosted.replica.isr
                         if b != self.broker_id and cluster.is_active(b)
                         and (reg := cluster.get(b)) is not None and reg.rack == client_rack)
        return in_rack[0] if in_rack else self.broker_id

    def _read_as_follower(self, hosted: HostedPartition, fetch_offset: int, max_bytes: int,
                          current_leader_epoch: int, min_one_batch: bool,
                          isolation_level: int) -> ReadResult:
        """A consumer's fetch from this follower (KIP-392): below the HW it last learned
        from the leader; its leader epoch must be the one this follower follows."""
        replica = hosted.replica
        code = self.check_leader_epoch(hosted, current_leader_epoch)
        if code != ErrorCode.NONE:
            return ReadResult(code)
        read_committed = isolation_level == READ_COMMITTED
        lso = self.last_stable_offset(hosted)
        try:
            result = hosted.log.read(fetch_offset, max_bytes,
                                     lso if read_committed else replica.high_watermark, min_one_batch)
        except OSError as e:
            self._log_io_failed(hosted.log, e)
            return ReadResult(ErrorCode.KAFKA_STORAGE_ERROR)
        records = None
        if result.error_code == ErrorCode.NONE and not result.records.is_empty:
            records = result.records
        return ReadResult(result.error_code, replica.high_watermark, result.log_start_offset,
                          result.log_end_offset, records, hosted.log, last_stable_offset=lso,
                          aborted_transactions=self._aborted_in(hosted, fetch_offset, records)
                          if read_committed else None)

    def describe_producers(self, tp: TopicPartition) -> tuple[int, list[ActiveProducer]]:
        """DescribeProducers for one partition: its leader's producer state."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            return self._unknown_code(tp), []
        if hosted.replica.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, []
        return ErrorCode.NONE, hosted.producers.active_producers()

    def list_offset(self, tp: TopicPartition, timestamp: int, current_leader_epoch: int,
                    replica_id: int, isolation_level: int = READ_UNCOMMITTED
                    ) -> tuple[int, int, int, int]:
        """ListOffsets for one partition: (error, timestamp, offset, leader epoch).
        read_committed: the latest offset is the LSO, and lookups by time find nothing
        at or above it (Kafka's fetchOffsetForTimestamp bound)."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            return self._unknown_code(tp), -1, -1, -1
        if hosted.replica.role is not Role.LEADER and replica_id != -2:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1
        code = self.check_leader_epoch(hosted, current_leader_epoch)
        if code != ErrorCode.NONE:
            return code, -1, -1, -1
        last_fetchable = hosted.replica.high_watermark
        if isolation_level == READ_COMMITTED and replica_id < 0:
            last_fetchable = self.last_stable_offset(hosted)
        if timestamp == LATEST_TIMESTAMP:
            return ErrorCode.NONE, -1, last_fetchable, hosted.replica.leader_epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            # Without tiered storage the local log starts where the log does (Kafka's
            # UnifiedLog when remote storage is off).
            start = hosted.log.log_start_offset
            return ErrorCode.NONE, -1, start, hosted.log.leader_epoch_cache.epoch_for_offset(start)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return ErrorCode.NONE, -1, -1, -1          # nothing is tiered (KIP-1005)
        found = hosted.log.offset_for_timestamp(timestamp)
        if found is None or found.offset >= last_fetchable:
            return ErrorCode.NONE, -1, -1, -1
        return ErrorCode.NONE, found.timestamp, found.offset, found.leader_epoch

    def end_offset_for_epoch(self, tp: TopicPartition, leader_epoch: int,
                             current_leader_epoch: int) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch: (error, epoch, end offset)."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            return self._unknown_code(tp), -1, -1
        if hosted.replica.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
        code = self.check_leader_epoch(hosted, current_leader_epoch)
        if code != ErrorCode.NONE:
            return code, -1, -1
        answer = hosted.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.NONE, answer.leader_epoch, answer.end_offset

    # ------------------------------------------------------------ ISR proposals

    def _propose_isr(self, hosted: HostedPartition, proposal: AlterIsr, now_ms: int) -> None:
        # Kafka's leaders do not propose fenced or shutting-down replicas for the ISR (the
        # controller would refuse with INELIGIBLE_REPLICA, again on every fetch).
        # KIP-903: nor one whose last Fetch named another broker epoch than its registration
        # (a fetch from before the follower restarted with an empty disk, say); -1: a
        # fetch before v15, which names none (Kafka's isBrokerEpochIsrEligible).
        cluster = self.image.cluster
        for broker_id in set(proposal.new_isr) - set(hosted.replica.isr):
            reg = cluster.get(broker_id)
            fetched_epoch = self._follower_broker_epochs.get(broker_id, NO_BROKER_EPOCH)
            if reg is None or reg.fenced or reg.in_controlled_shutdown or (
                    fetched_epoch != NO_BROKER_EPOCH and fetched_epoch != reg.broker_epoch):
                self._complete(hosted.replica.abandon_pending_isr())    # never sent: nothing to undo
                self._poll_soon(hosted.tp)
                return
        state = self._isr_proposals.get(hosted.tp)
        if state is None or state.topic_id != hosted.topic_id:
            state = self._isr_proposals[hosted.tp] = _IsrProposalState(hosted.topic_id)
        state.wanted = proposal
        state.resend_at_ms = 0          # a new proposal goes out at once
        self._maybe_send_alter_partition(hosted.tp, now_ms)

    def _proposal_current(self, proposal: AlterIsr, topic_id: uuid.UUID) -> bool:
        hosted = self.partitions.get(proposal.partition)
        if hosted is None or hosted.topic_id != topic_id:
            return False
        replica = hosted.replica
        return (replica.role is Role.LEADER and replica.leader_epoch == proposal.leader_epoch
                and replica.pending_isr == proposal.new_isr)

    def _maybe_send_alter_partition(self, tp: TopicPartition, now_ms: int) -> None:
        state = self._isr_proposals.get(tp)
        if state is None or state.in_flight is not None:
            return
        proposal = state.wanted
        if proposal is None or not self._proposal_current(proposal, state.topic_id):
            del self._isr_proposals[tp]
            return
        if now_ms < state.resend_at_ms:
            return
        state.wanted, state.in_flight = None, proposal
        cluster = self.image.cluster
        epochs = tuple((b, registration.broker_epoch if registration is not None else -1)
                       for b, registration in ((b, cluster.get(b)) for b in proposal.new_isr))
        self._effects.append(SendAlterPartition(proposal, state.topic_id, epochs))

    def handle_alter_partition_response(self, proposal: AlterIsr, answer: AlterPartitionAnswer | None,
                                        now_ms: int) -> None:
        """The controller's answer to ``proposal``; None: the answer was lost (timeout,
        connection, no controller), so the proposal may or may not be committed."""
        tp = proposal.partition
        state = self._isr_proposals.get(tp)
        if state is None or state.in_flight != proposal:
            return
        state.in_flight = None
        hosted = self.partitions.get(tp)
        if answer is None:
            log.warning("%s: AlterPartition answer lost; the proposal stays pending", tp)
            if state.wanted is None and self._proposal_current(proposal, state.topic_id):
                state.wanted = proposal
                state.resend_at_ms = now_ms + ALTER_PARTITION_RETRY_MS
        elif answer.error_code == ErrorCode.NONE:
            if hosted is not None and hosted.replica.role is Role.LEADER:
                log.info("%s: ISR %s committed at partition epoch %d", tp, list(answer.isr),
                         answer.partition_epoch)
                if len(answer.isr) < len(hosted.replica.isr):
                    self.isr_shrinks += 1
                elif len(answer.isr) > len(hosted.replica.isr):
                    self.isr_expands += 1
                self._complete(hosted.replica.apply_committed(
                    answer.leader_epoch, answer.partition_epoch, answer.isr, hosted.replica.replicas,
                    now_ms, answer.recovering))
                self._changed.add(tp)
        else:
            log.info("%s: AlterPartition refused: %s", tp, ErrorCode(answer.error_code).name)
            if (hosted is not None and answer.error_code in ALTER_PARTITION_NOT_APPLIED
                    and self._proposal_current(proposal, state.topic_id)):
                self._complete(hosted.replica.abandon_pending_isr())
        if hosted is not None:
            self._poll_soon(tp)     # a committed or abandoned ISR change may let it shrink
        self._maybe_send_alter_partition(tp, now_ms)

    # ------------------------------------------------------------ following

    def follower_work(self, leader_id: int, now_ms: int) -> FollowerWork | None:
        """The next round of requests to ``leader_id``; None: nothing follows it any more.
        A fetch position that has not changed since the last round is the same object,
        and a round in which nothing changed is the last round's FollowerWork again.
        ``FollowerWork.changed`` says which positions changed since the last round."""
        followers = self._following_by_leader.get(leader_id)
        if not followers:
            self._follow_plans.pop(leader_id, None)
            return None
        backoff_until = self._leader_backoff_until.get(leader_id, 0)
        if backoff_until > now_ms:
            return FollowerWork(leader_id, (), (), max(1, backoff_until - now_ms), {})
        inputs = (self._follow_configs, self.logs.moves_completed, self.logs.retention_runs)
        plan = self._follow_plans.get(leader_id)
        if plan is None or plan.inputs != inputs:
            # Every partition is decided again; an unchanged position stays the same
            # object (the fetcher and its session tell them by identity).
            kept = PositionsByTopic[FetchPosition](
                () if plan is None else ((tp, p) for tp, p in plan.positions.items() if tp in followers))
            plan = self._follow_plans[leader_id] = _FollowPlan(inputs, kept)
            plan.dirty.update(followers)
            changed: dict[TopicPartition, FetchPosition | None] | None = None
        else:
            changed = {}
            if plan.waiting:
                plan.dirty.update(tp for tp, at in plan.waiting.items() if at <= now_ms)
            plan.dirty.update(plan.throttled)
            if not plan.dirty and plan.work is not None:
                return plan.work
        positions, queries = plan.positions, plan.queries
        quota_wait = False
        for tp in plan.dirty:
            before = positions.pop(tp, None)
            queries.pop(tp, None)
            plan.waiting.pop(tp, None)
            plan.throttled.discard(tp)
            position = None
            hosted = followers.get(tp)
            if hosted is not None:
                tp = hosted.tp      # the hosted key, not one decoded from an answer: kept
            f = None if hosted is None else hosted.following
            if hosted is None or f is None or f.paused:
                pass            # no longer follows this leader; or waits for the metadata
            elif f.retry_at_ms > now_ms:
                plan.waiting[tp] = f.retry_at_ms
            elif f.state is FetchState.TRUNCATING:
                queries[tp] = EpochQuery(tp, f.leader_epoch, f.epoch_to_ask)
            elif hosted.follower_throttled and self._follower_throttled(hosted):
                plan.throttled.add(tp)          # the quota decides per round
                if self.follower_quota.is_exceeded(now_ms):
                    quota_wait = True
                else:
                    position = positions[tp] = self._fetch_position(hosted, f, before)
            else:
                position = positions[tp] = self._fetch_position(hosted, f, before)
            if changed is not None and position is not before:
                changed[tp] = position
        plan.dirty.clear()
        wait_ms = self.replica_fetch_backoff_ms
        if plan.waiting:
            wait_ms = min(wait_ms, max(1, min(plan.waiting.values()) - now_ms))
        if quota_wait:
            wait_ms = min(wait_ms, self.follower_quota.sample_ms)
        plan.work = FollowerWork(leader_id, tuple(queries.values()), positions.round_positions(), wait_ms,
                                 changed)
        return plan.work

    @staticmethod
    def _fetch_position(hosted: HostedPartition, f: FollowerPartition,
                        before: FetchPosition | None) -> FetchPosition:
        """The partition's position: ``before`` (the plan's last) while it does not change."""
        log_start = hosted.log.log_start_offset
        if (before is not None and before.fetch_offset == f.fetch_offset
                and before.current_leader_epoch == f.leader_epoch
                and before.log_start_offset == log_start):
            return before
        return FetchPosition(hosted.tp, f.leader_epoch, f.fetch_offset, log_start, hosted.topic_id)

    def _follower_throttled(self, hosted: HostedPartition) -> bool:
        return hosted.follower_throttled and self.broker_id not in hosted.replica.isr

    def _following(self, tp: TopicPartition, leader_id: int, leader_epoch: int
                   ) -> tuple[HostedPartition, FollowerPartition] | None:
        """The partition and its fetch state, if it still follows ``leader_id`` in
        ``leader_epoch``."""
        hosted = self.partitions.get(tp)
        if hosted is None or hosted.following is None:
            return None
        f = hosted.following
        if (f.leader_id != leader_id or f.leader_epoch != leader_epoch
                or hosted.replica.role is not Role.FOLLOWER):
            return None
        return hosted, f

    def _answered(self, leader_id: int, asked: Iterable[EpochQuery | FetchPosition],
                  answers: Iterable[Any]
                  ) -> Iterator[tuple[Any, Any, HostedPartition, FollowerPartition]]:
        """(answer, what it answers, partition) for each answer to a question of this
        plan whose partition still follows ``leader_id`` in the epoch it was asked in; the
        leader answered, so any backoff for it ends."""
        self._leader_backoff_until.pop(leader_id, None)
        answers = list(answers)
        if not answers:
            return                  # an incremental answer with nothing new
        by_partition = self._asked_index(leader_id, asked)
        for answer in answers:
            self._mark_following(answer.partition, leader_id)
        for answer in answers:
            question = by_partition.get(answer.partition)
            if question is None:
                continue
            following = self._following(answer.partition, leader_id,
                                        question.current_leader_epoch)
            if following is not None:
                yield answer, question, *following

    def _asked_index(self, leader_id: int, asked: Iterable[EpochQuery | FetchPosition]
                     ) -> Mapping[TopicPartition, Any]:
        """``asked`` by partition: the leader's plan when it is what its last work asked."""
        plan = self._follow_plans.get(leader_id)
        if plan is not None and plan.work is not None and asked is plan.work.fetches:
            return plan.positions
        return {q.partition: q for q in asked}

    def handle_leader_unreachable(self, leader_id: int, now_ms: int) -> None:
        """The connection to the leader failed: back off before the next round."""
        self._leader_backoff_until[leader_id] = now_ms + self.replica_fetch_backoff_ms

    def _on_follower_error(self, f: FollowerPartition, error_code: int, now_ms: int) -> None:
        if error_code in _PAUSE_ERRORS:
            f.paused = True
        elif error_code in _RETRY_ERRORS:
            f.retry_at_ms = now_ms + self.replica_fetch_backoff_ms

    def handle_epoch_answers(self, work: FollowerWork, answers: Iterable[EpochAnswer], now_ms: int) -> None:
        """OffsetForLeaderEpoch answers for ``work.epoch_queries``: truncate where the logs
        diverge (KIP-101/KIP-279), then fetch; or ask again about an older epoch."""
        for a, _, hosted, f in self._answered(work.leader_id, work.epoch_queries, answers):
            if f.state is not FetchState.TRUNCATING:
                continue
            if a.error_code != ErrorCode.NONE:
                self._on_follower_error(f, a.error_code, now_ms)
                continue
            plog = hosted.log

            def local(epoch: int) -> tuple[int, int]:
                end = plog.end_offset_for_epoch(epoch)
                return end.leader_epoch, end.end_offset
            decision = truncation_decision(a.leader_epoch, a.end_offset, plog.log_end_offset,
                                           hosted.replica.high_watermark, local)
            if decision.truncate_to < plog.log_end_offset:
                log.info("%s: truncating from %d to %d (leader epoch %d ends at %d)", a.partition,
                         plog.log_end_offset, decision.truncate_to, a.leader_epoch, a.end_offset)
                if not self._truncate_following(hosted, decision.truncate_to, now_ms):
                    continue
            if decision.done:
                f.state = FetchState.FETCHING
                f.fetch_offset = plog.log_end_offset
            else:
                f.epoch_to_ask = decision.next_epoch

    def handle_fetched(self, work: FollowerWork, fetched: Iterable[FetchedPartition], now_ms: int) -> None:
        """The leader's Fetch answer for ``work.fetches``: append its batches as they are
        (offsets and epochs kept), update producer state and take the leader's HW."""
        for p, position, hosted, f in self._answered(work.leader_id, work.fetches, fetched):
            if f.state is not FetchState.FETCHING or f.fetch_offset != position.fetch_offset:
                continue        # an answer to an older plan
            if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                try:
                    self._handle_out_of_range(hosted, f, p.log_start_offset, now_ms)
                except OSError as e:
                    self._log_io_failed(hosted.log, e)
            elif p.error_code != ErrorCode.NONE:
                if p.error_code not in _PAUSE_ERRORS and p.error_code not in _RETRY_ERRORS:
                    log.info("%s: fetch from %d failed: %s", p.partition, work.leader_id, p.error_code)
                self._on_follower_error(f, p.error_code, now_ms)
            else:
                try:
                    self._append_fetched(hosted, f, p, now_ms)
                except OSError as e:
                    self._log_io_failed(hosted.log, e)

    def _append_fetched(self, hosted: HostedPartition, f: FollowerPartition, p: FetchedPartition,
                        now_ms: int) -> None:
        plog = hosted.log
        records = p.records
        if records is not None and len(records) > 0:
            try:
                # Parsed and CRC-checked once: the log and the producer state take these.
                batches = list(iter_batches(records, partial_tail_ok=True))
            except RecordError as e:
                log.warning("%s: corrupt batch from the leader: %s", hosted.tp, e)
                return
            if batches:
                headers = [h for _, h in batches]
                end = batches[-1][0] + headers[-1].size_in_bytes
                if self._follower_throttled(hosted):
                    self.follower_quota.record(end, now_ms)
                # Whole batches only (a fetch may end in a partial one), without a copy.
                chunk = records if end == len(records) else memoryview(records)[:end]
                active_base = plog.active_segment.base_offset
                result = plog.append_as_follower(chunk, now_ms, headers=headers)
                if result.error_code != ErrorCode.NONE:
                    log.warning("%s: follower append failed: %s %s", hosted.tp,
                                result.error_code, result.error_message)
                    f.state = FetchState.TRUNCATING
                    f.epoch_to_ask = plog.latest_epoch
                    return
                replay_batches(hosted.producers, plog, chunk, batches)
                self._maybe_snapshot_producers(hosted, active_base)
        if p.log_start_offset > plog.log_start_offset:
            plog.maybe_increment_log_start_offset(min(p.log_start_offset, plog.log_end_offset),
                                                  plog.log_end_offset)
        f.fetch_offset = plog.log_end_offset
        hosted.replica.on_follower_fetched(plog.log_start_offset, plog.log_end_offset, p.high_watermark)
        self._changed.add(hosted.tp)

    def _handle_out_of_range(self, hosted: HostedPartition, f: FollowerPartition,
                             leader_log_start: int, now_ms: int) -> None:
        plog = hosted.log
        if leader_log_start >= 0 and plog.log_end_offset < leader_log_start:
            # Everything we have is older than the leader keeps: start over at its start.
            log.info("%s: behind the leader's log start %d; restarting there", hosted.tp,
                     leader_log_start)
            plog.truncate_fully_and_start_at(leader_log_start, now_ms)
            future = self.logs.future_log(hosted.tp.topic, hosted.tp.partition)
            if future is not None:
                self._on_future_log(future, lambda: future.truncate_fully_and_start_at(
                    leader_log_start, now_ms))
            hosted.producers.clear()
            f.fetch_offset = leader_log_start
            return
        # Ahead of the leader: find the divergence point by leader epoch again.
        f.state = FetchState.TRUNCATING
        f.epoch_to_ask = plog.latest_epoch

    # ------------------------------------------------------------ mirror leaders (issue 21)

    def mirror_leaderships(self) -> list[MirrorLeadership]:
        """The partitions this broker leads whose topic is an active mirror."""
        return [MirrorLeadership(tp, h.replica.leader_epoch, h.mirror)
                for tp in sorted(self._mirror_partitions)
                if (h := self.partitions[tp]).mirror is not None and h.mirror.fetching
                and h.replica.role is Role.LEADER]

    def _mirror_leader(self, tp: TopicPartition, leader_epoch: int) -> HostedPartition | None:
        """The partition, if this broker still leads it in ``leader_epoch`` as an active
        mirror: a mirror fetcher's answer for a leadership that ended, or for a mirror that
        was promoted or stopped meanwhile, changes nothing."""
        hosted = self.partitions.get(tp)
        if (hosted is None or hosted.replica.role is not Role.LEADER
                or hosted.replica.leader_epoch != leader_epoch
                or hosted.mirror is None or not hosted.mirror.fetching):
            return None
        return hosted

    def mirror_log_state(self, tp: TopicPartition, leader_epoch: int) -> MirrorLogState | None:
        hosted = self._mirror_leader(tp, leader_epoch)
        if hosted is None:
            return None
        return MirrorLogState(hosted.log.log_start_offset, hosted.log.log_end_offset,
                              hosted.replica.high_watermark, hosted.log.latest_epoch)

    def mirror_end_offset_for_epoch(self, tp: TopicPartition, leader_epoch: int,
                                    epoch: int) -> tuple[int, int]:
        """The local leader epoch cache's (largest epoch <= ``epoch``, its end offset)."""
        hosted = self._mirror_leader(tp, leader_epoch)
        if hosted is None:
            return -1, -1
        end = hosted.log.end_offset_for_epoch(epoch)
        return end.leader_epoch, end.end_offset

    def mirror_truncate_to(self, tp: TopicPartition, leader_epoch: int, offset: int,
                           now_ms: int) -> bool:
        """Cut the mirror leader's log where it diverges from the source (its followers
        follow: their next fetch is out of range and they truncate by epoch)."""
        hosted = self._mirror_leader(tp, leader_epoch)
        if hosted is None:
            return False
        plog = hosted.log
        if offset >= plog.log_end_offset:
            return True
        log.info("%s: mirror truncating from %d to %d", tp, plog.log_end_offset, offset)
        try:
            self._truncate_to(hosted, offset, now_ms)
            hosted.producers = self._rebuild_producer_state(plog)
        except OSError as e:
            self._log_io_failed(plog, e)
            return False
        hosted.replica.on_leader_truncated(plog.log_start_offset, plog.log_end_offset)
        self._changed.add(tp)
        return True

    def mirror_restart_at(self, tp: TopicPartition, leader_epoch: int, offset: int,
                          now_ms: int) -> bool:
        """Everything local is older than the source keeps: start empty at ``offset``."""
        hosted = self._mirror_leader(tp, leader_epoch)
        if hosted is None:
            return False
        log.info("%s: mirror behind the source's log start %d; restarting there", tp, offset)
        try:
            hosted.log.truncate_fully_and_start_at(offset, now_ms)
            future = self.logs.future_log(tp.topic, tp.partition)
            if future is not None:
                self._on_future_log(future, lambda: future.truncate_fully_and_start_at(offset, now_ms))
        except OSError as e:
            self._log_io_failed(hosted.log, e)
            return False
        hosted.producers.clear()
        hosted.replica.on_leader_truncated(hosted.log.log_start_offset, hosted.log.log_end_offset)
        self._changed.add(tp)
        return True

    def mirror_append(self, tp: TopicPartition, leader_epoch: int,
                      records: bytes | bytearray | memoryview, source_log_start_offset: int,
                      now_ms: int) -> ProduceResult:
        """Append whole batches fetched from the source as they are (offsets, epochs,
        timestamps, producer ids kept: the follower append path), then let the
        destination's followers take them as they would a produce."""
        hosted = self._mirror_leader(tp, leader_epoch)
        if hosted is None:
            return ProduceResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        plog = hosted.log
        try:
            if records:
                active_base = plog.active_segment.base_offset
                result = plog.append_as_follower(records, now_ms)
                if result.error_code != ErrorCode.NONE:
                    log.warning("%s: mirror append failed: %s %s", tp, result.error_code,
                                result.error_message)
                    return ProduceResult(result.error_code, error_message=result.error_message)
                replay_batches(hosted.producers, plog, records, iter_batches(records, check_crc=False))
                self._maybe_snapshot_producers(hosted, active_base)
                self._leader_appended(hosted, now_ms)
            if source_log_start_offset > plog.log_start_offset:
                # The source deleted records (retention, DeleteRecords): so does the mirror.
                new_start = min(source_log_start_offset, hosted.replica.high_watermark)
                if new_start > plog.log_start_offset:
                    plog.maybe_increment_log_start_offset(new_start, hosted.replica.high_watermark)
                    hosted.replica.on_log_start_offset(plog.log_start_offset)
        except OSError as e:
            self._log_io_failed(plog, e)
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(e))
        self._changed.add(tp)
        return ProduceResult(ErrorCode.NONE, plog.log_end_offset, log_start_offset=plog.log_start_offset)

    # ------------------------------------------------------------ time and shutdown

    def poll(self, now_ms: int) -> int:
        """ISR shrink proposals, acks=all timeouts, AlterPartition resends, log duties.
        Milliseconds until something is next due."""
        next_ms = 1000
        heap = self._poll_heap
        while heap and heap[0][0] <= now_ms:
            at, _, tp = heapq.heappop(heap)
            if self._poll_at.get(tp) != at:
                continue                    # stale: rescheduled since
            del self._poll_at[tp]
            hosted = self.partitions.get(tp)
            if hosted is None:
                continue
            completions, proposals, due = hosted.replica.poll(now_ms)
            self._complete(completions)
            for proposal in proposals:
                self._propose_isr(hosted, proposal, now_ms)
            if due is not None:
                self._schedule_poll(tp, now_ms + max(1, due))
        if heap:
            next_ms = min(next_ms, heap[0][0] - now_ms)
        for tp, state in list(self._isr_proposals.items()):
            if state.in_flight is None and state.wanted is not None:
                self._maybe_send_alter_partition(tp, now_ms)
                if state.wanted is not None:
                    next_ms = min(next_ms, max(1, state.resend_at_ms - now_ms))
        next_ms = min(next_ms, self.logs.poll(now_ms, self.high_watermark_of))
        for topic, partition in self.logs.take_retention_moves():
            # A log start moved: a change for the follower sessions to look at (their
            # idle partitions are looked at again only when changed).
            hosted = self.partitions.get(TopicPartition(topic, partition))
            if hosted is not None:
                self._changed.add(hosted.tp)
        next_ms = min(next_ms, self._expire_producers(now_ms))
        self._handle_offline_dirs()
        if self._move_logs(now_ms):
            next_ms = min(next_ms, LOG_DIR_MOVE_POLL_MS)
        return max(1, next_ms)

    def _expire_producers(self, now_ms: int) -> int:
        """Every producer.id.expiration.check.interval.ms, producers idle for
        producer.id.expiration.ms leave the state of every hosted partition, led or
        followed (Kafka's LogManager runs the same check over all logs). Milliseconds
        until the next check."""
        interval_ms = self._broker_int("producer.id.expiration.check.interval.ms")
        if self._next_producer_expiry_ms is None:
            self._next_producer_expiry_ms = now_ms + interval_ms
        if now_ms >= self._next_producer_expiry_ms:
            expiration_ms = self._broker_int("producer.id.expiration.ms")
            removed = sum(hosted.producers.remove_expired(now_ms, expiration_ms)
                          for hosted in self.partitions.values())
            if removed:
                log.info("broker %d: %d idle producer ids expired from partition state "
                         "(producer.id.expiration.ms=%d)", self.broker_id, removed, expiration_ms)
            self._next_producer_expiry_ms = now_ms + interval_ms
        return self._next_producer_expiry_ms - now_ms

    def _broker_int(self, key: str) -> int:
        """A broker key with a numeric default, as it is in effect (the controller and
        the start-up check validated it)."""
        value = self.config_layers.broker_value(key)
        assert value is not None, key
        return int(value)

    def _schedule_poll(self, tp: TopicPartition, at_ms: int) -> None:
        current = self._poll_at.get(tp)
        if current is not None and current <= at_ms:
            return
        self._poll_at[tp] = at_ms
        heapq.heappush(self._poll_heap, (at_ms, next(self._poll_seq), tp))

    def _leader_appended(self, hosted: HostedPartition, now_ms: int) -> None:
        """The leader's log grew: followers at the old LEO are no longer caught up by
        being there (Kafka's isCaughtUp), so their ISR lag counts again and its deadline
        may come before the replica's next poll."""
        replica = hosted.replica
        self._complete(replica.on_local_append(hosted.log.log_end_offset, self._follower_fetch_ms))
        due = replica.ms_until_due(now_ms)
        if due is not None:
            self._schedule_poll(hosted.tp, now_ms + due)

    def _poll_soon(self, tp: TopicPartition) -> None:
        """The replica's deadlines may have come forward: poll it at the next ``poll``."""
        self._schedule_poll(tp, -1)

    def hosted_key(self, tp: TopicPartition) -> TopicPartition:
        """This broker's own TopicPartition equal to ``tp`` (``tp`` itself when not
        hosted): what a long-lived per-partition set keeps, so that a replica has one
        such object, not one more per set (56 B each)."""
        hosted = self.partitions.get(tp)
        return tp if hosted is None else hosted.tp

    def high_watermark_of(self, topic: str, partition: int) -> int:
        hosted = self.partitions.get(TopicPartition(topic, partition))
        return 0 if hosted is None else hosted.replica.high_watermark

    def checkpoint_high_watermarks(self) -> None:
        """Each online log directory's replication-offset-checkpoint, for the partitions
        whose logs it holds (Kafka keeps one per directory, too), written now."""
        for write in self.high_watermark_checkpoints():
            try:
                self.write_checkpoint(write)
            except OSError as e:
                self.logs.mark_offline(write.log_dir, e)
        self._handle_offline_dirs()

    def high_watermark_checkpoints(self) -> list[CheckpointWrite]:
        """What ``checkpoint_high_watermarks`` writes, for a shell that writes it off its
        event loop (``write_checkpoint``, then ``checkpoint_failed`` on an error)."""
        # Only the replicas whose HW moved since the last look: scanning every one took
        # ~90 ms per 5 s at 100k, and grew with each partition created. A HW of 0 has no
        # entry (reading the file, an absent partition's HW is 0): an idle cluster's
        # files hold only the partitions ever written. Keyed by the hosted
        # TopicPartitions (tuples, equal to the (topic, partition) keys read at start).
        checkpoint, moved, kept = self._hw_checkpoint, False, []
        for tp in self._hw_changed:
            hosted = self.partitions.get(tp)
            if hosted is None:
                continue
            if hosted.replica.role is Role.NONE:
                kept.append(tp)         # not a replica now; looked at again once it is
                continue
            hw = hosted.replica.high_watermark
            if checkpoint.get(hosted.tp, 0) != hw:
                moved = True
                if hw:
                    checkpoint[hosted.tp] = hw
                else:
                    del checkpoint[hosted.tp]
        self._hw_changed.clear()
        self._hw_changed.update(kept)
        # Nothing moved since the files were last written: nothing to write. (Kafka
        # rewrites them every interval; here an idle broker's failed directory is found
        # by its next write of any kind, not by this file's.)
        moves = self.logs.moves_completed
        if moves == self._hw_checkpoint_moves and not self._hw_checkpoint_removed and not moved:
            return []
        self._hw_checkpoint_moves, self._hw_checkpoint_removed = moves, False
        by_dir: dict[str, dict[tuple[str, int], int]]
        if len(self.logs.log_dirs) == 1:
            # One directory holds every entry's log: an entry leaves with its log (a
            # deletion), and the file read at start kept only the logs found. (Asking
            # for each entry's directory took more than the rest of this at 100k.)
            by_dir = {self.logs.log_dirs[0]: self._hw_checkpoint}
        else:
            by_dir = {d: {} for d in self.logs.log_dirs}
            for key, hw in self._hw_checkpoint.items():
                log_dir = self.logs.log_dir_of(*key)
                if log_dir is not None:
                    by_dir[log_dir][key] = hw
        return [CheckpointWrite(log_dir, f"{log_dir}/{HW_CHECKPOINT}",
                                encode_offset_checkpoint(dir_offsets))
                for log_dir, dir_offsets in by_dir.items() if self.logs.is_online(log_dir)]

    def write_checkpoint(self, write: CheckpointWrite) -> None:
        """The one method that may run on another thread: it only writes one file through
        the storage port (FileStorage takes its own lock), and touches no state here."""
        self.logs.storage.write_atomically(write.path, write.data)

    def checkpoint_failed(self, write: CheckpointWrite, error: OSError) -> None:
        """Writing ``write`` failed: its directory goes offline."""
        self.logs.mark_offline(write.log_dir, error)
        self._handle_offline_dirs()

    def _read_hw_checkpoint(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for log_dir in self.logs.log_dirs:
            path = f"{log_dir}/{HW_CHECKPOINT}"
            if not self.logs.is_online(log_dir) or not self.logs.storage.exists(path):
                continue
            try:
                data = self.logs.storage.read(path, 0, self.logs.storage.size(path))
                dir_offsets = decode_offset_checkpoint(data)
            except Exception as e:  # a torn checkpoint: start from 0, the leader catches us up
                log.warning("ignoring unreadable %s: %s", path, e)
                continue
            # Only the partitions whose logs are there (a moved log's old entry is stale).
            out.update({k: hw for k, hw in dir_offsets.items() if self.logs.log_dir_of(*k) == log_dir})
        return out

    # ------------------------------------------------------------ log directories

    def _log_io_failed(self, partition_log: PartitionLog, error: OSError) -> None:
        """An I/O error in a log: its directory goes offline (Kafka's LogDirFailureChannel)."""
        log_dir = self.logs.log_dir_of_log(partition_log)
        if self.logs.is_online(log_dir):
            self.logs.mark_offline(log_dir, error)
        self._handle_offline_dirs()

    def _handle_offline_dirs(self) -> None:
        """Stop every replica whose log was in a directory that went offline (without
        touching its files) and report each directory once."""
        for log_dir in self.logs.take_newly_offline():
            lost = frozenset(tp for tp, hosted in self.partitions.items()
                             if self.logs.log_dir_of_log(hosted.log) == log_dir)
            for tp in sorted(lost):
                self._stop_partition(tp, delete=False)
                self.offline_partitions.add(tp)
            log.error("log directory %s failed: %d replicas offline: %s", log_dir, len(lost),
                      ", ".join(str(tp) for tp in sorted(lost)[:20]))
            self._effects.append(LogDirFailed(log_dir, lost))

    def _on_future_log(self, future: PartitionLog, action: Callable[[], object]) -> bool:
        """Run an I/O ``action`` on a future log; an error takes its directory offline
        (the move is then dropped, the current log keeps serving). False on error."""
        try:
            action()
            return True
        except OSError as e:
            self._log_io_failed(future, e)
            return False

    def _truncate_following(self, hosted: HostedPartition, offset: int, now_ms: int) -> bool:
        """A follower's truncation before it fetches; False: the log's directory failed."""
        try:
            self._truncate_to(hosted, offset, now_ms)
            # A transaction whose marker was cut is ongoing again: only the log can tell,
            # so rebuild from the latest snapshot below the cut (Kafka's loadProducerState
            # after a truncation).
            hosted.producers = self._rebuild_producer_state(hosted.log)
        except OSError as e:
            self._log_io_failed(hosted.log, e)
            return False
        return True

    def _truncate_to(self, hosted: HostedPartition, offset: int, now_ms: int) -> None:
        """Truncate the current log, and a future log being copied from it the same way
        (its copy of the cut records must not survive the swap)."""
        hosted.log.truncate_to(offset, now_ms)
        future = self.logs.future_log(hosted.tp.topic, hosted.tp.partition)
        if future is not None and future.log_end_offset > offset:
            self._on_future_log(future, lambda: future.truncate_to(offset, now_ms))

    def alter_replica_log_dir(self, tp: TopicPartition, log_dir: str, now_ms: int) -> int:
        """AlterReplicaLogDirs for one replica (KIP-113): start moving its log to
        ``log_dir`` (a future log copied in the background by ``poll``, then swapped in).
        Moving to where it already is cancels a move under way. For a replica not hosted
        yet the directory is remembered for its creation (REPLICA_NOT_AVAILABLE, as Kafka)."""
        log_dir = normalize_dir(log_dir)
        if log_dir not in self.logs.log_dirs:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if not self.logs.is_online(log_dir) or tp in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        hosted = self.partitions.get(tp)
        if hosted is None:
            self.logs.set_preferred_log_dir(tp.topic, tp.partition, log_dir)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        future = self.logs.future_log(tp.topic, tp.partition)
        if future is not None:
            if self.logs.log_dir_of_log(future) == log_dir:
                return ErrorCode.NONE
            self.logs.abort_future_log(tp.topic, tp.partition)
        if self.logs.log_dir_of_log(hosted.log) == log_dir:
            return ErrorCode.NONE
        try:
            self.logs.create_future_log(tp.topic, tp.partition, log_dir, now_ms)
        except LogDirOfflineError:
            self._handle_offline_dirs()
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def _move_logs(self, now_ms: int) -> bool:
        """Copy current logs into their future logs, at most
        ``log_dir_move_bytes_per_poll`` in all, and swap each that caught up (Kafka's
        ReplicaAlterLogDirsThread, without the thread: the copy and the swap run between
        inputs, so nothing is appended between the last copy and the swap). True while
        some move has more to copy."""
        budget = self.log_dir_move_bytes_per_poll
        behind = False
        for (topic, index), future in self.logs.future_logs():
            hosted = self.partitions.get(TopicPartition(topic, index))
            if hosted is None:
                continue        # not applied from the metadata yet (a restart): wait
            if budget <= 0:
                behind = True
                break
            copied = self._copy_to_future(hosted, future, budget, now_ms)
            if copied is None:
                continue
            budget -= copied
            current = hosted.log
            if (future.log_end_offset == current.log_end_offset
                    and future.log_start_offset == current.log_start_offset):
                self._swap_in_future(hosted, now_ms)
            else:
                behind = True
        return behind

    def _copy_to_future(self, hosted: HostedPartition, future: PartitionLog, budget: int,
                        now_ms: int) -> int | None:
        """Bytes copied from the current log to the future one; None if either failed."""
        current = hosted.log
        start = current.log_start_offset
        if future.log_end_offset < start:
            # Retention or DeleteRecords passed everything copied so far: start over there.
            if not self._on_future_log(future, lambda: future.truncate_fully_and_start_at(start, now_ms)):
                return None
        elif future.log_start_offset < start:
            if not self._on_future_log(future, lambda: future.maybe_increment_log_start_offset(
                    start, future.log_end_offset)):
                return None
        if future.log_end_offset >= current.log_end_offset:
            return 0
        try:
            result = current.read(future.log_end_offset, budget, current.log_end_offset, True)
            data = b"" if result.records.is_empty else current.read_records_bytes(result.records)
        except OSError as e:
            self._log_io_failed(current, e)
            return None
        if result.error_code != ErrorCode.NONE or not data:
            return 0
        appended = self._on_future_log(future, lambda: self._append_to_future(hosted, future, data, now_ms))
        return len(data) if appended else None

    def _append_to_future(self, hosted: HostedPartition, future: PartitionLog, data: bytes,
                          now_ms: int) -> None:
        result = future.append_as_follower(data, now_ms)
        if result.error_code == ErrorCode.NONE:
            # The copy's aborted transaction index, from the source's (batch-level).
            for txn in hosted.log.collect_aborted_transactions(result.base_offset, result.last_offset + 1):
                if result.base_offset <= txn.last_offset <= result.last_offset:
                    future.append_aborted_txn(txn)
        if result.error_code != ErrorCode.NONE:
            # The copy disagrees with its source: a bug, not a disk error. Start over.
            log.error("%s: log directory move copy failed (%s); starting the copy over",
                      hosted.tp, result.error_message)
            future.truncate_fully_and_start_at(hosted.log.log_start_offset, now_ms)

    def _swap_in_future(self, hosted: HostedPartition, now_ms: int) -> None:
        tp = hosted.tp
        source = self.logs.log_dir_of_log(hosted.log)
        try:
            promoted = self.logs.replace_current_with_future(tp.topic, tp.partition, now_ms)
        except OSError as e:
            # Which side failed is not known: both directories are suspect, and the
            # partition's log may be half renamed. Take the source offline (its replica
            # stops); the destination follows if it errs too.
            log.error("%s: log directory swap failed: %s", tp, e)
            self.logs.mark_offline(source, e)
            self._handle_offline_dirs()
            return
        hosted.log = promoted
        self._apply_topic_config(hosted)
        log.info("%s: log moved from %s to %s", tp, source, self.logs.log_dir_of_log(promoted))
        self._changed.add(tp)
        # The partition's HW reaches the new dir's replication-offset-checkpoint with the
        # next periodic write; a crash before that only costs the HW, which a leader
        # learns again from its followers (the old dir's entry is ignored at load).

    def describe_log_dirs(self, wanted: set[TopicPartition] | None) -> list[LogDirDescription]:
        """DescribeLogDirs: every log directory, online or not, with the current and
        future logs it holds (``wanted``: only these partitions; None: all)."""
        out = []
        for log_dir in self.logs.log_dirs:
            if not self.logs.is_online(log_dir):
                out.append(LogDirDescription(log_dir, False, ()))
                continue
            states = []
            for (topic, index), partition_log in self.logs.logs_in(log_dir):
                tp = TopicPartition(topic, index)
                hosted = self.partitions.get(tp)
                if hosted is None or (wanted is not None and tp not in wanted):
                    continue
                lag = max(0, hosted.replica.high_watermark - partition_log.log_end_offset)
                states.append(ReplicaLogDirState(tp, partition_log.size_bytes, lag, False))
            for (topic, index), future in self.logs.future_logs_in(log_dir):
                tp = TopicPartition(topic, index)
                hosted = self.partitions.get(tp)
                if hosted is None or (wanted is not None and tp not in wanted):
                    continue
                lag = max(0, hosted.log.log_end_offset - future.log_end_offset)
                states.append(ReplicaLogDirState(tp, future.size_bytes, lag, True))
            out.append(LogDirDescription(log_dir, True, tuple(sorted(
                states, key=lambda r: (r.partition, r.is_future)))))
        return out

    def shutdown(self) -> None:
        for hosted in self.partitions.values():
            self._complete(hosted.replica.stop())
            self._changed.add(hosted.tp)
            if hosted.log.closed:
                continue
            if (not hosted.producers and not hosted.log.producer_snapshot_offsets
                    and hosted.log.log_end_offset == hosted.log.log_start_offset):
                # An empty log and no producers: the next start rebuilds the same empty
                # state from nothing. Writing (and fsyncing) a file per idle partition
                # was nearly all of a controlled shutdown's time at 10k partitions.
                continue
            try:
                # Kafka snapshots producer state at a clean shutdown: the next start reads
                # the snapshot instead of the log.
                hosted.log.write_producer_snapshot(hosted.log.log_end_offset,
                                                   hosted.producers.to_snapshot())
            except OSError as e:
                log.warning("%s: producer snapshot at shutdown failed: %s", hosted.tp, e)
        self.checkpoint_high_watermarks()
        self.logs.shutdown()


# ---------------------------------------------------------------- producer state replay

def replay_batches(table: ProducerStateTable, partition_log: PartitionLog,
                   data: bytes | bytearray | memoryview,
                   batches: Iterable[tuple[int, BatchHeader]]) -> list[tuple[int, bool]]:
    """Producer state and the aborted transaction index follow batches appended with
    their offsets (a follower's fetch, a rebuild); ``batches`` are (position in
    ``data``, header). Returns the transaction markers met, as (producer id, committed)."""
    markers = []
    for pos, h in batches:
        if not h.is_control:
            table.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                         h.base_offset, h.max_timestamp, h.is_transactional)
            continue
        if h.producer_id == NO_PRODUCER_ID:
            continue
        try:
            marker = read_transaction_marker(data, pos)
        except RecordError as e:
            log.warning("%s: unreadable control batch at %d: %s", partition_log.dir_path,
                        h.base_offset, e)
            continue
        if marker is None:
            continue
        committed, value = marker
        completed = table.update_marker(h.producer_id, h.producer_epoch, h.base_offset, committed,
                                        value.coordinator_epoch, h.max_timestamp)
        markers.append((h.producer_id, committed))
        if completed is not None and completed.is_aborted:
            partition_log.append_aborted_txn(AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset,
                table.last_stable_offset_after(completed)))
    return markers


def replay_log(table: ProducerStateTable, partition_log: PartitionLog, start: int) -> None:
    """Replay every batch of the log from ``start`` (a batch boundary) to its end."""
    offset = start
    end = partition_log.log_end_offset
    while offset < end:
        result = partition_log.read(offset, _REBUILD_CHUNK_BYTES, end)
        if result.error_code != ErrorCode.NONE or result.records.is_empty:
            break
        data = partition_log.read_records_bytes(result.records)
        try:
            batches = list(iter_batches(data, partial_tail_ok=True, check_crc=False))
        except RecordError as e:
            log.warning("%s: producer state rebuild stopped at %d: %s", partition_log.dir_path,
                        offset, e)
            break
        if not batches:
            break
        replay_batches(table, partition_log, data, batches)
        offset = batches[-1][1].last_offset + 1
