"""All partition logs of a broker's log directories (JBOD): loading, placement, moves
between directories, directory failure, checkpoints, shutdown, periodic duties.

Theory of operation
-------------------
A broker has one or more log directories (``log.dirs``). Each holds one sub-directory per
partition (`<topic>-<partition>`) and files of its own, as Kafka's `LogManager` keeps
them:

* `recovery-point-offset-checkpoint`: per partition in that directory, the offset below
  which everything was fsynced. Written every `flush_offset_checkpoint_interval_ms` and at
  shutdown. It may lag the logs' real recovery points (that only costs recovery time),
  never lead them: it is written after the fsyncs it reports.
* `.kafka_cleanshutdown`: written last by a clean shutdown, removed right after loading,
  so a crash at any later time leads to recovery at the next start. It holds the broker
  epoch the broker had (KIP-966: `{"version":0,"broker_epoch":N}`), which the next start
  registers as its previous broker epoch: the controller then knows the shutdown was
  clean and keeps the broker among the eligible leader replicas.

(Unlike Kafka, a log start offset that DeleteRecords moved inside a segment is kept by
the partition itself, written before its leader epoch checkpoint is, so the two never
disagree after a crash; see `PartitionLog.maybe_increment_log_start_offset`.)

The checkpoint uses Kafka's text format: a version line `0`, a count line, then
`topic partition offset` lines. An unreadable checkpoint is treated as absent (recovery
from offset 0: slower, never wrong).

Placement. A new partition's log goes to the online directory holding the fewest logs
(current and future ones), the first listed on a tie: Kafka's `LogManager.nextLogDirs`.
AlterReplicaLogDirs may name a directory for a partition not hosted yet; that preference
wins when the log is created. A restart finds each partition wherever it is.

Moves (AlterReplicaLogDirs, KIP-113). A move creates a *future* log in the destination,
`<topic>-<partition>.<id>-future`; the replica layer copies the current log into it in
the background while the current one keeps serving, then calls
`replace_current_with_future`, which retires the current log (renamed
`<topic>-<partition>.<id>-delete`, then removed) and renames the future log to
`<topic>-<partition>`. The order makes a crash in between safe: at load, `-delete`
directories are removed, and a future log whose current log is gone is promoted (the swap
was interrupted after the retirement); a future log beside its current one resumes.

Directory failure (Kafka's LogDirFailureChannel). An I/O error in a directory's files
marks the directory offline (`mark_offline`): its logs are dropped from service, never
written again, and the directory is reported once by `take_newly_offline` for the replica
layer to act on. Checkpoints and shutdown skip offline directories.

`poll(now_ms)` runs, for every log that has one due (a log asks with `on_due`; idle
logs are never visited): the flush.ms policy and delayed file deletes; every
`retention_check_interval_ms` the retention pass (which needs each partition's high
watermark from the replica layer); and the checkpoint writes. It returns the ms until
something is next due. It does no waiting of its own; the broker's shell calls it.

One `FileStorage` (one LRU of file descriptors) serves every partition.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import posixpath
from dataclasses import dataclass
from typing import Callable, Collection, Iterator, Mapping, Sequence

from broker.log.config import LogConfig
from broker.log.leader_epoch_cache import CorruptCheckpointError
from broker.log.partition_log import PartitionLog, RetentionResult
from broker.log.recovery import RecoveryReport
from broker.log.storage import Storage

__all__ = [
    "LogManager",
    "LogManagerConfig",
    "LogDirOfflineError",
    "choose_log_dir",
    "future_dir_name",
    "parse_suffixed_dir_name",
    "normalize_dir",
    "FUTURE_SUFFIX",
    "DELETE_SUFFIX",
    "RECOVERY_POINT_CHECKPOINT",
    "CLEAN_SHUTDOWN_MARKER",
    "encode_offset_checkpoint",
    "decode_offset_checkpoint",
    "partition_dir_name",
    "parse_partition_dir_name",
]

log = logging.getLogger("ketch.log")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
FUTURE_SUFFIX = "-future"   # a log being moved here (AlterReplicaLogDirs)
DELETE_SUFFIX = "-delete"   # a retired log, removed right after (or at the next load)
_NO_DEADLINE_MS = 2**31 - 1

Key = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    flush_offset_checkpoint_interval_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> Key | None:
    topic, dash, number = name.rpartition("-")
    if not dash or not topic or not number.isdigit():
        return None
    return topic, int(number)


def encode_offset_checkpoint(offsets: Mapping[Key, int]) -> bytes:
    # In the mapping's order, as Kafka writes them: sorting 100k entries took longer than
    # formatting them, every checkpoint interval.
    lines = ["0", str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    return ("\n".join(lines) + "\n").encode("utf-8")


def decode_offset_checkpoint(data: bytes) -> dict[Key, int]:
    try:
        lines = data.decode("utf-8").splitlines()
        if len(lines) < 2 or lines[0] != "0" or int(lines[1]) != len(lines) - 2:
            raise CorruptCheckpointError("bad offset checkpoint header")
        out: dict[Key, int] = {}
        for line in lines[2:]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        return out
    except (UnicodeDecodeError, ValueError) as e:
        if isinstance(e, CorruptCheckpointError):
            raise
        raise CorruptCheckpointError(str(e)) from None


class LogDirOfflineError(OSError):
    """The log directory a call needs is offline (Kafka's KafkaStorageException)."""


def choose_log_dir(log_dirs: Sequence[str], logs_per_dir: Mapping[str, int],
                   offline: Collection[str]) -> str | None:
    """Kafka's `nextLogDirs`: the online directory holding the fewest logs, the first listed
    on a tie; None when every directory is offline."""
    online = [d for d in log_dirs if d not in offline]
    if not online:
        return None
    return min(online, key=lambda d: (logs_per_dir.get(d, 0), log_dirs.index(d)))


def future_dir_name(topic: str, partition: int, unique_id: str) -> str:
    return f"{partition_dir_name(topic, partition)}.{unique_id}{FUTURE_SUFFIX}"


def parse_suffixed_dir_name(name: str, suffix: str) -> Key | None:
    """(topic, partition) of `<topic>-<partition>.<id><suffix>`, else None."""
    if not name.endswith(suffix):
        return None
    base, dot, unique_id = name[: -len(suffix)].rpartition(".")
    if not dot or not unique_id.isalnum():
        return None
    return parse_partition_dir_name(base)


def normalize_dir(path: str) -> str:
    """One spelling per directory: no trailing slash, no `.` or `..` steps."""
    return posixpath.normpath(path) if path else path


class LogManager:
    def __init__(
        self,
        storage: Storage,
        log_dirs: str | Sequence[str],
        default_config: LogConfig,
        now_ms: int,
        manager_config: LogManagerConfig = LogManagerConfig(),
    ) -> None:
        """`log_dirs`: the broker's log directories in `log.dirs` order (a single path
        is one directory)."""
        dirs = [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)
        assert dirs, "a broker has at least one log directory"
        self.storage = storage
        self.log_dirs: tuple[str, ...] = tuple(normalize_dir(d) for d in dirs)
        assert len(set(self.log_dirs)) == len(self.log_dirs), self.log_dirs
        self.default_config = default_config
        self.manager_config = manager_config
        self._logs: dict[Key, PartitionLog] = {}
        # The callbacks every log is given, made once: a bound method made per log was
        # 128 B per replica.
        self._recovery_point_lowered = self.checkpoint_recovery_points
        self._log_due = self._poll_soon
        # Invariant (once loaded): a future log's key is also a current log's key, in
        # another directory.
        self._future_logs: dict[Key, PartitionLog] = {}
        # AlterReplicaLogDirs for a partition not hosted yet: where to create it.
        self._preferred_dirs: dict[Key, str] = {}
        self._offline: set[str] = set()
        self._newly_offline: list[str] = []
        self._unique_ids = 0
        # Logs moved to another directory so far: what a per-directory file keyed by
        # partition (the HW checkpoint) must be rewritten for even if no offset changed.
        self.moves_completed = 0
        # Retention passes run so far: what may have moved any log's start offset.
        self.retention_runs = 0
        # The logs whose start a retention pass moved, until taken (take_retention_moves).
        self._retention_moves: list[Key] = []
        self._retired: list[str] = []       # retired logs' directories, still to remove
        self._next_recovery_checkpoint_ms = now_ms + manager_config.flush_offset_checkpoint_interval_ms
        self._next_retention_ms = now_ms + manager_config.retention_check_interval_ms
        self.closed = False
        # The broker's epoch, kept for the clean-shutdown marker (set by the broker), and
        # the one the marker found at start (-1: none, or an unclean stop before).
        self.broker_epoch = -1
        self.previous_broker_epoch = -1
        self._marker_epochs: list[int] = []
        # Logs whose `poll` is due (Kafka's flush scheduler visits every log; here only
        # the logs that asked are visited, at 100k idle logs that is most of a second
        # a pass saved): a heap of (due at ms, tie-break, log), and each log's one
        # current due time (an entry that disagrees with it is stale).
        self._due_heap: list[tuple[int, int, PartitionLog]] = []
        self._due_at: dict[PartitionLog, int] = {}
        self._due_seq = itertools.count()

    @classmethod
    def open(
        cls,
        storage: Storage,
        log_dirs: str | Sequence[str],
        *,
        now_ms: int,
        default_config: LogConfig = LogConfig(),
        config_for_topic: Callable[[str], LogConfig] | None = None,
        manager_config: LogManagerConfig = LogManagerConfig(),
        offline_dirs: Collection[str] = (),
    ) -> tuple[LogManager, dict[Key, RecoveryReport]]:
        """Load every partition log under each of `log_dirs`, recovering after an unclean
        stop. A directory that fails to load is offline from the start (Kafka goes on
        with the others); `offline_dirs` are known offline already (their identity could
        not be read)."""
        manager = cls(storage, log_dirs, default_config, now_ms, manager_config)
        reports: dict[Key, RecoveryReport] = {}
        for log_dir in manager.log_dirs:
            if log_dir in {normalize_dir(d) for d in offline_dirs}:
                manager._offline.add(log_dir)
                continue
            try:
                reports.update(manager._load_dir(log_dir, now_ms, config_for_topic))
            except OSError as e:
                manager._forget_dir(log_dir)
                log.error("log directory %s is offline: loading it failed: %s", log_dir, e)
                manager._offline.add(log_dir)
        manager.finish_loading(now_ms)
        return manager, reports

    def _load_dir(self, log_dir: str, now_ms: int,
                  config_for_topic: Callable[[str], LogConfig] | None) -> dict[Key, RecoveryReport]:
        storage = self.storage
        storage.make_dirs(log_dir)
        marker = f"{log_dir}/{CLEAN_SHUTDOWN_MARKER}"
        clean = storage.exists(marker)
        # KIP-966: the epoch the clean stop left; every directory must say the same.
        self._marker_epochs.append(_marker_broker_epoch(storage.read(marker, 0, storage.size(marker)))
                                   if clean else -1)
        recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
        reports: dict[Key, RecoveryReport] = {}
        futures: dict[Key, str] = {}
        for name in storage.list_dir(log_dir):
            if parse_suffixed_dir_name(name, DELETE_SUFFIX) is not None:
                storage.remove_dir(f"{log_dir}/{name}")    # a retired log a crash left
                continue
            future = parse_suffixed_dir_name(name, FUTURE_SUFFIX)
            if future is not None:
                futures[future] = name
                continue
            key = parse_partition_dir_name(name)
            if key is None:
                continue  # the checkpoint files and the marker
            if key in self._logs:
                raise RuntimeError(f"{key[0]}-{key[1]} is in two log directories: "
                                   f"{self._logs[key].dir_path} and {log_dir}/{name}")
            reports[key] = self._open_log(key, f"{log_dir}/{name}", now_ms, config_for_topic,
                                          recovery_points.get(key, 0), clean, self._logs)
        for key, name in futures.items():
            self._open_log(key, f"{log_dir}/{name}", now_ms, config_for_topic, 0, clean,
                           self._future_logs)
        # Recovery may have cut logs below their checkpointed recovery points: the file
        # must not keep claiming offsets that new appends will reuse.
        self._checkpoint_dir(log_dir)
        if clean:
            storage.delete(marker)
            storage.fsync_dir(log_dir)
        return reports

    def _open_log(self, key: Key, path: str, now_ms: int,
                  config_for_topic: Callable[[str], LogConfig] | None, recovery_point: int,
                  clean: bool, into: dict[Key, PartitionLog]) -> RecoveryReport:
        config = config_for_topic(key[0]) if config_for_topic else self.default_config
        partition_log, report = PartitionLog.open(self.storage, path, config, now_ms=now_ms,
                                                  recovery_point=recovery_point,
                                                  clean_shutdown=clean, listed=True)
        into[key] = self._adopt(partition_log)
        return report

    def finish_loading(self, now_ms: int) -> None:
        """After every directory loaded: a future log without a current log is the
        survivor of a swap a crash interrupted (the current was retired first): it becomes
        the current log. Other future logs, cut back to their current log's end, wait for
        the replica layer to resume copying."""
        # A clean stop only if every directory says so, with one epoch (KIP-966).
        epochs = set(self._marker_epochs)
        self.previous_broker_epoch = epochs.pop() if len(epochs) == 1 and self._marker_epochs \
            and not self._offline else -1
        for key, future in list(self._future_logs.items()):
            current = self._logs.get(key)
            if current is not None:
                if future.log_end_offset > current.log_end_offset:
                    # A crash cut the current log's unflushed tail but not the copy's:
                    # the copy must not keep records its source lost (new ones will
                    # take their offsets).
                    self._guarded(self.log_dir_of_log(future), lambda: future.truncate_to(
                        current.log_end_offset, now_ms))
                continue
            if self._offline:
                # The current log may be on the offline directory: promoting a partial
                # copy could serve it as the partition's log. Leave it on disk, unused.
                del self._future_logs[key]
                log.warning("%s-%d: future log %s not loaded: a log directory is offline",
                            key[0], key[1], future.dir_path)
                continue
            del self._future_logs[key]
            log.info("%s-%d: completing an interrupted log directory move", *key)
            self._logs[key] = self._promote(key, future, now_ms)

    def _forget_dir(self, log_dir: str) -> list[Key]:
        """Drop every log of `log_dir` from service (its files are not touched), and the
        moves of the partitions whose current logs were there."""
        lost = []
        for logs in (self._logs, self._future_logs):
            for key, partition_log in list(logs.items()):
                if self.log_dir_of_log(partition_log) == log_dir:
                    del logs[key]
                    partition_log.closed = True     # never written again
                    if logs is self._logs:
                        lost.append(key)
        for key in lost:
            self.abort_future_log(*key)
        return lost

    def _path(self, log_dir: str, name: str) -> str:
        return f"{log_dir}/{name}"

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[Key, int]:
        path = self._path(log_dir, name)
        data = self.storage.read_file(path)
        if data is None:
            return {}
        try:
            return decode_offset_checkpoint(data)
        except CorruptCheckpointError as e:
            log.warning("%s: unreadable (%s); treating as absent", path, e)
            return {}

    # --- directories ----------------------------------------------------------------------

    @staticmethod
    def log_dir_of_log(partition_log: PartitionLog) -> str:
        return posixpath.dirname(partition_log.dir_path)

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        """The directory holding the partition's current log; None if not here."""
        partition_log = self._logs.get((topic, partition))
        return None if partition_log is None else self.log_dir_of_log(partition_log)

    def log_dir_of_path(self, path: str) -> str | None:
        """The log directory a file or directory path lies in."""
        for log_dir in self.log_dirs:
            if path == log_dir or path.startswith(log_dir.rstrip("/") + "/"):
                return log_dir
        return None

    def is_online(self, log_dir: str) -> bool:
        return log_dir in self.log_dirs and log_dir not in self._offline

    @property
    def offline_dirs(self) -> frozenset[str]:
        return frozenset(self._offline)

    def mark_offline(self, log_dir: str, error: BaseException) -> list[Key]:
        """An I/O error in `log_dir`: take it out of service for good (until a restart).
        Returns the partitions whose current logs were there (now gone from this manager)."""
        assert log_dir in self.log_dirs, log_dir
        if log_dir in self._offline:
            return []
        log.error("log directory %s is offline: %s", log_dir, error)
        self._offline.add(log_dir)
        self._newly_offline.append(log_dir)
        return self._forget_dir(log_dir)

    def take_newly_offline(self) -> list[str]:
        """Directories marked offline since the last call, once each."""
        dirs, self._newly_offline = self._newly_offline, []
        return dirs

    def logs_in(self, log_dir: str) -> list[tuple[Key, PartitionLog]]:
        return [(k, pl) for k, pl in self._logs.items() if self.log_dir_of_log(pl) == log_dir]

    def future_logs_in(self, log_dir: str) -> list[tuple[Key, PartitionLog]]:
        return [(k, pl) for k, pl in self._future_logs.items() if self.log_dir_of_log(pl) == log_dir]

    def _guarded(self, log_dir: str, action: Callable[[], None]) -> None:
        """Run an I/O `action` on `log_dir`; an OSError takes the directory offline."""
        if log_dir in self._offline:
            return
        try:
            action()
        except OSError as e:
            self.mark_offline(log_dir, e)

    # --- logs -----------------------------------------------------------------------------

    def reconfigure(self, manager_config: LogManagerConfig, now_ms: int) -> None:
        """A dynamic broker config change: the new intervals count from now."""
        if manager_config == self.manager_config:
            return
        self.manager_config = manager_config
        self._next_retention_ms = min(self._next_retention_ms,
                                      now_ms + manager_config.retention_check_interval_ms)
        self._next_recovery_checkpoint_ms = min(
            self._next_recovery_checkpoint_ms,
            now_ms + manager_config.flush_offset_checkpoint_interval_ms)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def _logs_per_dir(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for partition_log in (*self._logs.values(), *self._future_logs.values()):
            log_dir = self.log_dir_of_log(partition_log)
            counts[log_dir] = counts.get(log_dir, 0) + 1
        return counts

    def get_or_create_log(
        self, topic: str, partition: int, now_ms: int, config: LogConfig | None = None
    ) -> PartitionLog:
        """The partition's log, created in the preferred or least-filled online directory
        when absent. Raises `LogDirOfflineError` when no directory is online."""
        key = (topic, partition)
        existing = self._logs.get(key)
        if existing is not None:
            return existing
        log_dir = self._preferred_dirs.pop(key, None)
        if log_dir is None or not self.is_online(log_dir):
            online = [d for d in self.log_dirs if d not in self._offline]
            # One online directory needs no counting: counting every log per create made
            # creating N partitions quadratic (100k replicas on a broker: hours).
            log_dir = online[0] if len(online) == 1 else choose_log_dir(
                self.log_dirs, self._logs_per_dir(), self._offline)
        if log_dir is None:
            raise LogDirOfflineError(f"no online log directory for {topic}-{partition}")
        try:
            partition_log, _ = PartitionLog.open(
                self.storage, self._path(log_dir, partition_dir_name(topic, partition)),
                config or self.default_config, now_ms=now_ms, clean_shutdown=True,
                new_replica=True,
            )
        except OSError as e:
            self.mark_offline(log_dir, e)
            raise LogDirOfflineError(f"{log_dir}: {e}") from e
        self._logs[key] = self._adopt(partition_log)
        return partition_log

    def set_preferred_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """AlterReplicaLogDirs before the replica exists here: create it in `log_dir`."""
        assert log_dir in self.log_dirs, log_dir
        self._preferred_dirs[(topic, partition)] = log_dir

    def delete_log(self, topic: str, partition: int) -> bool:
        self.abort_future_log(topic, partition)
        self._preferred_dirs.pop((topic, partition), None)
        partition_log = self._logs.pop((topic, partition), None)
        if partition_log is None:
            return False
        self._guarded(self.log_dir_of_log(partition_log), partition_log.delete)
        return True

    def logs(self) -> Iterator[tuple[Key, PartitionLog]]:
        return iter(list(self._logs.items()))

    def __len__(self) -> int:
        return len(self._logs)

    # --- moves between directories (AlterReplicaLogDirs) ----------------------------------

    def future_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._future_logs.get((topic, partition))

    def future_logs(self) -> Iterator[tuple[Key, PartitionLog]]:
        return iter(list(self._future_logs.items()))

    def create_future_log(self, topic: str, partition: int, log_dir: str, now_ms: int) -> PartitionLog:
        """An empty future log for the partition in `log_dir`, starting at the current
        log's start offset. Raises `LogDirOfflineError` when `log_dir` fails."""
        key = (topic, partition)
        current = self._logs[key]
        assert key not in self._future_logs, key
        assert self.log_dir_of_log(current) != log_dir, (key, log_dir)
        assert self.is_online(log_dir), log_dir
        self._unique_ids += 1
        unique_id = f"{now_ms & 0xFFFFFFFFFFFF:012x}{self._unique_ids:020x}"
        try:
            future, _ = PartitionLog.open(
                self.storage, self._path(log_dir, future_dir_name(topic, partition, unique_id)),
                current.config, now_ms=now_ms, clean_shutdown=True)
            if current.log_start_offset > 0:
                future.truncate_fully_and_start_at(current.log_start_offset, now_ms)
        except OSError as e:
            self.mark_offline(log_dir, e)
            raise LogDirOfflineError(f"{log_dir}: {e}") from e
        self._future_logs[key] = self._adopt(future)
        log.info("%s-%d: moving from %s to %s", topic, partition,
                 self.log_dir_of_log(current), log_dir)
        return future

    def abort_future_log(self, topic: str, partition: int) -> bool:
        future = self._future_logs.pop((topic, partition), None)
        if future is None:
            return False
        self._guarded(self.log_dir_of_log(future), future.delete)
        log.info("%s-%d: log directory move abandoned", topic, partition)
        return True

    def replace_current_with_future(self, topic: str, partition: int, now_ms: int) -> PartitionLog:
        """Swap a caught-up future log in (Kafka's `replaceCurrentWithFutureLog`). The
        caller guarantees the future log holds exactly the current log's records: same
        start and end offsets, nothing appended between its check and this call."""
        key = (topic, partition)
        current = self._logs[key]
        future = self._future_logs[key]
        assert future.log_end_offset == current.log_end_offset, (key, future, current)
        assert future.log_start_offset == current.log_start_offset, (key, future, current)
        # Epochs a leader assigned at its election start beyond the last batch: carry
        # them over, so OffsetForLeaderEpoch answers stay the same after the swap.
        future.adopt_leader_epochs(current.leader_epoch_cache)
        future.close()      # fsyncs its active segment, indexes and epoch checkpoint
        current_dir = self.log_dir_of_log(current)
        # Retire the current log first: a crash after this leaves only the future log,
        # which the next load promotes; the other order could leave two current logs.
        # Nothing more is written to it (a write staged for the shutdown's sync_all
        # would fail in its removed directory: found by the process test).
        current.abandon()
        unique_id = posixpath.basename(future.dir_path).rsplit(".", 1)[1][: -len(FUTURE_SUFFIX)]
        retired = f"{current.dir_path}.{unique_id}{DELETE_SUFFIX}"
        self.storage.rename(current.dir_path, retired)
        self.storage.fsync_dir(current_dir)
        del self._future_logs[key]
        del self._logs[key]
        promoted = self._promote(key, future, now_ms)
        self._logs[key] = promoted
        # Removed by `poll`, a file at a time (unlinking a large segment takes a while);
        # the next load removes what a crash leaves.
        self._retired.append(retired)
        # The promoted log is durable up to its end: say so in its directory's checkpoint
        # (the old directory's entry is ignored at load, its log is not there).
        log_dir = self.log_dir_of_log(promoted)
        self._guarded(log_dir, lambda: self._checkpoint_dir(log_dir))
        return promoted

    def _promote(self, key: Key, future: PartitionLog, now_ms: int) -> PartitionLog:
        """Rename a (closed or unopened) future log to its partition's name and open it."""
        self.moves_completed += 1
        log_dir = self.log_dir_of_log(future)
        future.close()
        path = self._path(log_dir, partition_dir_name(*key))
        self.storage.rename(future.dir_path, path)
        self.storage.fsync_dir(log_dir)
        promoted, _ = PartitionLog.open(self.storage, path, future.config,
                                        now_ms=now_ms, clean_shutdown=True)
        return self._adopt(promoted)

    # --- duties ---------------------------------------------------------------------------

    def _adopt(self, partition_log: PartitionLog) -> PartitionLog:
        partition_log.on_recovery_point_lowered = self._recovery_point_lowered
        partition_log.on_due = self._log_due
        if partition_log.has_duties:
            self._poll_soon(partition_log)
        return partition_log

    def _poll_soon(self, partition_log: PartitionLog, at_ms: int = 0) -> None:
        """Poll `partition_log` at `at_ms` (0: at the next poll) or sooner."""
        current = self._due_at.get(partition_log)
        if current is not None and current <= at_ms:
            return
        self._due_at[partition_log] = at_ms
        heapq.heappush(self._due_heap, (at_ms, next(self._due_seq), partition_log))

    @property
    def logs_due(self) -> int:
        """Logs waiting for a poll (flushes, delayed deletes): not the idle ones."""
        return len(self._due_at)

    def poll(
        self, now_ms: int, high_watermark_of: Callable[[str, int], int] | None = None
    ) -> int:
        """Flushes, retention and checkpoints that are due; ms until the next is due.

        `high_watermark_of(topic, partition)` bounds retention; without it the LEO is used
        (a single replica). An I/O error takes the log's directory offline.
        """
        assert not self.closed
        heap = self._due_heap
        due: list[PartitionLog] = []
        while heap and heap[0][0] <= now_ms:
            at_ms, _, partition_log = heapq.heappop(heap)
            if self._due_at.get(partition_log) == at_ms:
                del self._due_at[partition_log]
                due.append(partition_log)
        for partition_log in due:
            log_dir = self.log_dir_of_log(partition_log)
            # A closed log was deleted, moved or lost with its directory.
            if partition_log.closed or log_dir in self._offline:
                continue
            try:
                wait_ms = partition_log.poll(now_ms)
            except OSError as e:
                self.mark_offline(log_dir, e)
                continue
            # A log with duties stays in the heap even at "no deadline" (a flush.ms
            # beyond it still comes due); an idle one leaves until `on_due`.
            if wait_ms < _NO_DEADLINE_MS or partition_log.has_duties:
                self._poll_soon(partition_log, now_ms + wait_ms)
        next_due = _NO_DEADLINE_MS
        if heap:
            next_due = max(0, heap[0][0] - now_ms)
        if now_ms >= self._next_retention_ms:
            self._retention_moves.extend(self.run_retention(now_ms, high_watermark_of))
            self._next_retention_ms = now_ms + self.manager_config.retention_check_interval_ms
        if now_ms >= self._next_recovery_checkpoint_ms:
            self.checkpoint_recovery_points()
            self._next_recovery_checkpoint_ms = (
                now_ms + self.manager_config.flush_offset_checkpoint_interval_ms)
        for due in (self._next_retention_ms, self._next_recovery_checkpoint_ms):
            next_due = min(next_due, max(0, due - now_ms))
        if self._retired:
            self._remove_retired_file()
            if self._retired:
                next_due = 0
        return next_due

    def _remove_retired_file(self) -> None:
        """One file of the first retired log directory, or the directory once empty."""
        path = self._retired[0]
        log_dir = posixpath.dirname(path)
        if log_dir in self._offline:
            self._retired.pop(0)
            return
        try:
            names = self.storage.list_dir(path)
            if names:
                self.storage.delete(f"{path}/{names[0]}")
            else:
                self.storage.remove_dir(path)
                self._retired.pop(0)
        except FileNotFoundError:
            self._retired.pop(0)
        except OSError as e:
            self._retired.pop(0)
            self.mark_offline(log_dir, e)

    def take_retention_moves(self) -> list[Key]:
        """The partitions whose log start the retention passes of ``poll`` moved since
        the last call (the replica manager tells their followers' sessions)."""
        moves, self._retention_moves = self._retention_moves, []
        return moves

    def run_retention(
        self, now_ms: int, high_watermark_of: Callable[[str, int], int] | None = None
    ) -> dict[Key, RetentionResult]:
        self.retention_runs += 1
        results = {}
        for key, partition_log in self.logs():
            hw = high_watermark_of(*key) if high_watermark_of else partition_log.log_end_offset
            try:
                result = partition_log.delete_old_segments(now_ms, hw)
            except OSError as e:
                self.mark_offline(self.log_dir_of_log(partition_log), e)
                continue
            if result.deleted_base_offsets:
                log.info("%s-%d: retention deleted segments %s (%s)", key[0], key[1],
                         list(result.deleted_base_offsets), ", ".join(sorted(set(result.reasons))))
                results[key] = result
        return results

    def _checkpoint_dir(self, log_dir: str) -> None:
        offsets = {key: pl.recovery_point for key, pl in self.logs_in(log_dir)}
        self.storage.write_atomically(self._path(log_dir, RECOVERY_POINT_CHECKPOINT),
                                      encode_offset_checkpoint(offsets))

    def checkpoint_recovery_points(self) -> None:
        """Each online directory's recovery-point checkpoint (a failure takes it offline)."""
        for log_dir in self.log_dirs:
            self._guarded(log_dir, lambda: self._checkpoint_dir(log_dir))

    def flush_all(self, now_ms: int) -> None:
        for _, partition_log in [*self.logs(), *self.future_logs()]:
            self._guarded(self.log_dir_of_log(partition_log), lambda: partition_log.flush(now_ms))
        self.checkpoint_recovery_points()

    def shutdown(self) -> None:
        """Clean shutdown: fsync every log, write the checkpoints, then the markers (in
        online directories only: an offline one is left as the failure found it)."""
        if self.closed:
            return
        for _, partition_log in [*self.logs(), *self.future_logs()]:
            self._guarded(self.log_dir_of_log(partition_log),
                          lambda: partition_log.close(fsync=False))
        # One sync for every log, index and staged epoch checkpoint, instead of five
        # fsyncs per partition; only then may the checkpoint and marker say "clean".
        try:
            self.storage.sync_all()
        except OSError as e:
            # Which directory failed is unknown: none of them may claim a clean stop.
            log.error("log shutdown: sync failed (%s); no directory is marked clean", e)
            self.storage.close()
            self.closed = True
            return
        self.checkpoint_recovery_points()
        marker = json.dumps({"version": 0, "broker_epoch": self.broker_epoch}).encode()
        for log_dir in self.log_dirs:
            self._guarded(log_dir, lambda: self.storage.write_atomically(
                self._path(log_dir, CLEAN_SHUTDOWN_MARKER), marker))
        self.storage.close()
        self.closed = True


def _marker_broker_epoch(data: bytes) -> int:
    """The broker epoch a clean-shutdown marker holds; -1 for an empty (older) or
    unreadable one: the controller then treats the stop as unclean, the safe side."""
    try:
        value = json.loads(data.decode()).get("broker_epoch", -1)
    except (ValueError, AttributeError):
        return -1
    return value if isinstance(value, int) else -1
