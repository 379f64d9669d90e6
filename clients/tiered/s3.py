"""The RemoteStorageManager on S3-compatible object storage (AWS S3, MinIO, Ceph RGW, moto).

Each file of a closed segment is one object named ``<prefix>/`` + ``RemoteSegmentId.key``
in one bucket. The client is boto3, blocking, so every call runs in this store's own pool of
worker threads, sized like the client's connection pool: one shared client, at most
``max_connections`` requests in flight, the event loop never blocked.

- Upload: the indexes with one PUT each; the records file with one PUT up to
  ``multipart_threshold`` bytes, above it a multipart upload of ``part_size`` parts sent
  in parallel, aborted if any part fails (a broker killed mid-upload leaves an incomplete
  multipart upload, which S3 never shows as an object; a bucket lifecycle rule
  "AbortIncompleteMultipartUpload" reclaims its parts). A PUT replaces the whole object
  at once, so a retried copy overwrites and a reader never sees half an object.
- Fetch: a ranged GET of the records file; a whole GET of an index.
- Delete: one DELETE per file, in parallel (not the multi-object DeleteObjects, which some
  S3-compatible stores lack); S3 answers a DELETE of an absent key with success.

Errors: a 404 for an object (NoSuchKey) is ``RemoteResourceNotFound``; anything else (the
endpoint unreachable, a timeout, a 5xx after botocore's retries, a missing bucket, refused
credentials) is the retriable ``RemoteStorageError``: the metadata still names the
segment, so the store, not the segment, is what is wrong, and the operator can fix it while
the broker keeps its local segments and retries. Credentials are never logged or shown in
an error or a repr.

Configuration (broker properties; only the bucket is required):
``ketch.remote.storage.s3.endpoint`` (unset: AWS's own endpoint for the region),
``.bucket``, ``.region`` (us-east-1), ``.access.key`` and ``.secret.key`` (unset: boto3's
credential chain: environment, ~/.aws, instance role), ``.prefix``.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

try:
    import boto3
    from botocore.config import Config as BotoConfig
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError:         # an optional dependency: pip install 'ketch[s3]'
    boto3 = None

from clients.tiered.remote_storage import (
    LOG_SUFFIX, IndexType, LogSegmentData, RemoteResourceNotFound, RemoteSegmentId,
    RemoteStorageConfigError, RemoteStorageError,
)

__all__ = ["S3Config", "S3RemoteStorage", "plan_parts"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

MiB = 1 << 20
# S3's limits: every part but the last at least 5 MiB, at most 10,000 parts.
MIN_PART_SIZE = 5 * MiB
MAX_PARTS = 10_000
DEFAULT_PART_SIZE = 8 * MiB
DEFAULT_MULTIPART_THRESHOLD = 8 * MiB
DEFAULT_MAX_CONNECTIONS = 8

# Error codes an S3 store answers with a 404 that are not "this object is absent": the
# bucket or the multipart upload is gone, which is the store's fault, not the segment's.
_STORE_NOT_FOUND_CODES = frozenset({"NoSuchBucket", "NoSuchUpload"})

_PREFIX = "ketch.remote.storage.s3."


class _RedactCredentials(logging.Filter):
    """botocore logs each request with its headers at DEBUG; the Authorization header names
    the access key (``Credential=<key>/<date>/...``). The secret itself is never sent."""
    _CREDENTIAL = re.compile(r"Credential=[^/,\s'\"]+")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "Credential=" in message:
            record.msg, record.args = self._CREDENTIAL.sub("Credential=<redacted>", message), None
        return True


# On the one botocore logger that prints request headers; installed once, on import.
_REDACT = _RedactCredentials()
logging.getLogger("botocore.endpoint").addFilter(_REDACT)


@dataclass(frozen=True)
class S3Config:
    """The ``ketch.remote.storage.s3.*`` broker properties."""
    bucket: str
    endpoint: str | None = None
    region: str = "us-east-1"
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    prefix: str = ""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> S3Config:
        def get(name: str) -> str | None:
            value = (props.get(_PREFIX + name) or "").strip()
            return value or None

        bucket = get("bucket")
        if bucket is None:
            raise RemoteStorageConfigError(f"{_PREFIX}bucket is required when "
                                           "remote.log.storage.manager.class.name=s3")
        endpoint = get("endpoint")
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise RemoteStorageConfigError(
                f"{_PREFIX}endpoint={endpoint!r}: an http:// or https:// URL")
        access_key, secret_key = get("access.key"), get("secret.key")
        if (access_key is None) != (secret_key is None):
            # Never the value itself in the message: it may be the secret.
            raise RemoteStorageConfigError(
                f"{_PREFIX}access.key and {_PREFIX}secret.key go together "
                "(set both, or neither for boto3's credential chain)")
        return cls(bucket=bucket, endpoint=endpoint, region=get("region") or "us-east-1",
                   access_key=access_key, secret_key=secret_key,
                   prefix=(get("prefix") or "").strip("/"))

    def object_key(self, segment: RemoteSegmentId, suffix: str) -> str:
        key = segment.key(suffix)
        return f"{self.prefix}/{key}" if self.prefix else key


class S3RemoteStorage:
    """A RemoteStorageManager on one bucket of an S3-compatible store."""

    def __init__(self, config: S3Config, *, part_size: int = DEFAULT_PART_SIZE,
                 multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 30.0,
                 max_attempts: int = 3) -> None:
        assert part_size >= MIN_PART_SIZE, part_size
        assert multipart_threshold >= part_size, (multipart_threshold, part_size)
        self.config = config
        self.part_size = part_size
        self.multipart_threshold = multipart_threshold
        self.max_connections = max_connections
        boto_config = BotoConfig(
            region_name=config.region,
            max_pool_connections=max_connections,
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            # botocore's "standard" retries: connection errors, 5xx and throttling (503
            # SlowDown), with jittered backoff; the broker's own retry loop comes on top.
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            # Path-style URLs (http://host:port/bucket/key): a bucket name is not a DNS name
            # on a self-hosted endpoint such as 127.0.0.1.
            s3={"addressing_style": "path"} if config.endpoint else {},
            # Checksums only where an operation requires one: the CRC headers newer botocore
            # adds to every PUT are refused by several S3-compatible stores.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        # One client, shared by the worker threads (botocore clients are thread-safe; a
        # Session is not, so it is used here only).
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=config.endpoint, aws_access_key_id=config.access_key,
            aws_secret_access_key=config.secret_key, config=boto_config)
        self.executor = ThreadPoolExecutor(max_workers=max_connections,
                                           thread_name_prefix="ketch-s3")
        log.info("remote storage: s3 bucket %s at %s (region %s, prefix %r)", config.bucket,
                 config.endpoint or "AWS", config.region, config.prefix)

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> S3RemoteStorage:
        """From the broker's properties (``ketch.remote.storage.s3.*``)."""
        s3_config = S3Config.from_properties(config)
        if boto3 is None:
            raise RemoteStorageConfigError("remote.log.storage.manager.class.name=s3 needs boto3, "
                                           "which is not installed (pip install 'ketch[s3]')")
        return cls(s3_config)

    def __repr__(self) -> str:
        return f"S3RemoteStorage({self.config!r})"

    # ---------------------------------------------------------------- the port

    async def copy_log_segment_data(self, segment: RemoteSegmentId, data: LogSegmentData) -> None:
        uploads = [self._upload_records(self._key(segment, LOG_SUFFIX), data.segment),
                   self._put_bytes(self._key(segment, IndexType.LEADER_EPOCH.value),
                                   data.leader_epoch_index)]
        for index_type, source in ((IndexType.OFFSET, data.offset_index),
                                   (IndexType.TIMESTAMP, data.time_index),
                                   (IndexType.TRANSACTION, data.transaction_index),
                                   (IndexType.PRODUCER_SNAPSHOT, data.producer_snapshot)):
            if source is not None:
                uploads.append(self._put_file(self._key(segment, index_type.value), source))
        await _all_settled(uploads)

    async def fetch_log_segment(self, segment: RemoteSegmentId, start_position: int,
                                end_position: int | None = None) -> bytes:
        assert start_position >= 0
        assert end_position is None or end_position >= start_position
        key = self._key(segment, LOG_SUFFIX)
        return await self._call("GET", key, self._get, key,
                                f"bytes={start_position}-{'' if end_position is None else end_position}")

    async def fetch_index(self, segment: RemoteSegmentId, index_type: IndexType) -> bytes:
        key = self._key(segment, index_type.value)
        return await self._call("GET", key, self._get, key, None)

    async def delete_log_segment_data(self, segment: RemoteSegmentId) -> None:
        keys = [self._key(segment, suffix) for suffix in (LOG_SUFFIX, *(t.value for t in IndexType))]
        await _all_settled([self._call("DELETE", key, functools.partial(
            self.client.delete_object, Bucket=self.config.bucket, Key=key)) for key in keys])

    async def close(self) -> None:
        # Queued calls are dropped and calls in flight are not waited for: a hung store would
        # hold the broker's shutdown for read timeout x attempts, and their results have no
        # one to go to any more (a copy cut short is retried by the next leader).
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    # ---------------------------------------------------------------- uploads

    async def _upload_records(self, key: str, source: Path) -> None:
        size = await self._call("stat", key, os.path.getsize, source)
        if size <= self.multipart_threshold:
            await self._put_file(key, source)
            return
        bucket = self.config.bucket
        created = await self._call("CreateMultipartUpload", key, functools.partial(
            self.client.create_multipart_upload, Bucket=bucket, Key=key))
        upload_id = created["UploadId"]
        parts = iter(plan_parts(size, self.part_size))
        etags: dict[int, str] = {}
        try:
            # As many lanes as connections, each taking the next part: at most
            # max_connections parts in memory, and after a failure no lane starts another.
            await _all_settled([self._upload_parts(key, upload_id, source, parts, etags)
                                for _ in range(self.max_connections)])
            await self._call("CompleteMultipartUpload", key, functools.partial(
                self.client.complete_multipart_upload, Bucket=bucket, Key=key,
                UploadId=upload_id, MultipartUpload={"Parts": [
                    {"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]}))
        except BaseException:
            await self._abort(key, upload_id)
            raise

    async def _upload_parts(self, key: str, upload_id: str, source: Path,
                            parts: Iterator[tuple[int, int, int]], etags: dict[int, str]) -> None:
        try:
            for number, position, length in parts:
                etags[number] = await self._call(f"UploadPart {number}", key, self._put_part,
                                                 key, upload_id, number, source, position, length)
        except BaseException:
            for _ in parts:     # the other lanes find nothing left to start
                pass
            raise

    async def _abort(self, key: str, upload_id: str) -> None:
        try:
            await asyncio.shield(self._call("AbortMultipartUpload", key, functools.partial(
                self.client.abort_multipart_upload, Bucket=self.config.bucket, Key=key,
                UploadId=upload_id)))
        except (RemoteStorageError, asyncio.CancelledError) as e:
            # The parts stay until a lifecycle rule reclaims them; the copy is retried anew.
            log.warning("remote storage: could not abort the multipart upload of %s: %s", key, e)

    async def _put_file(self, key: str, source: Path) -> None:
        await self._call("PUT", key, self._put_file_blocking, key, source)

    async def _put_bytes(self, key: str, data: bytes) -> None:
        await self._call("PUT", key, functools.partial(
            self.client.put_object, Bucket=self.config.bucket, Key=key, Body=data))

    # ---------------------------------------------------------------- blocking parts

    def _put_file_blocking(self, key: str, source: Path) -> None:
        with open(source, "rb") as f:
            # A seekable body: botocore streams it and rewinds it for a retry.
            self.client.put_object(Bucket=self.config.bucket, Key=key, Body=f)

    def _put_part(self, key: str, upload_id: str, number: int, source: Path, position: int,
                  length: int) -> str:
        with open(source, "rb") as f:
            f.seek(position)
            body = f.read(length)
        if len(body) != length:
            raise OSError(f"{source}: {len(body)} bytes at {position}, expected {length} "
                          "(the segment changed during its upload)")
        answer = self.client.upload_part(Bucket=self.config.bucket, Key=key, UploadId=upload_id,
                                         PartNumber=number, Body=body)
        return str(answer["ETag"])

    def _get(self, key: str, byte_range: str | None) -> bytes:
        args: dict[str, Any] = {"Bucket": self.config.bucket, "Key": key}
        if byte_range is not None and byte_range != "bytes=0-":
            args["Range"] = byte_range
        try:
            answer = self.client.get_object(**args)
        except ClientError as e:
            if _status(e) == 416:       # the range starts past the end, as a file read there
                return b""
            raise
        with answer["Body"] as body:
            return bytes(body.read())

    # ---------------------------------------------------------------- the worker threads

    def _key(self, segment: RemoteSegmentId, suffix: str) -> str:
        return self.config.object_key(segment, suffix)

    async def _call(self, what: str, key: str, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in a worker thread, its failure as the port's errors."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.executor, functools.partial(fn, *args))
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            where = f"s3 {what} {self.config.bucket}/{key}"
            if (_status(e) == 404 or code == "NoSuchKey") and code not in _STORE_NOT_FOUND_CODES:
                raise RemoteResourceNotFound(f"{where}: {code or 'not found'}") from None
            raise RemoteStorageError(f"{where}: HTTP {_status(e)}: {e}") from e
        except (BotoCoreError, OSError) as e:
            # BotoCoreError: unreachable, timed out, connection closed, no credentials.
            raise RemoteStorageError(f"s3 {what} {self.config.bucket}/{key}: {e}") from e


def plan_parts(size: int, part_size: int) -> list[tuple[int, int, int]]:
    """The parts of a multipart upload of ``size`` bytes: (part number from 1, position,
    length), ``part_size`` each but the last, larger when S3's 10,000 parts would not do."""
    part_size = max(part_size, -(-size // MAX_PARTS))
    return [(n + 1, position, min(part_size, size - position))
            for n, position in enumerate(range(0, size, part_size))]


def _status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


async def _all_settled(calls: list[Any]) -> None:
    """Await every call, then raise the first failure: nothing is left running behind a
    failed copy (a later abort or retry would race it)."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
