"""S3RemoteStorage against a real S3-compatible server (moto's server mode, a process on
127.0.0.1): a closed segment written by the broker's own log code is copied, read back by
ranges and by index, copied again, deleted; absent objects, a missing bucket, the server
stopped or hanging, and 5xx answers give the port's errors (the retriable one)."""
from __future__ import annotations

import asyncio
import http.server
import logging
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Coroutine, Iterator, TypeVar

import pytest
from s3_server import (ACCESS_KEY, BUCKET, ENDPOINT_KEY, SECRET_KEY, admin_client, object_keys,
                       s3_server, s3_unresponsive)

from broker.log import FileStorage, LogConfig, PartitionLog
from broker.log.offset_index import OffsetIndex
from broker.producer_state import ProducerStateTable
from clients.tiered.remote_storage import (IndexType, LogSegmentData, RemoteResourceNotFound,
                                          RemoteSegmentId, RemoteStorageConfigError,
                                          RemoteStorageError)
from clients.tiered.s3 import MAX_PARTS, MIN_PART_SIZE, S3Config, S3RemoteStorage, plan_parts
from clients.records import Record, build_batch, decode_batches

_T = TypeVar("_T")
# Kafka's leader-epoch checkpoint text: version, count, then "epoch start_offset" lines.
EPOCHS = b"0\n2\n0 0\n3 100\n"


def run(coro: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coro)


def new_segment_id(topic: str = "orders", partition: int = 0) -> RemoteSegmentId:
    return RemoteSegmentId(uuid.uuid4(), topic, partition, uuid.uuid4())


@dataclass
class ClosedSegment:
    data: LogSegmentData
    base_offset: int
    next_offset: int
    entries_max: int


def write_closed_segment(root: Path, *, total_bytes: int, value_bytes: int) -> ClosedSegment:
    """A partition log written by the broker's log code, rolled once: its first segment is
    closed, with its offset and time indexes and a producer snapshot at its end."""
    config = LogConfig(segment_bytes=1 << 30, index_interval_bytes=4096)
    storage = FileStorage(open_files_max=8)
    log, _ = PartitionLog.open(storage, str(root), config, now_ms=0)
    producers = ProducerStateTable()
    offset = 0
    while log.size_bytes < total_bytes:
        records = [Record(i, 1_000 + offset + i, b"key-%d" % (offset + i),
                          (b"%d:" % (offset + i)).ljust(value_bytes, b"v")) for i in range(4)]
        result = log.append_as_leader(bytearray(build_batch(records)), leader_epoch=3, now_ms=0)
        assert result.error_code == 0, result
        producers.update(7, 0, offset, 3, result.base_offset, 1_000 + offset)
        offset = result.last_offset + 1
    log.write_producer_snapshot(log.log_end_offset, producers.to_snapshot())
    log.roll(now_ms=0)
    closed = log.segments[0]
    data = LogSegmentData(
        segment=Path(closed.log_path), offset_index=Path(closed.index_path),
        time_index=Path(closed.time_index_path),
        transaction_index=Path(closed.txn_index_path) if Path(closed.txn_index_path).exists() else None,
        producer_snapshot=root / f"{closed.next_offset:020d}.snapshot",
        leader_epoch_index=EPOCHS)
    segment = ClosedSegment(data, closed.base_offset, closed.next_offset,
                            config.offset_index_entries_max)
    log.close()
    storage.close()
    assert data.segment.stat().st_size >= total_bytes and data.offset_index.stat().st_size > 0
    assert data.producer_snapshot is not None and data.producer_snapshot.exists()
    return segment


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with s3_server(tmp_path_factory.mktemp("moto")) as props:
        yield props


@pytest.fixture(scope="module")
def storage(s3: dict[str, str]) -> Iterator[S3RemoteStorage]:
    """One store for the tests that need no special settings (a client is slow to make);
    parts of the smallest size S3 takes, so a ten-megabyte segment goes in three."""
    store = S3RemoteStorage(S3Config.from_properties(s3), part_size=MIN_PART_SIZE,
                            multipart_threshold=MIN_PART_SIZE)
    yield store
    run(store.close())


@pytest.fixture(scope="module")
def big_segment(tmp_path_factory: pytest.TempPathFactory) -> ClosedSegment:
    # Above the multipart threshold used below: three parts, the last one short.
    return write_closed_segment(tmp_path_factory.mktemp("big") / "orders-0",
                                total_bytes=2 * MIN_PART_SIZE + 300_000, value_bytes=4_000)


@pytest.fixture(scope="module")
def small_segment(tmp_path_factory: pytest.TempPathFactory) -> ClosedSegment:
    return write_closed_segment(tmp_path_factory.mktemp("small") / "orders-0",
                                total_bytes=60_000, value_bytes=200)


def objects_under(props: dict[str, str], segment: RemoteSegmentId) -> set[str]:
    """The object names the store holds for ``segment``."""
    return set(object_keys(props, segment.key("")[:-1]))    # '<topic>-<partition>-<id>/<id>'


# ---------------------------------------------------------------- configuration (no server)

def test_the_config_is_read_from_the_broker_properties() -> None:
    props = {"ketch.remote.storage.s3.bucket": "archive",
             "ketch.remote.storage.s3.endpoint": "http://127.0.0.1:9000",
             "ketch.remote.storage.s3.access.key": "AKIDEXAMPLE",
             "ketch.remote.storage.s3.secret.key": "wJalrXUtnFEMI/K7MDENG",
             "ketch.remote.storage.s3.prefix": "/ketch/prod/"}
    config = S3Config.from_properties(props)
    assert (config.bucket, config.endpoint, config.region, config.prefix) == \
        ("archive", "http://127.0.0.1:9000", "us-east-1", "ketch/prod")
    segment = new_segment_id("t", 2)
    assert config.object_key(segment, "log") == f"ketch/prod/t-2-{segment.topic_id}/{segment.segment_id}.log"
    assert S3Config(bucket="b").object_key(segment, "offset") == segment.key("offset")
    # Neither key shows in a repr (a config dump, a log line of the storage).
    assert "AKIDEXAMPLE" not in repr(config) and "wJalr" not in repr(config)

    with pytest.raises(RemoteStorageConfigError, match="bucket is required"):
        S3Config.from_properties({"ketch.remote.storage.s3.endpoint": "http://127.0.0.1:9000"})
    with pytest.raises(RemoteStorageConfigError, match="http:// or https://"):
        S3Config.from_properties({**props, "ketch.remote.storage.s3.endpoint": "127.0.0.1:9000"})
    with pytest.raises(RemoteStorageConfigError, match="go together") as refused:
        S3Config.from_properties({**props, "ketch.remote.storage.s3.access.key": ""})
    assert "wJalr" not in str(refused.value)


def test_parts_cover_the_file_in_order_within_s3s_limits() -> None:
    mib = 1 << 20
    for size, part_size in [(10 * mib + 1, 5 * mib), (16 * mib, 8 * mib), (8 * mib + 7, 8 * mib),
                            (1 << 40, 8 * mib), (MAX_PARTS * 5 * mib + 1, 5 * mib)]:
        parts = plan_parts(size, part_size)
        assert [n for n, _, _ in parts] == list(range(1, len(parts) + 1))
        assert sum(length for _, _, length in parts) == size
        assert all(a[1] + a[2] == b[1] for a, b in zip(parts, parts[1:]))     # contiguous
        assert len(parts) <= MAX_PARTS
        assert all(length >= max(part_size, MIN_PART_SIZE) for _, _, length in parts[:-1])
        assert 0 < parts[-1][2] <= parts[0][2]
    assert [length for _, _, length in plan_parts(16 * mib, 8 * mib)] == [8 * mib, 8 * mib]


# ---------------------------------------------------------------- against moto

@pytest.mark.process
def test_a_closed_segment_is_copied_in_parts_and_read_back_by_range_and_index(
        s3: dict[str, str], storage: S3RemoteStorage, big_segment: ClosedSegment) -> None:
    data = big_segment.data
    records = data.segment.read_bytes()
    segment = new_segment_id()

    async def scenario() -> None:
        await storage.copy_log_segment_data(segment, data)
        # Every index comes back as the broker wrote it.
        assert await storage.fetch_index(segment, IndexType.OFFSET) == data.offset_index.read_bytes()
        assert await storage.fetch_index(segment, IndexType.TIMESTAMP) == data.time_index.read_bytes()
        assert data.producer_snapshot is not None
        assert await storage.fetch_index(segment, IndexType.PRODUCER_SNAPSHOT) == \
            data.producer_snapshot.read_bytes()
        assert await storage.fetch_index(segment, IndexType.LEADER_EPOCH) == EPOCHS
        # The records file, whole and by ranges (inclusive ends), across part boundaries.
        assert await storage.fetch_log_segment(segment, 0) == records
        for start, end in [(0, 0), (MIN_PART_SIZE - 10, MIN_PART_SIZE + 10),
                           (2 * MIN_PART_SIZE - 1, 2 * MIN_PART_SIZE), (len(records) - 5, None),
                           (len(records) - 5, len(records) + 100)]:
            got = await storage.fetch_log_segment(segment, start, end)
            assert got == records[start:None if end is None else end + 1], (start, end)
        # Past the end: nothing, as a file read there.
        assert await storage.fetch_log_segment(segment, len(records) + 1) == b""
        # What a remote fetch does: the offset index finds the batch, a ranged GET reads it.
        index = OffsetIndex.from_bytes(big_segment.base_offset, big_segment.entries_max,
                                       await storage.fetch_index(segment, IndexType.OFFSET),
                                       len(records))
        target = (big_segment.base_offset + big_segment.next_offset) * 2 // 3
        position = index.lookup(target).position
        chunk = await storage.fetch_log_segment(segment, position, position + 64 * 1024 - 1)
        batches = decode_batches(chunk, partial_tail_ok=True)   # as a fetch response may end
        assert batches[0].header.base_offset <= target
        offsets = [r.offset for b in batches for r in b.records]
        assert target in offsets and offsets == list(range(offsets[0], offsets[-1] + 1))
        assert next(r for b in batches for r in b.records if r.offset == target).key == \
            b"key-%d" % target

    run(scenario())
    assert objects_under(s3, segment) == {segment.key(suffix) for suffix in
                                          ("log", "offset", "timeindex", "snapshot",
                                           "leader-epoch-checkpoint")}
    client = admin_client(s3[ENDPOINT_KEY])
    try:
        # Multipart indeed (its ETag is "<md5>-<parts>"), and completed: nothing left pending.
        etag = client.head_object(Bucket=BUCKET, Key=segment.key("log"))["ETag"]
        assert etag.strip('"').endswith("-3"), etag
        assert not client.list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    finally:
        client.close()


@pytest.mark.process
def test_a_failed_multipart_upload_is_aborted_and_leaves_no_object(
        s3: dict[str, str], storage: S3RemoteStorage, big_segment: ClosedSegment,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The records file shrinks under the upload (as a truncation would): the size taken at
    # the start promises a part the file no longer has.
    records, real_getsize = big_segment.data.segment, os.path.getsize
    monkeypatch.setattr(os.path, "getsize", lambda path: real_getsize(path) + (
        MIN_PART_SIZE if Path(path) == records else 0))
    segment = new_segment_id()
    with pytest.raises(RemoteStorageError, match="changed during its upload"):
        run(storage.copy_log_segment_data(segment, big_segment.data))
    client = admin_client(s3[ENDPOINT_KEY])
    try:
        assert not client.list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    finally:
        client.close()
    assert segment.key("log") not in objects_under(s3, segment)


@pytest.mark.process
def test_a_copy_again_overwrites_and_a_prefix_keeps_stores_apart(
        s3: dict[str, str], storage: S3RemoteStorage, small_segment: ClosedSegment,
        tmp_path: Path) -> None:
    data = small_segment.data
    segment = new_segment_id()
    # A retry after a crash may copy files that changed since (a rebuilt index): the last
    # copy wins, whole.
    rebuilt = tmp_path / "rebuilt.index"
    rebuilt.write_bytes(data.offset_index.read_bytes()[:8])
    prefixed = {**s3, "ketch.remote.storage.s3.prefix": "cluster-b"}

    async def scenario() -> None:
        other = S3RemoteStorage.from_config(prefixed)
        try:
            await storage.copy_log_segment_data(segment, data)
            await storage.copy_log_segment_data(segment, data)
            assert await storage.fetch_log_segment(segment, 0) == data.segment.read_bytes()
            await storage.copy_log_segment_data(segment, LogSegmentData(
                data.segment, rebuilt, data.time_index, None, None, EPOCHS))
            assert await storage.fetch_index(segment, IndexType.OFFSET) == rebuilt.read_bytes()
            # The same segment id under another prefix is another object.
            with pytest.raises(RemoteResourceNotFound):
                await other.fetch_log_segment(segment, 0)
            await other.copy_log_segment_data(segment, data)
            assert await other.fetch_index(segment, IndexType.OFFSET) == data.offset_index.read_bytes()
            assert await storage.fetch_index(segment, IndexType.OFFSET) == rebuilt.read_bytes()
            await other.delete_log_segment_data(segment)
        finally:
            await other.close()

    run(scenario())


@pytest.mark.process
def test_absent_objects_are_not_found_and_a_delete_removes_every_file(
        s3: dict[str, str], storage: S3RemoteStorage, small_segment: ClosedSegment) -> None:
    data = small_segment.data
    segment = new_segment_id()
    never_copied = new_segment_id()

    async def scenario() -> None:
        with pytest.raises(RemoteResourceNotFound):
            await storage.fetch_log_segment(never_copied, 0, 100)
        with pytest.raises(RemoteResourceNotFound):
            await storage.fetch_index(never_copied, IndexType.OFFSET)
        await storage.delete_log_segment_data(never_copied)      # absent: not an error
        await storage.copy_log_segment_data(segment, data)
        # A segment without a transaction index has none in the store.
        assert data.transaction_index is None
        with pytest.raises(RemoteResourceNotFound):
            await storage.fetch_index(segment, IndexType.TRANSACTION)
        assert len(objects_under(s3, segment)) == 5
        await storage.delete_log_segment_data(segment)
        assert objects_under(s3, segment) == set()
        for index_type in IndexType:
            with pytest.raises(RemoteResourceNotFound):
                await storage.fetch_index(segment, index_type)
        with pytest.raises(RemoteResourceNotFound):
            await storage.fetch_log_segment(segment, 0)
        await storage.delete_log_segment_data(segment)           # twice: still fine

    run(scenario())


@pytest.mark.process
def test_a_missing_bucket_is_the_stores_fault_not_an_absent_segment(
        s3: dict[str, str], small_segment: ClosedSegment) -> None:
    storage_props = {**s3, "ketch.remote.storage.s3.bucket": "no-such-bucket"}

    async def scenario() -> None:
        storage = S3RemoteStorage.from_config(storage_props)
        try:
            with pytest.raises(RemoteStorageError) as fetch:
                await storage.fetch_log_segment(new_segment_id(), 0)
            assert not isinstance(fetch.value, RemoteResourceNotFound)
            assert "NoSuchBucket" in str(fetch.value)
            with pytest.raises(RemoteStorageError) as copy:
                await storage.copy_log_segment_data(new_segment_id(), small_segment.data)
            assert not isinstance(copy.value, RemoteResourceNotFound)
        finally:
            await storage.close()

    run(scenario())


@pytest.mark.process
def test_no_credential_is_logged_even_at_debug(
        s3: dict[str, str], small_segment: ClosedSegment, caplog: pytest.LogCaptureFixture) -> None:
    segment = new_segment_id()

    async def scenario() -> None:
        storage = S3RemoteStorage.from_config(s3)
        try:
            await storage.copy_log_segment_data(segment, small_segment.data)
            await storage.fetch_log_segment(segment, 0, 99)
            with pytest.raises(RemoteResourceNotFound) as absent:
                await storage.fetch_index(new_segment_id(), IndexType.OFFSET)
            assert ACCESS_KEY not in str(absent.value) and SECRET_KEY not in str(absent.value)
            assert ACCESS_KEY not in repr(storage) and SECRET_KEY not in repr(storage)
        finally:
            await storage.close()

    with caplog.at_level(logging.DEBUG):
        run(scenario())
    # botocore logged every request with its headers; the Authorization header is redacted.
    messages = [r.getMessage() for r in caplog.records]
    assert any("Credential=<redacted>" in m for m in messages)
    assert not [m for m in messages if ACCESS_KEY in m or SECRET_KEY in m]


@pytest.mark.process
def test_the_server_stopped_gives_retriable_errors(
        tmp_path: Path, small_segment: ClosedSegment) -> None:
    segment = new_segment_id()
    with s3_server(tmp_path) as props:
        storage = S3RemoteStorage(S3Config.from_properties(props), connect_timeout_s=2,
                                  read_timeout_s=5)
        run(storage.copy_log_segment_data(segment, small_segment.data))
    # moto is stopped (by pid): nothing listens on its port any more.

    async def scenario() -> None:
        try:
            # Each call fails after botocore's retries; all at once to keep the test short.
            failures = await asyncio.gather(
                storage.fetch_log_segment(segment, 0, 10),
                storage.fetch_index(segment, IndexType.OFFSET),
                storage.copy_log_segment_data(new_segment_id(), small_segment.data),
                storage.delete_log_segment_data(segment), return_exceptions=True)
            for failure in failures:
                assert type(failure) is RemoteStorageError, failure
                assert "Could not connect" in str(failure), failure
        finally:
            await storage.close()

    run(scenario())


# ---------------------------------------------------------------- a failing endpoint

class _FailingS3(http.server.BaseHTTPRequestHandler):
    """An endpoint that answers every request 503 SlowDown (S3's throttling)."""
    requests = 0

    def _answer(self) -> None:
        type(self).requests += 1
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
                b"<Message>Please reduce your request rate.</Message></Error>")
        self.send_response(503)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def failing_endpoint() -> Iterator[tuple[str, type[_FailingS3]]]:
    handler = type("Handler", (_FailingS3,), {"requests": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_5xx_answers_are_retried_then_retriable(
        failing_endpoint: tuple[str, type[_FailingS3]], small_segment: ClosedSegment) -> None:
    endpoint, handler = failing_endpoint
    storage = S3RemoteStorage(S3Config(bucket=BUCKET, endpoint=endpoint, access_key=ACCESS_KEY,
                                       secret_key=SECRET_KEY), max_attempts=2)

    async def scenario() -> None:
        try:
            with pytest.raises(RemoteStorageError) as throttled:
                await storage.fetch_log_segment(new_segment_id(), 0, 10)
            assert not isinstance(throttled.value, RemoteResourceNotFound)
            assert "SlowDown" in str(throttled.value) and "503" in str(throttled.value)
            assert handler.requests == 2        # botocore retried once, as configured
            with pytest.raises(RemoteStorageError):
                await storage.copy_log_segment_data(new_segment_id(), small_segment.data)
        finally:
            await storage.close()

    run(scenario())


@pytest.mark.process
def test_an_unresponsive_store_times_out_retriably_and_comes_back(
        s3: dict[str, str], storage: S3RemoteStorage, small_segment: ClosedSegment) -> None:
    segment = new_segment_id()
    run(storage.copy_log_segment_data(segment, small_segment.data))
    impatient = S3RemoteStorage(S3Config.from_properties(s3), read_timeout_s=0.5, max_attempts=1)
    patient = S3RemoteStorage(S3Config.from_properties(s3), read_timeout_s=30)

    async def scenario() -> None:
        try:
            with s3_unresponsive(s3):
                with pytest.raises(RemoteStorageError) as timed_out:
                    await impatient.fetch_index(segment, IndexType.OFFSET)
                assert not isinstance(timed_out.value, RemoteResourceNotFound)
                assert "timeout" in str(timed_out.value).lower()
                # Closing does not wait for a request the hung store holds (a broker's
                # shutdown would wait 30 s x 3 attempts).
                hung = asyncio.ensure_future(patient.fetch_log_segment(segment, 0))
                await asyncio.sleep(0)      # submitted to a worker thread
                await asyncio.wait_for(patient.close(), timeout=10)
                assert not hung.done()
                hung.cancel()
            # Back, with what it held.
            assert await impatient.fetch_index(segment, IndexType.OFFSET) == \
                small_segment.data.offset_index.read_bytes()
        finally:
            await impatient.close()

    run(scenario())
