"""The RemoteStorageManager on a directory: an HDFS or NFS mount, or a local path.

Objects are files named by ``RemoteSegmentId.key`` under the root. Each file is written to
a temporary name in the same directory, flushed and then renamed, so a broker killed
mid-upload leaves a stray ``*.tmp`` at worst, never a half object under the final name
(a rename within one directory is atomic on POSIX file systems, NFS included). Blocking
file I/O runs in a worker thread so the event loop keeps serving requests.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, BinaryIO, Callable, TypeVar

from clients.tiered.remote_storage import (LOG_SUFFIX, IndexType, LogSegmentData, RemoteResourceNotFound,
                                          RemoteSegmentId, RemoteStorageError)

__all__ = ["FileSystemRemoteStorage"]

_Writer = Callable[[BinaryIO], Any]
_T = TypeVar("_T")
# Copy in chunks of this size: the records file of a closed segment is copied only up to the
# size it had when it was closed.
_COPY_CHUNK_BYTES = 1 << 20


class FileSystemRemoteStorage:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, segment: RemoteSegmentId, suffix: str) -> Path:
        return self.root / segment.key(suffix)

    # ---------------------------------------------------------------- blocking parts

    def _write_atomically(self, target: Path, write: _Writer) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as out:
                write(out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)

    def _copy(self, segment: RemoteSegmentId, data: LogSegmentData) -> None:
        files: list[tuple[str, Path | None]] = [
            (LOG_SUFFIX, data.segment),
            (IndexType.OFFSET.value, data.offset_index),
            (IndexType.TIMESTAMP.value, data.time_index),
            (IndexType.TRANSACTION.value, data.transaction_index),
            (IndexType.PRODUCER_SNAPSHOT.value, data.producer_snapshot)]
        for suffix, source in files:
            if source is None:
                continue
            self._write_atomically(self._path(segment, suffix), _file_writer(source))
        epochs = data.leader_epoch_index
        self._write_atomically(self._path(segment, IndexType.LEADER_EPOCH.value),
                               lambda out: out.write(epochs))

    def _read(self, path: Path, start: int, end: int | None) -> bytes:
        try:
            with open(path, "rb") as f:
                f.seek(start)
                return f.read() if end is None else f.read(end - start + 1)
        except FileNotFoundError:
            raise RemoteResourceNotFound(str(path)) from None

    def _delete(self, segment: RemoteSegmentId) -> None:
        suffixes = [LOG_SUFFIX, *(t.value for t in IndexType)]
        for suffix in suffixes:
            self._path(segment, suffix).unlink(missing_ok=True)

    # ---------------------------------------------------------------- the port

    async def copy_log_segment_data(self, segment: RemoteSegmentId, data: LogSegmentData) -> None:
        await self._run(self._copy, segment, data)

    async def fetch_log_segment(self, segment: RemoteSegmentId, start_position: int,
                                end_position: int | None = None) -> bytes:
        assert start_position >= 0
        assert end_position is None or end_position >= start_position
        return await self._run(self._read, self._path(segment, LOG_SUFFIX),
                               start_position, end_position)

    async def fetch_index(self, segment: RemoteSegmentId, index_type: IndexType) -> bytes:
        return await self._run(self._read, self._path(segment, index_type.value), 0, None)

    async def delete_log_segment_data(self, segment: RemoteSegmentId) -> None:
        await self._run(self._delete, segment)

    async def close(self) -> None:
        pass

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Blocking I/O in a worker thread; an OS error (the mount gone, a timeout, a full
        disk) is the retriable RemoteStorageError the callers back off on."""
        try:
            return await asyncio.to_thread(fn, *args)
        except RemoteStorageError:
            raise
        except OSError as e:
            raise RemoteStorageError(f"{self.root}: {e}") from e


def _file_writer(source: Path) -> _Writer:
    def write(out: BinaryIO) -> None:
        with open(source, "rb") as f:
            shutil.copyfileobj(f, out, _COPY_CHUNK_BYTES)
    return write
