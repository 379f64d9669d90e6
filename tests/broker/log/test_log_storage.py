"""The storage port: both implementations behave alike; the LRU bounds open descriptors."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from broker.log.storage import FileSlice, FileStorage, SimStorage, StaleFileSliceError


@pytest.fixture(params=["file", "sim"])
def storage_and_root(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "file":
        storage = FileStorage(open_files_max=4)
        yield storage, str(tmp_path)
        storage.close()
    else:
        yield SimStorage(), "/data"


def test_make_new_dir_says_whether_it_made_the_directory(storage_and_root) -> None:
    storage, root = storage_and_root
    assert storage.make_new_dir(f"{root}/new/t-0")          # its parent too
    assert not storage.make_new_dir(f"{root}/new/t-0")
    assert storage.list_dir(f"{root}/new") == ["t-0"] and storage.list_dir(f"{root}/new/t-0") == []


def test_positional_writes_reads_truncate_rename_delete(storage_and_root) -> None:
    storage, root = storage_and_root
    storage.make_dirs(f"{root}/t-0")
    path = f"{root}/t-0/a.log"
    storage.create(path)
    storage.write(path, 0, b"hello ")
    storage.write(path, 6, bytearray(b"world"))
    assert storage.read(path, 0, 100) == b"hello world"
    assert storage.size(path) == 11
    storage.truncate(path, 5)
    assert storage.read(path, 0, 100) == b"hello"
    storage.rename(path, f"{root}/t-0/b.log")
    assert storage.list_dir(f"{root}/t-0") == ["b.log"]
    storage.write_atomically(f"{root}/t-0/ckpt", b"0\n0\n")
    assert storage.read(f"{root}/t-0/ckpt", 0, 10) == b"0\n0\n"
    assert storage.read_file(f"{root}/t-0/ckpt") == b"0\n0\n"
    assert storage.read_file(f"{root}/t-0/absent") is None
    storage.make_dirs(f"{root}/t-0")                     # there already: nothing changes
    assert storage.list_dir(f"{root}/t-0") == ["b.log", "ckpt"]
    storage.delete(f"{root}/t-0/b.log")
    assert not storage.exists(f"{root}/t-0/b.log")
    storage.remove_dir(f"{root}/t-0")
    assert not storage.exists(f"{root}/t-0")


def test_creating_a_new_file_keeps_no_generation_and_recreating_one_stales_its_slices(
        storage_and_root) -> None:
    # A new partition's segment leaves no per-path entry behind (memory per replica);
    # creating over an existing file replaces its content, so its slices go stale.
    storage, root = storage_and_root
    storage.make_dirs(root)
    path = f"{root}/n.log"
    storage.create(path)
    assert storage.generation(path) == 0
    storage.write(path, 0, b"abc")
    s = FileSlice(path, storage.generation(path), 0, 3, 0, 0)
    assert storage.read_slice(s) == b"abc"
    storage.create(path)
    storage.write(path, 0, b"xyz")
    with pytest.raises(StaleFileSliceError):
        storage.read_slice(s)


def test_slices_go_stale_when_the_file_is_replaced_or_cut(storage_and_root) -> None:
    storage, root = storage_and_root
    storage.make_dirs(root)
    path = f"{root}/s.log"
    storage.create(path)
    storage.write(path, 0, b"abcdef")
    s = FileSlice(path, storage.generation(path), 1, 3, 0, 0)
    assert storage.read_slice(s) == b"bcd"
    storage.truncate(path, 6)
    with pytest.raises(StaleFileSliceError):
        storage.read_slice(s)
    storage.create(f"{root}/other")
    storage.rename(f"{root}/other", path)
    s2 = FileSlice(path, storage.generation(path), 0, 1, 0, 0)
    storage.delete(path)
    storage.create(path)
    with pytest.raises(StaleFileSliceError):
        storage.read_slice(s2)


def test_file_storage_keeps_at_most_open_files_max_descriptors(tmp_path: Path) -> None:
    storage = FileStorage(open_files_max=8)
    fds_before = len(os.listdir("/proc/self/fd"))
    for i in range(100):
        path = str(tmp_path / f"{i}.log")
        storage.create(path)
        storage.write(path, 0, b"x" * i)
    assert storage.open_files == 8
    assert len(os.listdir("/proc/self/fd")) - fds_before <= 8
    assert all(storage.read(str(tmp_path / f"{i}.log"), 0, 1000) == b"x" * i for i in range(100))
    storage.close()
    assert storage.open_files == 0


def test_a_pinned_slice_descriptor_survives_eviction_and_delete(tmp_path: Path) -> None:
    storage = FileStorage(open_files_max=1)
    path = str(tmp_path / "0.log")
    storage.create(path)
    storage.write(path, 0, b"payload")
    s = FileSlice(path, storage.generation(path), 0, 7, 0, 0)
    with storage.open_slice(s) as fd:
        for i in range(5):  # churn the LRU past its size
            storage.create(str(tmp_path / f"o{i}"))
            storage.write(str(tmp_path / f"o{i}"), 0, b"y")
        storage.delete(path)
        assert os.pread(fd, 7, 0) == b"payload"
    storage.close()


def test_eviction_skips_pinned_descriptors_and_closes_the_least_recently_used(tmp_path: Path) -> None:
    storage = FileStorage(open_files_max=2)
    paths = [str(tmp_path / f"{i}.log") for i in range(4)]
    for path in paths:
        storage.create(path)
        storage.write(path, 0, b"z")
    pinned = FileSlice(paths[0], storage.generation(paths[0]), 0, 1, 0, 0)
    opens = storage.opens_total
    with storage.open_slice(pinned):                  # the oldest entry, pinned
        storage.read(paths[1], 0, 1)
        storage.read(paths[2], 0, 1)                  # evicts 1 (2 and pinned 0 stay)
        assert storage.open_files == 2
        storage.read(paths[2], 0, 1)
        assert storage.opens_total == opens + 3       # 0, 1, 2 opened; 2 kept
    storage.read(paths[0], 0, 1)                      # unpinned, still open
    assert storage.opens_total == opens + 3
    storage.close()


def test_sim_crash_keeps_fsynced_bytes_and_a_prefix_of_the_rest() -> None:
    rng = random.Random(7)
    for _ in range(200):
        storage = SimStorage()
        storage.make_dirs("/d")
        storage.create("/d/f")
        storage.write("/d/f", 0, b"durable-")
        storage.fsync("/d/f")
        storage.write("/d/f", 8, b"volatile")
        storage.crash(rng)
        data = storage.read("/d/f", 0, 100)
        assert data.startswith(b"durable-")
        tail = data[8:]
        # Some prefix of the unflushed write, then possibly zeros: nothing else.
        assert any(
            tail[:k] == b"volatile"[:k] and set(tail[k:]) <= {0} for k in range(len(tail) + 1)
        )
