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


def test_a_deferred_directory_and_its_empty_files_reach_the_disk_at_the_first_write(tmp_path: Path) -> None:
    # Creating 100,000 partitions paid a mkdir and an empty file per replica; most are
    # never written. Until their first write they are answered from memory.
    storage = FileStorage(open_files_max=4)
    d = f"{tmp_path}/t-0"
    assert storage.make_new_dir(d, deferred=True)
    assert not storage.make_new_dir(d, deferred=True)       # recorded already
    storage.create(f"{d}/0.log")
    assert not os.path.exists(d) and storage.deferred_dirs == 1
    assert storage.exists(d) and storage.exists(f"{d}/0.log") and not storage.exists(f"{d}/x")
    assert storage.list_dir(d) == ["0.log"] and storage.list_dir(str(tmp_path)) == ["t-0"]
    assert storage.size(f"{d}/0.log") == 0 and storage.read_file(f"{d}/0.log") == b""
    assert storage.read_file(f"{d}/absent") is None
    with pytest.raises(FileNotFoundError):
        storage.size(f"{d}/absent")
    storage.fsync(f"{d}/0.log")                 # nothing to make durable: still nothing made
    storage.fsync_dir(d)
    assert not os.path.exists(d)
    storage.write(f"{d}/0.log", 0, b"abc")
    assert sorted(os.listdir(d)) == ["0.log"] and storage.deferred_dirs == 0
    assert storage.read(f"{d}/0.log", 0, 10) == b"abc"
    storage.close()


def test_a_deferred_directory_is_made_by_an_atomic_write_or_a_rename_into_it(tmp_path: Path) -> None:
    storage = FileStorage()
    for i, make in enumerate((
            lambda d: storage.write_atomically(f"{d}/ckpt", b"1"),
            lambda d: storage.stage_atomic_write(f"{d}/ckpt", b"1"),
            lambda d: storage.truncate(f"{d}/0.log", 0),
            lambda d: storage.rename(f"{d}/0.log", f"{d}/0.log.deleted"),
            lambda d: storage.make_dirs(d))):
        d = f"{tmp_path}/t-{i}"
        storage.make_new_dir(d, deferred=True)
        storage.create(f"{d}/0.log")
        make(d)
        assert os.path.isdir(d) and storage.deferred_dirs == 0, i
    storage.sync_all()
    assert sorted(os.listdir(f"{tmp_path}/t-1")) == ["0.log", "ckpt"]
    assert os.listdir(f"{tmp_path}/t-3") == ["0.log.deleted"]
    storage.close()


def test_a_never_written_deferred_directory_is_renamed_and_removed_without_touching_the_disk(
        tmp_path: Path) -> None:
    storage = FileStorage()
    d = f"{tmp_path}/t-0"
    storage.make_new_dir(d, deferred=True)
    storage.create(f"{d}/0.log")
    storage.rename(d, f"{d}.x-delete")
    assert storage.list_dir(f"{d}.x-delete") == ["0.log"] and not storage.exists(d)
    storage.delete(f"{d}.x-delete/0.log")
    assert storage.list_dir(f"{d}.x-delete") == []
    storage.remove_dir(f"{d}.x-delete")
    assert storage.deferred_dirs == 0 and os.listdir(tmp_path) == []
    # A directory already on disk is not deferred: make_new_dir says it was there.
    os.mkdir(d)
    assert not storage.make_new_dir(d, deferred=True) and storage.deferred_dirs == 0
    storage.close()
