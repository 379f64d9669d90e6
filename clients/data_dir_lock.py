"""One process per data directory: Kafka's ``.lock``, for Ketch's controllers, brokers
and ``ketch up``.

Theory of operation. A node opens ``<dir>/.lock`` and takes an exclusive ``flock`` on it
without waiting, before it opens anything else in the directory, and keeps the file
open for the rest of its life; the kernel drops the lock when the process exits, however
it exits (SIGKILL included), so a stale lock cannot outlive its holder. A second process
on the same directory fails to take the lock and refuses to start with one line naming
the directory and the holder's pid, which the holder writes into the file once it holds
the lock (the pid is for the message only: the lock itself is the truth). ``holder``
asks the same question without taking the lock for longer than the probe, and without
creating anything, so ``ketch up`` can check a cluster's directories before it writes.

Lives in ``clients`` because every process kind takes it (controllers in
``quorum/__main__.py``, brokers in ``broker/__main__.py``, ``ketch up`` in
``clients/cli/launcher.py``) and ``clients`` is what they all import.
"""
from __future__ import annotations

import fcntl
import os

__all__ = ["LOCK_FILE", "DataDirInUseError", "DataDirLock", "holder", "lock_data_dir"]

LOCK_FILE = ".lock"   # Kafka's name for it


class DataDirInUseError(Exception):
    """Another live process holds the directory's lock; ``pid`` is its pid if it wrote one."""

    def __init__(self, directory: str, pid: int | None) -> None:
        who = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"data directory {directory} is in use by {who} "
                         f"(its {LOCK_FILE} is locked); stop that process or use another directory")
        self.directory = directory
        self.pid = pid


class DataDirLock:
    """A held lock; ``release`` (or process exit) gives it up."""

    def __init__(self, directory: str, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)     # closing the last descriptor drops the flock
            self._fd = None


# Locks taken by this process, kept referenced so the garbage collector never closes one.
_HELD: list[DataDirLock] = []


def lock_data_dir(directory: str) -> DataDirLock:
    """Create ``directory`` if needed and lock it for this process's life, or raise
    ``DataDirInUseError``. Call it before the directory's storage is opened."""
    directory = os.path.abspath(directory)
    os.makedirs(directory, exist_ok=True)
    # O_CLOEXEC: a child spawned by the holder must not inherit (and so prolong) the lock.
    fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _read_pid(fd)
        os.close(fd)
        raise DataDirInUseError(directory, pid) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    lock = DataDirLock(directory, fd)
    _HELD.append(lock)
    return lock


def holder(directory: str) -> int | None:
    """The pid holding ``directory``'s lock (-1 if the holder wrote none), or None if no
    process holds it. Creates nothing."""
    path = os.path.join(os.path.abspath(directory), LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            # A shared lock conflicts only with the holder's exclusive one.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            return pid if pid is not None else -1
        return None
    finally:
        os.close(fd)     # also drops the probe's shared lock


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
