"""Log directory moves against a model (hypothesis stateful): a leader with two log dirs
over SimStorage takes appends, record deletions, moves back and forth, polls (copies and
swaps), clean restarts and power cuts in any order. Its log must always hold the model's
records from its log start, and a power cut may only cut the tail (never resurrect,
reorder or mix in records), wherever a move stood (broker.replica_manager,
broker.log.log_manager)."""
from __future__ import annotations

import random
import uuid

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.log import LogManager, SimStorage
from broker.replica_manager import ReplicaManager
from clients.protocol import messages as M
from clients.records import Record, build_batch, decode_batches
from clients.types import TopicPartition
from metadata_harness import Metadata

TP = TopicPartition("t", 0)
DIRS = ["/data/d1", "/data/d2"]
TOPIC_ID = uuid.UUID(int=3)


class LogDirMoves(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.storage = SimStorage()
        self.meta = Metadata()
        self.meta.commit(
            M.RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=11,
                                   fenced=False),
            M.TopicRecord(name="t", topic_id=TOPIC_ID),
            M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1,
                              leader_epoch=1, partition_epoch=0))
        self.now = 0
        self.next_value = 0
        self.model: list[bytes] = []        # the records from the log start, in order
        self.start()

    def start(self) -> None:
        logs, _ = LogManager.open(self.storage, DIRS, now_ms=self.now)
        # A small copy budget: moves take several polls, so a restart or a power cut can
        # come while a copy is part done.
        self.core = ReplicaManager(1, logs, {}, replica_lag_time_max_ms=10_000,
                                   log_dir_move_bytes_per_poll=300)
        self.core.apply_metadata(self.meta.image, None, self.now)
        self.core.take_effects()

    def tick(self) -> int:
        self.now += 1
        return self.now

    def values(self) -> list[bytes]:
        plog = self.core.partitions[TP].log
        result = plog.read(plog.log_start_offset, 1 << 30, plog.log_end_offset)
        if result.records.is_empty:
            return []
        # Whole batches come back; the records below the log start are not the log's.
        return [r.value for b in decode_batches(plog.read_records_bytes(result.records))
                for r in b.records if r.offset >= plog.log_start_offset]

    @rule(n=st.integers(1, 30))
    def append(self, n: int) -> None:
        values = [b"v%d" % (self.next_value + i) for i in range(n)]
        self.next_value += n
        result = self.core.append(TP, bytes(build_batch([Record(i, 0, None, v) for i, v in enumerate(values)])),
                                  acks=1, now_ms=self.tick())
        assert result.error_code == 0, result
        self.model += values

    @rule(fraction=st.floats(0, 1))
    def delete_records(self, fraction: float) -> None:
        plog = self.core.partitions[TP].log
        offset = plog.log_start_offset + int(fraction * (plog.log_end_offset - plog.log_start_offset))
        before = plog.log_start_offset
        code, low = self.core.delete_records(TP, offset)
        assert code == 0 and low == max(before, offset)
        del self.model[: low - before]

    @rule(to=st.sampled_from(DIRS))
    def alter_dir(self, to: str) -> None:
        assert self.core.alter_replica_log_dir(TP, to, self.tick()) == 0

    @rule(polls=st.integers(1, 3))
    def poll(self, polls: int) -> None:
        for _ in range(polls):
            self.core.poll(self.tick())

    @rule()
    def restart(self) -> None:
        self.core.shutdown()
        self.start()

    @rule(rng=st.randoms(use_true_random=False))
    def power_cut(self, rng: random.Random) -> None:
        self.storage.crash(rng)
        self.start()
        found = self.values()
        # Only the unflushed tail may be gone: what is left is the model's prefix.
        assert found == self.model[: len(found)], "a power cut left other records than a prefix"
        self.model = found

    @invariant()
    def log_holds_the_model(self) -> None:
        assert self.values() == self.model

    @invariant()
    def one_current_log_and_at_most_one_move(self) -> None:
        logs = self.core.logs
        current = logs.log_dir_of("t", 0)
        assert current in DIRS
        future = logs.future_log("t", 0)
        assert future is None or logs.log_dir_of_log(future) != current
        names = [n for d in DIRS if self.storage.exists(d) for n in self.storage.list_dir(d)
                 if n == "t-0"]
        assert names == ["t-0"], names


# Examples from the hypothesis profile (ci: few, nightly: many); steps long enough for a
# move to be copied part way, cut, restarted and finished.
LogDirMoves.TestCase.settings = settings(stateful_step_count=30, deadline=None)
test_log_dir_moves = LogDirMoves.TestCase


def test_a_power_cut_that_spares_the_copy_but_not_its_source_cuts_the_copy_back() -> None:
    """The scripted case the machine reaches only rarely: the copy kept records the
    current log lost; new records then take those offsets, and the swap must not bring the
    lost ones back (LogManager.finish_loading cuts the copy to its source's end)."""
    m = LogDirMoves()
    for _ in range(4):
        m.append(5)
    m.restart()                                     # offsets 0-19 durable
    durable_bytes = m.core.partitions[TP].log.size_bytes
    for _ in range(4):
        m.append(5)                                 # 20-39 in the page cache only
    m.alter_dir(DIRS[1])
    m.poll(3)                                       # the copy has 0-29 (a batch a poll)
    future = m.core.logs.future_log("t", 0)
    assert future is not None and future.log_end_offset == 30
    for segment in future.segments:
        m.storage.fsync(segment.log_path)           # the copy's bytes reached the disk ...
    current = m.core.partitions[TP].log
    m.storage.cut(current.active_segment.log_path, durable_bytes)   # ... its source's did not
    m.storage.crash(random.Random(0))
    m.start()
    assert m.values() == m.model[:20]
    m.model = m.model[:20]
    for _ in range(4):
        m.append(5)                                 # new records at 20-39
    m.poll(3)
    assert m.core.logs.log_dir_of("t", 0) == DIRS[1]
    m.log_holds_the_model()
