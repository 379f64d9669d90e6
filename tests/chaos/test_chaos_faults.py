"""Disk faults on a stopped broker's segment files: a torn tail leaves the valid batches
and a partial one; a flipped byte breaks exactly one batch's CRC."""
from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest

from chaos.faults import FlipByte, TornTail, inject
from clients.records import CorruptRecordError, Record, build_batch, iter_batches


@dataclass
class Node:
    data_dir: str


class StoppedBroker:
    """What the disk faults need of a cluster: a data directory, and no running process."""

    def __init__(self, data_dir: str) -> None:
        self._node = Node(data_dir)

    def node(self, node_id: int) -> Node:
        return self._node

    def is_running(self, node_id: int) -> bool:
        return False


def write_segment(tmp_path, batches: int = 4) -> tuple[StoppedBroker, str, list[bytes]]:
    part = tmp_path / "t-0"
    part.mkdir()
    raw = [build_batch([Record(offset=10 * i + j, timestamp=1000, key=b"k", value=b"v%d" % j)
                        for j in range(10)], base_offset=10 * i) for i in range(batches)]
    path = part / f"{0:020d}.log"
    path.write_bytes(b"".join(raw))
    return StoppedBroker(str(tmp_path)), str(path), raw


def test_torn_tail_cuts_inside_the_last_batch(tmp_path) -> None:
    broker, path, raw = write_segment(tmp_path)
    whole = sum(len(b) for b in raw[:-1])
    done = inject(broker, TornTail(1, "t", 0), random.Random(7))
    size = os.path.getsize(path)
    assert whole < size < whole + len(raw[-1]), done
    with open(path, "rb") as f:
        data = f.read()
    assert [h.base_offset for _, h in iter_batches(data, partial_tail_ok=True)] == [0, 10, 20]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data))          # without tolerance the tail is corrupt


@pytest.mark.parametrize("batch_index", [0, 2])
def test_flip_byte_breaks_one_batch_crc(tmp_path, batch_index: int) -> None:
    broker, path, raw = write_segment(tmp_path)
    before = open(path, "rb").read()
    inject(broker, FlipByte(1, "t", 0, batch_index=batch_index), random.Random(3))
    after = open(path, "rb").read()
    diff = [i for i in range(len(before)) if before[i] != after[i]]
    assert len(diff) == 1 and before[diff[0]] ^ after[diff[0]] == 0xFF
    bad = len(raw) - 1 - batch_index
    start = sum(len(b) for b in raw[:bad])
    assert start + 21 <= diff[0] < start + len(raw[bad])       # inside the CRC-covered part
    good = [h.base_offset for _, h in iter_batches(after[:start])]
    assert good == [10 * i for i in range(bad)]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(after[start:start + len(raw[bad])]))


def test_disk_faults_refuse_a_running_broker(tmp_path) -> None:
    broker, _, _ = write_segment(tmp_path)
    broker.is_running = lambda node_id: True
    with pytest.raises(AssertionError):
        inject(broker, TornTail(1, "t", 0))
