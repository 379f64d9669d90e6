"""The storage port under the partition logs: `FileStorage` (real files) and `SimStorage`.

Theory of operation
-------------------
The log code never calls `open`, `os.*` or `mmap` itself; it goes through a `Storage`,
a small synchronous port of positional file operations (like Kafka's `ReplicatedLog` /
`MockLog` split, STYLE.md 1). Two implementations:

* `FileStorage` keeps **one bounded LRU of open file descriptors** shared by every
  partition of a broker (`open_files_max`, default 512). A file is opened on first use and
  closed when it falls off the LRU; reopening is one `open(2)`. That is the file-descriptor
  economy of issue 3: 10,000 partitions with an active segment each (30,000 files) fit
  under the default `ulimit -n` of 1024. Index files are written only at roll, flush and
  close (the indexes live in memory meanwhile), so a hot partition keeps at most its
  `.log` open. Operations pin their descriptor for the duration of the call, so a
  background thread (the cleaner) evicting an entry cannot close a descriptor in use.

* `SimStorage` keeps files in memory, each as the bytes written so far (`current`) and
  the bytes a crash is guaranteed to keep (`durable`, updated by `fsync`). `crash(rng)`
  simulates a power cut: every file keeps its durable bytes plus a random prefix of what
  was written after the last fsync, possibly followed by zeros (a size update that
  reached the disk before the data, as ext4's writeback mode allows). Directory
  operations (create, rename, delete) and `write_atomically` are durable at once, which
  is what a journaling filesystem gives after the directory fsync `FileStorage` does.

Batched durability. A clean shutdown of 10,000 partitions would cost some 50,000 fsyncs
one by one; instead the caller writes without fsync, stages its small atomic files
(`stage_atomic_write`: the data goes to `<path>.tmp`, the rename waits), and calls
`sync_all` once: one `sync()` for the data, then the staged renames, then a second
`sync()` for them. A crash before the renames leaves the old files intact and stray
`.tmp` files, which loading deletes.

Deferred directories. Creating 100,000 partitions paid a mkdir and an empty segment file
per replica (68% of a broker's CPU while creating them right after mass deletes, when
ext4's directory allocation is slow), for partitions most of which are never written.
`make_new_dir(path, deferred=True)` only records the directory, and the empty files then
created in it, in memory; `FileStorage` makes them on disk at the first operation that
needs them there: a write, truncate, fsync, rename or atomic write into it. Listing,
`exists`, `size`, reads (empty) and deletes are answered from memory. A crash or a restart
before then finds no directory, so the caller defers only what it can make again
unchanged from the metadata log: a new log whose first segment starts at offset 0.

Zero-copy reads. A read returns a `FileSlice` naming a path, a byte range and the file's
*generation*. The generation changes whenever the path's content is replaced or cut
(delete, rename onto it, truncate, create), so a slice taken before a compaction swap or
a truncation is detected as stale when the network layer opens it (`open_slice` raises
`StaleFileSliceError`; the fetch path re-reads). While a slice is open its descriptor is
pinned, so the LRU cannot close it under `os.sendfile`; deleting the file then only
unlinks it, and the pinned descriptor still reads the old bytes.
"""

from __future__ import annotations

import errno
import os
import random
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ContextManager, Iterator, Protocol

from clients.frozen import fast_init

__all__ = [
    "Storage",
    "FileStorage",
    "SimStorage",
    "FileSlice",
    "StaleFileSliceError",
    "StorageError",
    "read_slice_bytes",
]


class StorageError(OSError):
    """A disk operation failed (KAFKA_STORAGE_ERROR, 56, at the API layer)."""


class StaleFileSliceError(Exception):
    """The file behind a FileSlice was replaced or truncated after the read: read again."""


@fast_init
@dataclass(frozen=True, slots=True)
class FileSlice:
    """Whole record batches at [position, position + length_bytes) of one segment file.

    `first_offset` is the base offset of the first batch, `last_offset` the last offset
    of the last batch. An empty slice (no batches) has length_bytes 0.
    """

    path: str
    generation: int
    position: int
    length_bytes: int
    first_offset: int
    last_offset: int

    @property
    def is_empty(self) -> bool:
        return self.length_bytes == 0


class Storage(Protocol):
    """Positional file operations; paths are plain strings joined with '/'."""

    def list_dir(self, path: str) -> list[str]: ...
    def make_dirs(self, path: str) -> None: ...
    def make_new_dir(self, path: str, deferred: bool = False) -> bool: ...
    def remove_dir(self, path: str) -> None: ...
    def exists(self, path: str) -> bool: ...
    def size(self, path: str) -> int: ...
    def create(self, path: str) -> None: ...
    def read(self, path: str, position: int, length: int) -> bytes: ...
    def read_file(self, path: str) -> bytes | None: ...
    def write(self, path: str, position: int, data: bytes | bytearray | memoryview) -> None: ...
    def truncate(self, path: str, size: int) -> None: ...
    def fsync(self, path: str) -> None: ...
    def fsync_dir(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def delete(self, path: str) -> None: ...
    def write_atomically(self, path: str, data: bytes) -> None: ...
    def stage_atomic_write(self, path: str, data: bytes) -> None: ...
    def sync_all(self) -> None: ...
    def generation(self, path: str) -> int: ...
    def open_slice(self, file_slice: FileSlice) -> ContextManager[int]: ...
    def read_slice(self, file_slice: FileSlice) -> bytes: ...
    def close(self) -> None: ...


def read_slice_bytes(storage: Storage, file_slice: FileSlice) -> bytes:
    """The bytes of a slice, for callers that cannot use os.sendfile (tests, TLS)."""
    if file_slice.is_empty:
        return b""
    return storage.read_slice(file_slice)


class _Generations:
    """Per-path generation numbers from one global counter, so a path that is deleted
    and created again never repeats a generation a live slice may hold."""

    def __init__(self) -> None:
        self._by_path: dict[str, int] = {}
        self._counter = 0

    def get(self, path: str) -> int:
        return self._by_path.get(path, 0)

    def bump(self, path: str) -> None:
        self._counter += 1
        self._by_path[path] = self._counter

    def bump_tree(self, directory: str) -> None:
        """Every known path under ``directory`` (it was renamed: its files moved)."""
        prefix = directory.rstrip("/") + "/"
        for path in [p for p in self._by_path if p.startswith(prefix)]:
            self.bump(path)


class _Handle:
    __slots__ = ("fd", "pins", "doomed")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pins = 0
        self.doomed = False  # closed when the last pin goes (the path was deleted/renamed)


class FileStorage:
    """Real files, with a bounded LRU of open descriptors shared by all partitions."""

    def __init__(self, open_files_max: int = 512) -> None:
        assert open_files_max >= 1
        self.open_files_max = open_files_max
        self._lock = threading.Lock()
        # Invariant: len(_handles) <= open_files_max, except while more are pinned.
        self._handles: OrderedDict[str, _Handle] = OrderedDict()
        self._generations = _Generations()
        self._staged: list[tuple[str, str]] = []  # (tmp, final) renames awaiting sync_all
        self.opens_total = 0  # how many times a descriptor was opened (for the bench)
        # Deferred directories (module doc): path -> the names of the empty files created
        # in it, a shared tuple (most hold one name, the first segment's: no tuple each).
        self._deferred: dict[str, tuple[str, ...]] = {}
        self._deferred_names: dict[tuple[str, ...], tuple[str, ...]] = {(): ()}
        self._roots: set[str] = set()       # parents known to exist on disk

    # --- descriptor cache ---------------------------------------------------------------

    def _acquire(self, path: str) -> _Handle:
        with self._lock:
            handle = self._handles.get(path)
            if handle is not None:
                self._handles.move_to_end(path)
                handle.pins += 1
                return handle
        # Open outside the lock (a syscall); resolve a race by keeping the first one in.
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            if not self._make_deferred(os.path.dirname(path)):
                raise
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        with self._lock:
            self.opens_total += 1
            existing = self._handles.get(path)
            if existing is not None:
                os.close(fd)
                self._handles.move_to_end(path)
                existing.pins += 1
                return existing
            handle = _Handle(fd)
            handle.pins = 1
            self._handles[path] = handle
            self._evict_locked()
            return handle

    def _release(self, handle: _Handle) -> None:
        with self._lock:
            handle.pins -= 1
            assert handle.pins >= 0
            if handle.doomed and handle.pins == 0:
                os.close(handle.fd)
            else:
                self._evict_locked()

    def _evict_locked(self) -> None:
        # From the least recently used end, one entry at a time (not a copy of the whole
        # LRU per eviction: at 10,000 partitions loading, every open evicts). A pinned
        # entry is in use, so it moves to the recently used end.
        handles = self._handles
        skipped = 0
        while len(handles) > self.open_files_max and skipped < len(handles):
            path, handle = next(iter(handles.items()))
            if handle.pins:
                handles.move_to_end(path)
                skipped += 1
                continue
            del handles[path]
            os.close(handle.fd)

    def _forget_locked(self, path: str) -> None:
        handle = self._handles.pop(path, None)
        if handle is None:
            return
        if handle.pins == 0:
            os.close(handle.fd)
        else:
            handle.doomed = True

    @property
    def open_files(self) -> int:
        with self._lock:
            return len(self._handles)

    # --- deferred directories ----------------------------------------------------------------

    def _deferred_file(self, path: str) -> tuple[str, str, tuple[str, ...]] | None:
        """(directory, name, the directory's deferred names) when ``path`` is in a
        deferred directory, else None. One read of the dict: another thread that makes
        the directory meanwhile leaves on disk what these names say."""
        if not self._deferred:
            return None
        directory, _, name = path.rpartition("/")
        names = self._deferred.get(directory)
        return None if names is None else (directory, name, names)

    def _make_deferred(self, directory: str) -> bool:
        """Make a deferred directory and its empty files on disk; False if not deferred."""
        with self._lock:
            names = self._deferred.pop(directory, None)
            if names is None:
                return False
            try:
                os.mkdir(directory)
            except FileExistsError:
                pass
            except FileNotFoundError:
                os.makedirs(directory, exist_ok=True)   # its parent went (a failed disk?)
            for name in names:
                # O_EXCL: a file there already (put by something else than this storage)
                # is an error, never a log taken for empty and written over.
                os.close(os.open(f"{directory}/{name}", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
            return True

    def _make_deferred_parent(self, path: str) -> None:
        if self._deferred:
            self._make_deferred(path.rpartition("/")[0])

    @property
    def deferred_dirs(self) -> int:
        """How many directories are recorded but not made yet (for tests)."""
        return len(self._deferred)

    # --- the port -------------------------------------------------------------------------

    def list_dir(self, path: str) -> list[str]:
        names = self._deferred.get(path)
        if names is not None:
            return list(names)
        listed = os.listdir(path)
        if path in self._roots and self._deferred:
            # Rare: a log directory listed while some of its partitions are deferred
            # (a load lists them before any is).
            prefix = path + "/"
            listed += [d[len(prefix):] for d in list(self._deferred)
                       if d.startswith(prefix) and "/" not in d[len(prefix):]]
        return sorted(listed)

    def make_dirs(self, path: str) -> None:
        if self._make_deferred(path):
            return
        # One stat in the common case (the directory is there: every log at a restart);
        # os.makedirs alone pays three syscalls and its path handling.
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)

    def make_new_dir(self, path: str, deferred: bool = False) -> bool:
        """Make ``path`` (and its parents); False when it was there already: one system
        call for a new partition's directory, where make_dirs pays a stat first.
        ``deferred``: record it and make it at the first write into it (module doc): a
        stat instead of a mkdir and, later, a create."""
        if path in self._deferred:
            return False
        if deferred:
            parent = path.rpartition("/")[0]
            if parent not in self._roots:
                os.makedirs(parent, exist_ok=True)
                self._roots.add(parent)
            if os.path.lexists(path):
                return False
            with self._lock:
                self._deferred[path] = ()
            return True
        try:
            os.mkdir(path)
        except FileExistsError:
            return False
        except FileNotFoundError:
            os.makedirs(path, exist_ok=True)        # the parent too (rare: a new root)
        return True

    def remove_dir(self, path: str) -> None:
        with self._lock:
            if self._deferred.pop(path, None) is not None:
                return
        for name in os.listdir(path):
            self.delete(f"{path}/{name}")
        os.rmdir(path)

    def exists(self, path: str) -> bool:
        if path in self._deferred:
            return True
        deferred = self._deferred_file(path)
        if deferred is not None:
            return deferred[1] in deferred[2]
        return os.path.exists(path)

    def size(self, path: str) -> int:
        deferred = self._deferred_file(path)
        if deferred is not None:
            if deferred[1] in deferred[2]:
                return 0
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return os.stat(path).st_size

    def create(self, path: str) -> None:
        deferred = self._deferred_file(path)
        if deferred is not None:
            directory, name, _ = deferred
            with self._lock:
                names = self._deferred.get(directory)
                if names is not None:
                    if name not in names:
                        names = tuple(sorted((*names, name)))
                        # One tuple per distinct set of names, shared by every directory.
                        self._deferred[directory] = self._deferred_names.setdefault(names, names)
                    return
        # A path that was not there: no slice can hold its content, so its generation
        # need not move (nor be kept: ~130 B per new partition's segment otherwise).
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            with self._lock:
                self._forget_locked(path)
                self._generations.bump(path)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        os.close(fd)

    def read(self, path: str, position: int, length: int) -> bytes:
        handle = self._acquire(path)
        try:
            return os.pread(handle.fd, length, position)
        finally:
            self._release(handle)

    def read_file(self, path: str) -> bytes | None:
        """The whole file, None if absent: for small files read once (checkpoints at
        load). Not through the descriptor LRU, where each would evict a segment's."""
        deferred = self._deferred_file(path)
        if deferred is not None:
            return b"" if deferred[1] in deferred[2] else None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def write(self, path: str, position: int, data: bytes | bytearray | memoryview) -> None:
        handle = self._acquire(path)
        try:
            written = os.pwrite(handle.fd, data, position)
            if written != len(data):  # a short write: rare (disk full, signals); finish it
                view = memoryview(data)[written:]
                position += written
                while view:
                    written = os.pwrite(handle.fd, view, position)
                    if written == 0:
                        raise StorageError(errno.EIO, "pwrite wrote nothing", path)
                    view = view[written:]
                    position += written
        finally:
            self._release(handle)

    def truncate(self, path: str, size: int) -> None:
        with self._lock:
            self._generations.bump(path)
        handle = self._acquire(path)
        try:
            os.ftruncate(handle.fd, size)
        finally:
            self._release(handle)

    def fsync(self, path: str) -> None:
        if self._deferred and self._deferred_file(path) is not None:
            return          # an empty file not made yet: a crash may lose it (module doc)
        handle = self._acquire(path)
        try:
            os.fdatasync(handle.fd) if hasattr(os, "fdatasync") else os.fsync(handle.fd)
        finally:
            self._release(handle)

    def fsync_dir(self, path: str) -> None:
        if path in self._deferred:
            return          # not made yet: nothing in it to make durable
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        """A file or a directory. For a directory, the handles of the files in both trees
        are forgotten: they are keyed by path, and a file later created at an old path
        (a log moved back to its first directory) must not reach the moved inode."""
        if src in self._deferred and not os.path.lexists(dst):
            with self._lock:        # a never-written log retired or moved: still nothing on disk
                self._deferred[dst] = self._deferred.pop(src)
            return
        self._make_deferred(src)
        self._make_deferred_parent(src)
        self._make_deferred_parent(dst)
        tree = os.path.isdir(src)       # files are renamed often (segment retirement): no scan
        with self._lock:
            for path in (src, dst):
                self._forget_locked(path)
                self._generations.bump(path)
                if tree:
                    prefix = path.rstrip("/") + "/"
                    for held in [h for h in self._handles if h.startswith(prefix)]:
                        self._forget_locked(held)
                    self._generations.bump_tree(path)
        os.replace(src, dst)

    def delete(self, path: str) -> None:
        deferred = self._deferred_file(path)
        if deferred is not None:
            directory, name, _ = deferred
            with self._lock:
                if directory in self._deferred:
                    names = tuple(n for n in self._deferred[directory] if n != name)
                    self._deferred[directory] = self._deferred_names.setdefault(names, names)
                    return
        with self._lock:
            self._forget_locked(path)
            self._generations.bump(path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def write_atomically(self, path: str, data: bytes) -> None:
        tmp = path + ".tmp"
        self._make_deferred_parent(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        self.rename(tmp, path)
        self.fsync_dir(os.path.dirname(path) or ".")

    def stage_atomic_write(self, path: str, data: bytes) -> None:
        tmp = path + ".tmp"
        self._make_deferred_parent(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        with self._lock:
            self._staged.append((tmp, path))

    def sync_all(self) -> None:
        """Make every write so far durable, then the staged files (see the module doc)."""
        os.sync()
        with self._lock:
            staged, self._staged = self._staged, []
        if staged:
            for tmp, path in staged:
                self.rename(tmp, path)
            os.sync()

    def generation(self, path: str) -> int:
        with self._lock:
            return self._generations.get(path)

    def _pin_slice(self, file_slice: FileSlice) -> _Handle:
        """The slice's descriptor, pinned; StaleFileSliceError if its file changed since."""
        handle = self._acquire(file_slice.path)
        with self._lock:
            stale = self._generations.get(file_slice.path) != file_slice.generation
        if stale:
            self._release(handle)
            raise StaleFileSliceError(file_slice.path)
        return handle

    @contextmanager
    def open_slice(self, file_slice: FileSlice) -> Iterator[int]:
        """A pinned descriptor for `os.sendfile(socket, fd, position, length_bytes)`."""
        handle = self._pin_slice(file_slice)
        try:
            yield handle.fd
        finally:
            self._release(handle)

    def read_slice(self, file_slice: FileSlice) -> bytes:
        # Not through open_slice's generator: every small fetch answer is a copy.
        path = file_slice.path
        handle = self._pin_slice(file_slice)
        try:
            data = os.pread(handle.fd, file_slice.length_bytes, file_slice.position)
        finally:
            self._release(handle)
        if len(data) != file_slice.length_bytes:
            raise StaleFileSliceError(path)
        return data

    def close(self) -> None:
        with self._lock:
            for path in list(self._handles):
                self._forget_locked(path)


class _SimFile:
    __slots__ = ("current", "durable", "dirty_from")

    def __init__(self) -> None:
        self.current = bytearray()
        self.durable = bytearray()
        self.dirty_from: int | None = None  # lowest position changed since the last fsync

    def touch(self, position: int) -> None:
        self.dirty_from = position if self.dirty_from is None else min(self.dirty_from, position)


class SimStorage:
    """In-memory storage with fsync semantics and simulated crashes (for tests)."""

    def __init__(self) -> None:
        self._files: dict[str, _SimFile] = {}
        self._dirs: set[str] = set()
        self._generations = _Generations()
        self._staged: list[tuple[str, str]] = []
        self.open_files = 0  # nothing is ever held open

    def _file(self, path: str) -> _SimFile:
        try:
            return self._files[path]
        except KeyError:
            raise FileNotFoundError(errno.ENOENT, "no such file", path) from None

    def list_dir(self, path: str) -> list[str]:
        if path not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix):].split("/", 1)[0] for p in (*self._files, *self._dirs)
                 if p.startswith(prefix)}
        return sorted(names)

    def make_dirs(self, path: str) -> None:
        parts = path.strip("/").split("/")
        lead = "/" if path.startswith("/") else ""
        for i in range(1, len(parts) + 1):
            self._dirs.add(lead + "/".join(parts[:i]))

    def make_new_dir(self, path: str, deferred: bool = False) -> bool:
        # Made at once, deferred or not: a simulated crash keeps directories anyway.
        if path in self._dirs:
            return False
        self.make_dirs(path)
        return True

    def remove_dir(self, path: str) -> None:
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self._files if p.startswith(prefix)]:
            self.delete(p)
        self._dirs = {d for d in self._dirs if d != path and not d.startswith(prefix)}

    def exists(self, path: str) -> bool:
        return path in self._files or path in self._dirs

    def size(self, path: str) -> int:
        return len(self._file(path).current)

    def create(self, path: str) -> None:
        if path in self._files:         # replaced: slices of the old content go stale
            self._generations.bump(path)
        self._files[path] = _SimFile()

    def read(self, path: str, position: int, length: int) -> bytes:
        assert position >= 0 and length >= 0
        return bytes(self._file(path).current[position : position + length])

    def read_file(self, path: str) -> bytes | None:
        f = self._files.get(path)
        return None if f is None else bytes(f.current)

    def write(self, path: str, position: int, data: bytes | bytearray | memoryview) -> None:
        f = self._file(path)
        end = position + len(data)
        if position > len(f.current):
            f.current.extend(bytes(position - len(f.current)))
        f.current[position:end] = data
        f.touch(position)

    def truncate(self, path: str, size: int) -> None:
        f = self._file(path)
        del f.current[size:]
        if size > len(f.current):
            f.current.extend(bytes(size - len(f.current)))
        f.touch(size)
        self._generations.bump(path)

    def fsync(self, path: str) -> None:
        f = self._file(path)
        f.durable = bytearray(f.current)
        f.dirty_from = None

    def fsync_dir(self, path: str) -> None:
        pass  # directory operations are durable at once in this model

    def rename(self, src: str, dst: str) -> None:
        """A file or a directory (with everything under it)."""
        if src in self._dirs:
            src_prefix, dst_prefix = src.rstrip("/") + "/", dst.rstrip("/") + "/"
            for path in [p for p in self._files if p.startswith(src_prefix)]:
                self._files[dst_prefix + path[len(src_prefix):]] = self._files.pop(path)
            moved = {d for d in self._dirs if d == src or d.startswith(src_prefix)}
            self._dirs -= moved
            self._dirs |= {dst + d[len(src):] for d in moved}
            for path in (src, dst):
                self._generations.bump(path)
                self._generations.bump_tree(path)
            return
        self._files[dst] = self._file(src)
        del self._files[src]
        self._generations.bump(src)
        self._generations.bump(dst)

    def delete(self, path: str) -> None:
        self._files.pop(path, None)
        self._generations.bump(path)

    def write_atomically(self, path: str, data: bytes) -> None:
        f = _SimFile()
        f.current = bytearray(data)
        f.durable = bytearray(data)
        self._files[path] = f
        self._generations.bump(path)

    def stage_atomic_write(self, path: str, data: bytes) -> None:
        tmp = path + ".tmp"
        self.create(tmp)
        self.write(tmp, 0, data)
        self._staged.append((tmp, path))

    def sync_all(self) -> None:
        for path in self._files:
            self.fsync(path)
        staged, self._staged = self._staged, []
        for tmp, path in staged:
            self.rename(tmp, path)

    def generation(self, path: str) -> int:
        return self._generations.get(path)

    @contextmanager
    def open_slice(self, file_slice: FileSlice) -> Iterator[int]:
        raise NotImplementedError("SimStorage has no descriptors; use read_slice")
        yield 0  # pragma: no cover

    def read_slice(self, file_slice: FileSlice) -> bytes:
        if self._generations.get(file_slice.path) != file_slice.generation:
            raise StaleFileSliceError(file_slice.path)
        data = self.read(file_slice.path, file_slice.position, file_slice.length_bytes)
        if len(data) != file_slice.length_bytes:
            raise StaleFileSliceError(file_slice.path)
        return data

    def close(self) -> None:
        pass

    # --- fault injection (tests) --------------------------------------------------------

    def crash(self, rng: random.Random) -> dict[str, int]:
        """Lose unflushed bytes as a power cut might; returns {path: bytes lost}."""
        lost: dict[str, int] = {}
        for path, f in self._files.items():
            if f.dirty_from is None:
                continue
            keep_from = min(f.dirty_from, len(f.current))
            # Of the writes since the last fsync, some prefix reached the disk.
            k = rng.randint(keep_from, len(f.current))
            content = bytearray(f.current[:k])
            if k < len(f.current) and rng.random() < 0.25:
                # The size update landed but the data did not: a zero-filled tail.
                content.extend(bytes(rng.randint(1, len(f.current) - k)))
            lost[path] = len(f.current) - k
            f.current = content
            f.durable = bytearray(content)
            f.dirty_from = None
            self._generations.bump(path)
        return lost

    def files(self) -> list[str]:
        return sorted(self._files)

    def flip_byte(self, path: str, position: int) -> None:
        f = self._file(path)
        f.current[position] ^= 0xFF
        f.durable = bytearray(f.current)

    def cut(self, path: str, size: int) -> None:
        """Tear the file at `size` bytes (durably)."""
        f = self._file(path)
        del f.current[size:]
        f.durable = bytearray(f.current)
