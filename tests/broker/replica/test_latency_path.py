"""Issue 22: nothing but events on the acks=all path, and the per-stage trace of it.

Each wait on the path ends on the event that makes it unnecessary, with no timer: a parked
follower fetch on the leader's append, a parked consumer fetch on the HW advance a
follower's report causes, an acks=all produce on that same report. Driven by hand through
the real core and its asyncio shell (no process, no socket); every long poll here would
wait an hour if an event were missed.
"""
from __future__ import annotations

import asyncio
import uuid

from broker.latency_trace import LatencyTracer
from broker.log import FileStorage, LogManager
from broker.replica_driver import ReplicaDriver
from broker.replica_manager import ReplicaManager
from clients.protocol import messages as M
from clients.protocol.errors import ErrorCode
from clients.records import Record, build_batch, read_batch_header
from clients.types import TopicPartition
from metadata_harness import Metadata

TP = TopicPartition("t", 0)
TOPIC_ID = uuid.UUID(int=42)
HOUR_S = 3600.0


def batch(n: int, start: int = 0) -> bytes:
    return bytes(build_batch([Record(start + i, 0, None, b"v%d" % (start + i)) for i in range(n)]))


def leader_with_metadata(tmp_path, tracer: LatencyTracer | None = None) -> tuple[ReplicaDriver, Metadata]:
    """Broker 1 leading t-0 with ISR [1, 2, 3], and the metadata log that says so."""
    logs, _ = LogManager.open(FileStorage(), str(tmp_path / "b1"), now_ms=0)
    core = ReplicaManager(1, logs, {}, replica_lag_time_max_ms=10_000)
    meta = Metadata()
    core.apply_metadata(*meta.commit(
        *[M.RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=10 + b,
                                 fenced=False) for b in (1, 2, 3)],
        M.TopicRecord(name="t", topic_id=TOPIC_ID),
        M.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2, 3],
                          leader=1, leader_epoch=5, partition_epoch=7)), 0)
    driver = ReplicaDriver(core, controller=None, now_ms=lambda: 0,  # type: ignore[arg-type]
                           broker_epoch=lambda: 1, tracer=tracer)
    driver.run(lambda core: None)        # the effects of becoming leader
    return driver, meta


def leader_driver(tmp_path, tracer: LatencyTracer | None = None) -> ReplicaDriver:
    """Broker 1 leading t-0 with ISR [1, 2, 3], both followers caught up at offset 0."""
    driver, _ = leader_with_metadata(tmp_path, tracer)
    for follower in (2, 3):
        driver.read(TP, 0, 1 << 20, 5, replica_id=follower, min_one_batch=True)
    return driver


def test_the_leaders_append_answers_a_parked_follower_fetch(tmp_path) -> None:
    async def main() -> None:
        driver = leader_driver(tmp_path)
        parked = asyncio.ensure_future(driver.wait_for_data([TP], HOUR_S))
        await asyncio.sleep(0)
        assert driver.fetch_purgatory_size == 1
        result = driver.append(TP, batch(3), acks=-1)
        assert result.error_code == ErrorCode.NONE
        assert driver.fetch_purgatory_size == 0, "woken by the append itself"
        await parked
        read = driver.read(TP, 0, 1 << 20, 5, replica_id=2, min_one_batch=True)
        assert read.records is not None and read.records.last_offset == 2
    asyncio.run(main())


def test_the_report_that_advances_the_hw_answers_parked_consumers_and_acks_all(tmp_path) -> None:
    async def main() -> None:
        driver = leader_driver(tmp_path)
        result = driver.append(TP, batch(3), acks=-1)
        acked = asyncio.ensure_future(driver.await_replication(TP, result.required_offset, 3_600_000))
        consumer = driver.read(TP, 0, 1 << 20, 5, replica_id=-1, min_one_batch=True)
        assert consumer.records is None, "nothing is committed yet"
        parked = asyncio.ensure_future(driver.wait_for_data([TP], HOUR_S))
        await asyncio.sleep(0)
        # Follower 2 reports offset 3: the HW still waits for follower 3.
        driver.read(TP, 3, 1 << 20, 5, replica_id=2, min_one_batch=True)
        await asyncio.sleep(0)
        assert not acked.done() and driver.fetch_purgatory_size == 1
        driver.read(TP, 3, 1 << 20, 5, replica_id=3, min_one_batch=True)
        assert driver.fetch_purgatory_size == 0, "the HW advance woke the consumer's fetch"
        await parked
        assert await acked == ErrorCode.NONE
        consumer = driver.read(TP, 0, 1 << 20, 5, replica_id=-1, min_one_batch=True)
        assert consumer.high_watermark == 3 and consumer.records is not None
    asyncio.run(main())


def test_the_driver_numbers_each_partition_change_for_follower_sessions(tmp_path) -> None:
    driver = leader_driver(tmp_path)
    seq = driver.change_seq
    assert driver.changes_since(seq) == []
    driver.append(TP, batch(2), acks=1)
    assert any(TP in tps for tps in driver.changes_since(seq))
    assert driver.change_seq > seq and driver.changes_since(driver.change_seq) == []
    assert driver.changes_since(-1) is None or TP in set().union(*driver.changes_since(-1))


def test_a_follower_at_the_leo_stays_in_sync_until_an_append_then_lags_from_its_last_fetch(tmp_path) -> None:
    """Kafka's isCaughtUp: the ISR lag of an idle partition's follower at the LEO counts
    only from the leader's next append, back to the follower's last fetch of any
    partition (its idle partitions are not reported per fetch)."""
    driver, _ = leader_with_metadata(tmp_path)
    core = driver.core
    for follower in (2, 3):
        core.read(TP, 0, 1 << 20, 5, replica_id=follower, now_ms=1, min_one_batch=True)
    core.report_idle_follower_fetches(2, 12, [], now_ms=50_000)  # 2 fetches other partitions
    core.poll(50_000)
    assert not [e for e in core.take_effects() if type(e).__name__ == "SendAlterPartition"]
    core.append(TP, batch(1), acks=1, now_ms=50_001)
    core.poll(50_001)
    [send] = [e for e in core.take_effects() if type(e).__name__ == "SendAlterPartition"]
    assert send.proposal.new_isr == (1, 2)                      # 3 last fetched at 1 ms


def test_an_hw_advance_alone_leaves_a_parked_follower_fetch_parked(tmp_path) -> None:
    """Kafka's DelayedFetch: a follower reads up to the log end, so the HW advance its
    peer's report causes answers nothing for it (one wake-up per append, not two); it
    reads the new HW when something else ends its wait."""
    async def main() -> None:
        driver = leader_driver(tmp_path)
        driver.append(TP, batch(3), acks=-1)
        # Follower 3 has fetched the batch and parks at offset 3; follower 2 reports
        # offset 3 too, which advances the HW.
        driver.read(TP, 3, 1 << 20, 5, replica_id=3, min_one_batch=True)
        follower = asyncio.ensure_future(driver.wait_for_data([TP], HOUR_S, follower=True))
        consumer = asyncio.ensure_future(driver.wait_for_data([TP], HOUR_S))
        await asyncio.sleep(0)
        driver.read(TP, 3, 1 << 20, 5, replica_id=2, min_one_batch=True)
        assert await consumer == {TP}, "a consumer below the old HW can read now"
        await asyncio.sleep(0)
        assert not follower.done() and driver.fetch_purgatory_size == 1
        assert driver.append(TP, batch(1), acks=-1).error_code == ErrorCode.NONE
        assert await follower == {TP}
        read = driver.read(TP, 3, 1 << 20, 5, replica_id=3, min_one_batch=True,
                           update_fetch_state=False)
        assert read.high_watermark == 3 and read.records is not None
        # The time up: an empty answer (read everything again), HW-only changes or not.
        driver.read(TP, 4, 1 << 20, 5, replica_id=2, min_one_batch=True)
        assert await driver.wait_for_data([TP], 0.01, follower=True) == set()
    asyncio.run(main())


def test_a_parked_fetch_learns_which_partitions_woke_it(tmp_path) -> None:
    """So a follower fetch woken by one partition's append reads that one again, not
    all of its session's (mostly idle) partitions."""
    async def main() -> None:
        driver = leader_driver(tmp_path)
        idle = TopicPartition("t", 1)       # not hosted: nothing ever changes it
        parked = asyncio.ensure_future(driver.wait_for_data([idle, TP], HOUR_S))
        await asyncio.sleep(0)
        driver.append(TP, batch(1), acks=-1)
        assert await parked == {TP}
        assert driver.fetch_purgatory_size == 0
        assert await driver.wait_for_data([idle, TP], 0.01) == set(), "the time is up: nothing woke it"
    asyncio.run(main())


def test_a_parked_fetch_of_a_big_session_wakes_as_a_small_one_does(tmp_path) -> None:
    """A follower's session of thousands of partitions parks without registering under
    each (a wide waiter, asked about every change): the same wake-ups, HW-only rule and
    purgatory count as a fetch of a few partitions."""
    async def main() -> None:
        driver = leader_driver(tmp_path)
        session = frozenset([TP] + [TopicPartition("idle", i) for i in range(1000)])
        driver.append(TP, batch(3), acks=-1)
        driver.read(TP, 3, 1 << 20, 5, replica_id=3, min_one_batch=True)
        follower = asyncio.ensure_future(driver.wait_for_data(session, HOUR_S, follower=True))
        consumer = asyncio.ensure_future(driver.wait_for_data(list(session), HOUR_S))
        await asyncio.sleep(0)
        assert driver.fetch_purgatory_size == 2
        driver.read(TP, 3, 1 << 20, 5, replica_id=2, min_one_batch=True)   # the HW advances
        assert await consumer == {TP}
        await asyncio.sleep(0)
        assert not follower.done() and driver.fetch_purgatory_size == 1
        driver.append(TP, batch(1), acks=-1)
        assert await follower == {TP}
        assert driver.fetch_purgatory_size == 0
        assert await driver.wait_for_data(session, 0.01, follower=True) == set()
    asyncio.run(main())


def test_a_followers_fetch_that_lacks_a_partition_just_led_here_is_answered_at_once(tmp_path) -> None:
    """A new partition's first acks=all write waits for its followers to fetch it; a
    follower fetch parked before the follower knew of the partition held that write for
    replica.fetch.wait.max.ms (about half of new topic -> first ack at 10k partitions)."""
    async def main() -> None:
        driver, meta = leader_with_metadata(tmp_path)
        assert await driver.wait_for_data([TP], 0.01, follower=True, replica_id=2) == set(), \
            "nothing new to lead: parked until the time is up"
        parked = asyncio.ensure_future(driver.wait_for_data([TP], HOUR_S, follower=True, replica_id=2))
        other = asyncio.ensure_future(driver.wait_for_data([TP], HOUR_S, follower=True, replica_id=9))
        consumer = asyncio.ensure_future(driver.wait_for_data([TP], HOUR_S))
        await asyncio.sleep(0)
        new = TopicPartition("t", 1)
        driver.apply_metadata(*meta.commit(M.PartitionRecord(
            partition_id=1, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
            leader_epoch=0, partition_epoch=0)))
        assert await parked is None, "follower 2 is a replica of t-1: answered now"
        await asyncio.sleep(0)
        assert not other.done() and not consumer.done()
        # Its broker had not applied the metadata yet: the next fetch still lacks t-1.
        assert await driver.wait_for_data([TP], HOUR_S, follower=True, replica_id=2) is None
        # The one after names it, and parks as any other.
        named = asyncio.ensure_future(driver.wait_for_data([TP, new], HOUR_S, follower=True, replica_id=2))
        await asyncio.sleep(0)
        assert not named.done()
        driver.append(new, batch(1), acks=-1)
        assert await named == {new}
        assert await driver.wait_for_data([TP], 0.01, follower=True, replica_id=2) == set()
        for task in (other, consumer):
            task.cancel()
    asyncio.run(main())


def test_a_parked_fetchs_later_reads_do_not_report_the_followers_position(tmp_path) -> None:
    """Kafka's readFromPurgatory: only a Fetch's first read updates the follower's state."""
    driver = leader_driver(tmp_path)
    result = driver.append(TP, batch(3), acks=-1)
    assert result.error_code == ErrorCode.NONE
    for follower in (2, 3):
        driver.read(TP, 3, 1 << 20, 5, replica_id=follower, min_one_batch=True,
                    update_fetch_state=False)
    consumer = driver.read(TP, 0, 1 << 20, 5, replica_id=-1, min_one_batch=True)
    assert consumer.high_watermark == 0, "re-reads moved no follower's LEO"
    for follower in (2, 3):
        driver.read(TP, 3, 1 << 20, 5, replica_id=follower, min_one_batch=True)
    consumer = driver.read(TP, 0, 1 << 20, 5, replica_id=-1, min_one_batch=True)
    assert consumer.high_watermark == 3


class Clock:
    def __init__(self) -> None:
        self.ns = 0

    def at_ms(self, ms: float) -> int:
        self.ns = int(ms * 1e6)
        return self.ns


def test_the_tracer_times_each_stage_of_one_batch_from_its_previous_stage() -> None:
    seen: list[tuple[str, float]] = []
    tracer = LatencyTracer(lambda stage, ms: seen.append((stage, round(ms, 3))))
    t = Clock()
    tracer.appended(TP, last_offset=9, received_ns=t.at_ms(1), started_ns=t.at_ms(3),
                    now_ns=t.at_ms(3.5), high_watermark=0)
    tracer.appended(TP, 19, t.at_ms(3.6), t.at_ms(3.7), t.at_ms(3.8), 0)    # one trace at a time
    tracer.follower_read(TP, fetch_offset=0, returned_last_offset=19, high_watermark=0, now_ns=t.at_ms(4),
                         replica_id=2)
    tracer.follower_read(TP, 0, 19, 0, t.at_ms(4.2), replica_id=3)       # follower 3's fetch: no news
    tracer.follower_flushed(3, [TP], t.at_ms(4.4))                    # not the fetch that returned it first
    tracer.follower_flushed(2, [TP], t.at_ms(4.5))
    tracer.follower_flushed(2, [TP], t.at_ms(4.6))                    # timed once
    tracer.follower_read(TP, 10, None, 0, t.at_ms(6), replica_id=2)   # follower 2 reports 10
    tracer.follower_read(TP, 20, None, 20, t.at_ms(9), replica_id=3)  # follower 3 reports: HW 20
    tracer.produce_acked(TP, required_offset=20, now_ns=t.at_ms(9.5))     # not the traced batch
    tracer.produce_acked(TP, 10, t.at_ms(10))
    assert tracer.consumer_answered([(TP, 0, 19)], t.at_ms(12)) == [TP]
    assert tracer.consumer_answered([(TP, 10, 19)], t.at_ms(12.5)) == []
    tracer.consumer_flushed([TP], t.at_ms(13))
    assert seen == [("produce_queue", 2.0), ("leader_append", 0.5), ("follower_fetch", 0.5),
                    ("follower_flush", 0.5), ("follower_report", 1.5), ("hw_advance", 3.0),
                    ("produce_ack", 1.0),
                    ("consumer_fetch", 3.0), ("consumer_flush", 1.0), ("total", 12.0)]
    seen.clear()
    # The trace ended with the flush: the next append starts another; on RF 1 the
    # append itself advances the HW.
    tracer.appended(TP, 29, t.at_ms(20), t.at_ms(20), t.at_ms(21), high_watermark=30)
    assert seen == [("produce_queue", 0.0), ("leader_append", 1.0), ("hw_advance", 0.0)]


def test_an_unfinished_trace_gives_way_after_its_maximum_age() -> None:
    seen: list[str] = []
    tracer = LatencyTracer(lambda stage, ms: seen.append(stage), max_age_ns=1_000_000)
    tracer.appended(TP, 9, 0, 0, 0, 0)
    tracer.appended(TP, 19, 500_000, 500_000, 500_000, 0)
    assert seen.count("leader_append") == 1
    tracer.appended(TP, 29, 1_000_000, 1_000_000, 1_000_000, 0)
    assert seen.count("leader_append") == 2


def test_the_follower_side_times_its_append_and_its_next_fetch_per_leader() -> None:
    seen: list[tuple[str, float]] = []
    tracer = LatencyTracer(lambda stage, ms: seen.append((stage, ms)))
    tracer.follower_fetch_sent(1, 0)                    # nothing appended yet: nothing timed
    tracer.follower_fetched(1, received_ns=1_000_000, appended_ns=1_500_000)
    tracer.follower_fetched(2, received_ns=1_000_000, appended_ns=3_000_000)
    tracer.follower_fetch_sent(1, 2_000_000)
    tracer.follower_fetch_sent(1, 9_000_000)            # already timed
    assert seen == [("follower_append", 0.5), ("follower_append", 2.0), ("follower_refetch", 0.5)]


def test_a_disabled_tracer_observes_nothing(tmp_path) -> None:
    seen: list[str] = []
    driver = leader_driver(tmp_path, LatencyTracer(lambda stage, ms: seen.append(stage), enabled=False))
    driver.append(TP, batch(3), acks=-1, received_ns=1)
    driver.read(TP, 0, 1 << 20, 5, replica_id=2, min_one_batch=True)
    assert driver.consumer_answered([]) is None and driver.follower_answered(2, [TP]) is None and seen == []


def test_the_driver_traces_a_batch_through_the_leader(tmp_path) -> None:
    seen: list[str] = []
    driver = leader_driver(tmp_path, LatencyTracer(lambda stage, ms: seen.append(stage)))
    driver.append(TP, batch(3), acks=-1, received_ns=1)
    for follower in (2, 3):
        driver.read(TP, 0, 1 << 20, 5, replica_id=follower, min_one_batch=True)
        written = driver.follower_answered(follower, [TP])
        assert written is not None
        written()
    for follower in (2, 3):
        driver.read(TP, 3, 1 << 20, 5, replica_id=follower, min_one_batch=True)
    read = driver.read(TP, 0, 1 << 20, 5, replica_id=-1, min_one_batch=True)
    flushed = driver.consumer_answered([(TP, 0, read)])
    assert flushed is not None
    flushed()
    assert seen == ["produce_queue", "leader_append", "follower_fetch", "follower_flush", "follower_report",
                    "hw_advance", "consumer_fetch", "consumer_flush", "total"]


def test_a_produce_is_stamped_in_place_in_its_own_frame(tmp_path) -> None:
    """The request's records (a writable view into its frame) are not copied: the
    leader's offsets and epoch land in those very bytes, which the log then holds."""
    driver = leader_driver(tmp_path)
    driver.append(TP, batch(3), acks=1)                       # read-only bytes: copied
    frame = bytearray(b"header" + batch(2))
    records = memoryview(frame)[6:]
    result = driver.append(TP, records, acks=1)
    assert result.error_code == ErrorCode.NONE and result.base_offset == 3
    header = read_batch_header(frame, 6)
    assert header.base_offset == 3 and header.partition_leader_epoch == 5
    read = driver.read(TP, 3, 1 << 20, 5, replica_id=2, min_one_batch=True)
    assert read.log is not None and read.records is not None
    assert read.log.read_records_bytes(read.records) == bytes(records)


def test_a_batch_failing_its_crc_is_refused_before_anything_changes(tmp_path) -> None:
    driver = leader_driver(tmp_path)
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    result = driver.append(TP, memoryview(corrupt), acks=-1)
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE
    assert driver.core.partitions[TP].log.log_end_offset == 0
