"""A Raft journal for pysyncobj that is durable before anything depending on it is sent.

Why: pysyncobj 0.3.17's FileJournal writes entries into an mmap and never fsyncs it, and
stores the term and vote with a rename but without fsync. Raft (section 5, figure 2:
"persistent state ... updated on stable storage before responding to RPCs") needs both
durable before a follower acknowledges entries or grants a vote, and before a leader
counts its own copy towards a majority; otherwise a power loss on a majority can lose a
committed record or let a node vote twice in one term.

How: entries are appended to a file with a CRC each; ``sync()`` makes everything written so
far durable (fdatasync). ``quorum/raft.py`` calls ``sync()`` right before every message
pysyncobj sends (acks, votes, append_entries) and at the end of every tick, so the fsync is
*grouped*: one per outgoing burst, however many entries the burst covers (a follower that
receives ten entries in one message fsyncs once). The current term and vote are rare and
are written synchronously (write, fsync, rename, fsync the directory). The commit index,
stored once a second, is only a lower bound (a stale one means applying fewer entries
until the leader repeats it): it goes to a file of its own, written in place with a CRC
and never fsynced, after the entries it covers are. Its two fsyncs a second on the tick
thread stalled it beyond the election timeout when brokers loaded the disk (issue 22).

pysyncobj also truncates and re-adds entries it already holds when a leader with
``appendEntriesUseBatch=False`` resends from an older index (its ``next_node_idx`` handling
rewinds ``nextIndex`` to the last acknowledged entry while later entries are in flight).
Those re-added entries are identical (same index, term and bytes), so truncation is *lazy*:
``deleteEntriesFrom`` only forgets entries in memory; an ``add`` of the very entry that
was there restores it without writing; anything else, or the next ``sync()``, cuts the file
first. A real conflict (a different entry at an index at or below the commit index) is a
Raft safety violation and is logged as such here, where it can be told apart from the
benign resend.

File layout (big-endian): an 8-byte magic, then records of
``u32 length | u32 crc32c | u64 index | u64 term | command``, where length and crc cover
index, term and command. Opening reads records up to the first torn or corrupt one and cuts
the file there: an entry that never reached the disk was never acknowledged either.
"""
from __future__ import annotations

import json
import logging
import os
import struct
import time
from typing import Any

import crc32c

logger = logging.getLogger(__name__)

MAGIC = b"KETCHRJ1"
_HEAD = struct.Struct(">II")        # length of (index, term, command), crc32c of the same
_ENTRY = struct.Struct(">QQ")       # index, term
_COMMIT = struct.Struct(">QI")      # commit index, crc32c of its 8 bytes

Entry = tuple[bytes, int, int]      # pysyncobj's shape: (command, raft index, raft term)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_durably(path: str, data: bytes) -> None:
    """Replace `path` by `data` so that after a crash it holds either the old or new bytes."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def decode_commit_index(data: bytes) -> int | None:
    """The commit index file's value; None when torn or never written (it is not
    fsynced): the meta file's older value holds then."""
    if len(data) != _COMMIT.size:
        return None
    value, crc = _COMMIT.unpack(data)
    return value if crc32c.crc32c(data[:8]) == crc else None


def _encode_entry(entry: Entry) -> bytes:
    command, index, term = entry
    body = _ENTRY.pack(index, term) + command
    return _HEAD.pack(len(body), crc32c.crc32c(body)) + body


class FsyncJournal:
    """pysyncobj's Journal interface (duck-typed: add, clear, deleteEntriesFrom,
    deleteEntriesTo, __getitem__, __len__, _destroy, set/getRaftCommitIndex,
    set/getCurrentTerm, getVotedForNodeId, onOneSecondTimer) plus sync().

    Called only from pysyncobj's tick thread (and from its constructor before that thread
    starts), so it takes no locks."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.meta_path = path + ".meta"
        self.commit_path = path + ".commit"
        self.fsync_count = 0            # for tests and the benchmark: how well syncs group
        # The entries' fdatasyncs (`sync`): how many, and the seconds they took (read from
        # other threads by /metrics: a count and a float, each written whole).
        self.entry_syncs = 0
        self.entry_sync_seconds = 0.0
        self.lazy_restores = 0          # entries re-added identically after a truncation
        self._entries: list[Entry] = []
        # What the file holds: _file_entries[i] starts at byte _file_offsets[i].
        # Invariant: _file_entries[:len(_entries)] == _entries; file records past that are
        # "ghosts", deleted in memory and not yet cut from the file.
        self._file_entries: list[Entry] = []
        self._file_offsets: list[int] = []
        self._end = len(MAGIC)          # Invariant: the file's size as we wrote it
        self._dirty = False             # written since the last fdatasync
        self._meta: dict[str, Any] = self._load_meta()
        self._commit_fd = os.open(self.commit_path, os.O_RDWR | os.O_CREAT, 0o600)
        stored = self._load_commit_index()
        if stored is not None:
            self._meta["commit_index"] = max(self._meta.get("commit_index", 1), stored)
        self._meta_commit_saved = self._meta.get("commit_index", 1)
        self._fd = self._open_and_recover()

    # -- open and recover --

    def _open_and_recover(self) -> int:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        data = b""
        size = os.fstat(fd).st_size
        if size:
            data = os.pread(fd, size, 0)
        if not data.startswith(MAGIC):
            if size:
                logger.error("journal %s has no valid header: starting empty", self.path)
            os.ftruncate(fd, 0)
            os.pwrite(fd, MAGIC, 0)
            os.fsync(fd)
            fsync_dir(os.path.dirname(os.path.abspath(self.path)))
            return fd
        pos = len(MAGIC)
        view = memoryview(data)
        while pos + _HEAD.size <= len(data):
            length, crc = _HEAD.unpack_from(view, pos)
            body = view[pos + _HEAD.size: pos + _HEAD.size + length]
            if length < _ENTRY.size or len(body) != length or crc32c.crc32c(body) != crc:
                break
            index, term = _ENTRY.unpack_from(body, 0)
            entry = (bytes(body[_ENTRY.size:]), index, term)
            self._file_offsets.append(pos)
            self._file_entries.append(entry)
            self._entries.append(entry)
            pos += _HEAD.size + length
        if pos != len(data):
            logger.warning("journal %s: cutting %d bytes of torn or corrupt tail at %d",
                           self.path, len(data) - pos, pos)
            os.ftruncate(fd, pos)
            os.fsync(fd)
        self._end = pos
        return fd

    def _load_meta(self) -> dict[str, Any]:
        try:
            with open(self.meta_path, "rb") as f:
                meta = json.loads(f.read())
        except FileNotFoundError:
            return {}
        except ValueError:
            # write_file_durably never leaves a half file; this is damage, not a crash.
            logger.error("journal meta %s is unreadable: term and vote are lost", self.meta_path)
            return {}
        assert isinstance(meta, dict)
        return meta

    def _load_commit_index(self) -> int | None:
        return decode_commit_index(os.pread(self._commit_fd, _COMMIT.size, 0))

    # -- writes --

    def _cut_ghosts(self) -> None:
        n = len(self._entries)
        if n < len(self._file_entries):
            self._end = self._file_offsets[n]
            os.ftruncate(self._fd, self._end)
            del self._file_entries[n:]
            del self._file_offsets[n:]
            self._dirty = True

    def _write(self, entry: Entry) -> None:
        data = _encode_entry(entry)
        written = os.pwrite(self._fd, data, self._end)
        assert written == len(data), "short write to the journal"
        self._file_offsets.append(self._end)
        self._file_entries.append(entry)
        self._end += len(data)
        self._dirty = True

    def add(self, command: bytes, idx: int, term: int) -> None:
        entry = (bytes(command), idx, term)
        assert not self._entries or idx == self._entries[-1][1] + 1, "journal indexes must follow"
        position = len(self._entries)
        self._entries.append(entry)
        if position < len(self._file_entries):
            ghost = self._file_entries[position]
            if ghost == entry:
                self.lazy_restores += 1     # the benign resend: the file has it already
                return
            if ghost[1] <= self.getRaftCommitIndex():
                logger.critical("raft journal: committed entry %d (term %d) replaced by term %d",
                                ghost[1], ghost[2], term)
            del self._entries[position]
            self._cut_ghosts()
            self._entries.append(entry)
        self._write(entry)

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        del self._entries[entryFrom:]

    def deleteEntriesTo(self, entryTo: int) -> None:
        # Log compaction: pysyncobj just stored a dump covering these entries. Make the
        # dump's rename durable before the entries it replaces disappear.
        fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        self._entries = self._entries[entryTo:]
        self._rewrite()

    def clear(self) -> None:
        self._entries = []
        self._rewrite()

    def _rewrite(self) -> None:
        data = bytearray(MAGIC)
        offsets = []
        for entry in self._entries:
            offsets.append(len(data))
            data += _encode_entry(entry)
        tmp = self.path + ".rewrite"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR)
        self._file_entries = list(self._entries)
        self._file_offsets = offsets
        self._end = len(data)
        self._dirty = False
        self.fsync_count += 1

    def sync(self) -> None:
        """Make every entry added so far durable, and every deletion final."""
        self._cut_ghosts()
        if self._dirty:
            started = time.perf_counter()
            os.fdatasync(self._fd)
            self.entry_sync_seconds += time.perf_counter() - started
            self.entry_syncs += 1
            self._dirty = False
            self.fsync_count += 1

    # -- reads --

    def __getitem__(self, item: int | slice) -> Any:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    # -- term, vote, commit index --

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        self._meta["current_term"] = term
        self._meta["voted_for"] = votedForNodeId
        self._store_meta()

    def getCurrentTerm(self) -> int:
        return int(self._meta.get("current_term", 0))

    def getVotedForNodeId(self) -> Any:
        return self._meta.get("voted_for")

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        # Called on every append_entries; kept in memory and stored once a second. A stale
        # commit index after a crash only means applying fewer entries before the leader
        # repeats it: it is a lower bound, never unsafe.
        self._meta["commit_index"] = raftCommitIndex

    def getRaftCommitIndex(self) -> int:
        return int(self._meta.get("commit_index", 1))

    def onOneSecondTimer(self) -> None:
        if self._meta.get("commit_index", 1) != self._meta_commit_saved:
            self.sync()     # the stored commit index must not run ahead of the entries
            commit = self._meta.get("commit_index", 1)
            value = commit.to_bytes(8, "big")
            os.pwrite(self._commit_fd, _COMMIT.pack(commit, crc32c.crc32c(value)), 0)
            self._meta_commit_saved = commit

    def _store_meta(self) -> None:
        write_file_durably(self.meta_path, json.dumps(self._meta).encode())
        self._meta_commit_saved = self._meta.get("commit_index", 1)
        self.fsync_count += 1

    def _destroy(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
        if self._commit_fd >= 0:
            os.close(self._commit_fd)
            self._commit_fd = -1

    def flush(self) -> None:
        self.sync()
