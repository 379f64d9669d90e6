"""Snapshots: image <-> records round-trips exactly; files are atomic and checked."""
from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.protocol import messages as M
from metadata_log import (
    EMPTY_IMAGE, CorruptSnapshotError, Provenance, decode_snapshot, encode_snapshot,
    image_to_records, latest_snapshot, list_snapshots, read_snapshot, records_to_image,
    write_snapshot,
)
from metadata_log.snapshot import HEADER_SIZE
from tests.metadata_log.builders import change, histories, image_of, partition, register, topic


def sample_image():
    return image_of([
        M.FeatureLevelRecord(name="metadata.version", feature_level=21),
        register(1, 10, rack="a"), register(2, 20, rack=None, fenced=True),
        topic("b", 2), partition(2, 0, [1, 2]),
        topic("a", 1), partition(1, 0, [1, 2]), partition(1, 1, [2, 1]),
        change(1, 0, leader=-1, isr=[2]), change(1, 1, leader=2, leader_recovery_state=1),
        M.ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value="1"),
        M.ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=3000),
    ], offset=41)


@given(histories())
def test_image_to_records_round_trips(records) -> None:
    image = image_of(records)
    again = records_to_image(image_to_records(image), image.provenance)
    assert again == image
    assert image_to_records(again) == image_to_records(image)


@given(histories())
def test_snapshot_bytes_round_trip(records) -> None:
    image = image_of(records)
    assert decode_snapshot(encode_snapshot(image)) == image


def test_snapshot_record_order_is_kafkas() -> None:
    names = [type(r).__name__ for r in image_to_records(sample_image())]
    assert names == ["FeatureLevelRecord", "RegisterBrokerRecord", "RegisterBrokerRecord",
                     "TopicRecord", "PartitionRecord", "PartitionRecord",
                     "TopicRecord", "PartitionRecord", "ConfigRecord", "ProducerIdsRecord"]


def test_snapshot_keeps_epochs_that_a_fresh_replay_would_not_give() -> None:
    image = sample_image()
    p = records_to_image(image_to_records(image), image.provenance).topics.get("a").partitions
    assert (p[0].leader, p[0].leader_epoch, p[0].partition_epoch) == (-1, 1, 1)
    assert p[1].leader_recovery_state == 1


def test_empty_image_round_trips() -> None:
    assert decode_snapshot(encode_snapshot(EMPTY_IMAGE)) == EMPTY_IMAGE


def test_write_and_read_a_snapshot_file(tmp_path) -> None:
    image = sample_image()
    path = write_snapshot(tmp_path, image)
    assert path.name == "00000000000000000041-0000000001.checkpoint"
    assert read_snapshot(path) == image
    assert [p.name for p in tmp_path.iterdir()] == [path.name]     # no temporary left


def test_latest_snapshot_ignores_temporaries_and_sorts_by_offset(tmp_path) -> None:
    image = sample_image()
    older = image_of([register(1, 1)], offset=9)
    write_snapshot(tmp_path, older)
    newest = write_snapshot(tmp_path, image)
    (tmp_path / "00000000000000000099-0000000001.checkpoint.tmp").write_bytes(b"torn")
    (tmp_path / "notes.txt").write_text("x")
    assert [p.name[:20] for p in list_snapshots(tmp_path)] == [
        "00000000000000000009", "00000000000000000041"]
    assert latest_snapshot(tmp_path) == newest
    empty = tmp_path / "empty"
    empty.mkdir()
    assert latest_snapshot(empty) is None


@given(position=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_any_flipped_bit_is_detected(position: int, bit: int) -> None:
    data = bytearray(encode_snapshot(sample_image()))
    position %= len(data)
    data[position] ^= 1 << bit
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))


@given(cut=st.integers(0, 10_000))
def test_a_torn_snapshot_is_detected(cut: int) -> None:
    data = encode_snapshot(sample_image())
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data[:cut % len(data)])


def test_trailing_bytes_in_a_file_are_detected(tmp_path) -> None:
    path = write_snapshot(tmp_path, sample_image())
    with open(path, "ab") as f:
        f.write(b"\0")
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)


def test_a_short_file_is_detected(tmp_path) -> None:
    path = tmp_path / "00000000000000000001-0000000001.checkpoint"
    path.write_bytes(b"KETCHSNP")
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)
    assert HEADER_SIZE > 8


def test_snapshot_of_many_partitions(tmp_path) -> None:
    # 20,000 here to keep CI fast; bench/quorum.py times 100,000.
    records = [register(b, b) for b in range(3)]
    for n in range(10):
        records.append(topic(f"t{n}", n))
        records += [partition(n, i, [i % 3, (i + 1) % 3]) for i in range(2_000)]
    image = image_of(records)
    path = write_snapshot(tmp_path, image)
    loaded = read_snapshot(path)
    assert loaded.topics.partition_count() == 20_000
    assert loaded == image
    # ~45-byte PartitionRecord frames plus ~10 bytes of v2 record overhead each
    assert os.path.getsize(path) < 20_000 * 80
    assert loaded.provenance == Provenance(image.provenance.offset, 1)
