"""Snapshots: an image as the list of records that rebuilds it, and as a file.

Theory of operation
-------------------
``image_to_records(image)`` writes the fewest records that rebuild ``image`` from
nothing, in Kafka's snapshot order: features, brokers, topics (each TopicRecord followed
by its PartitionRecords), configs, producer ids. ``records_to_image(records, provenance)``
replays them on the empty image. The pair round-trips exactly:
``records_to_image(image_to_records(i), i.provenance) == i`` for every image replay can
build; that is what lets controllers and brokers start from a snapshot instead of the
whole log, and lets the log before the newest snapshot be dropped.

A snapshot file holds those records, framed as in the log (records.py), behind a header
that names the offset and epoch of the last record the image contains:

    magic          8 bytes   b"KETCHSNP"
    format         int16     1
    offset         int64     provenance.offset
    epoch          int32     provenance.epoch
    record_count   int32
    body_length    int64
    body_crc       uint32    CRC-32C of the body
    header_crc     uint32    CRC-32C of every header byte before it
    body           v2 record batches (clients.records), RECORDS_PER_BATCH records each:
                   offsets 0..record_count-1, null keys, values = framed records

The body is what the metadata log itself holds (records in v2 batches, KRaft-framed
values), so a reader needs no second format; each batch has its own CRC-32C on top of
the body's. Timestamps are 0 so that the same image always gives the same bytes.

Files are named ``<offset>-<epoch>.checkpoint`` (zero-padded, like Kafka's snapshot ids)
and written atomically: a temporary file in the same directory, fsync, rename, fsync of
the directory. A reader therefore sees a whole snapshot or none; a torn or altered one
fails its CRCs and raises ``CorruptSnapshotError``.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, Iterable

import crc32c

from clients.protocol import CorruptFrameError, messages
from clients.records import RecordBatchBuilder, RecordError, decode_batches
from metadata_log.acls import acl_record
from metadata_log.delta import MetadataDelta, MetadataReplayError
from metadata_log.image import EMPTY_IMAGE, MetadataImage, Provenance
from metadata_log.records import decode_record, encode_record

__all__ = [
    "CorruptSnapshotError", "SNAPSHOT_SUFFIX", "decode_snapshot", "encode_snapshot",
    "image_to_records", "latest_snapshot", "list_snapshots", "read_snapshot",
    "records_to_image", "snapshot_name", "write_snapshot",
]

MAGIC = b"KETCHSNP"
FORMAT_VERSION = 1
_HEADER = struct.Struct(">8shqiiqI")        # everything before header_crc
_HEADER_CRC = struct.Struct(">I")
HEADER_SIZE = _HEADER.size + _HEADER_CRC.size
SNAPSHOT_SUFFIX = ".checkpoint"
# A snapshot body larger than this is refused before it is read (a limit on everything).
SNAPSHOT_BYTES_MAX = 1 << 31
RECORDS_PER_BATCH = 2000


class CorruptSnapshotError(ValueError):
    """The bytes are not a whole, intact Ketch snapshot."""


# ---------------------------------------------------------------- image <-> records

def image_to_records(image: MetadataImage) -> list[Any]:
    records: list[Any] = []
    levels = image.features.levels
    # metadata.version first: Kafka readers need it before anything else.
    for name in sorted(levels, key=lambda n: (n != "metadata.version", n)):
        records.append(messages.FeatureLevelRecord(name=name, feature_level=levels[name]))
    for broker_id in sorted(image.cluster.brokers):
        b = image.cluster.brokers[broker_id]
        records.append(messages.RegisterBrokerRecord(
            broker_id=b.broker_id, is_migrating_zk_broker=b.is_migrating_zk_broker,
            incarnation_id=b.incarnation_id, broker_epoch=b.broker_epoch,
            end_points=[messages.RegisterBrokerRecord.BrokerEndpoint(
                name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                for e in b.endpoints],
            features=[messages.RegisterBrokerRecord.BrokerFeature(
                name=f.name, min_supported_version=f.min_supported_version,
                max_supported_version=f.max_supported_version) for f in b.features],
            rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=list(b.log_dirs)))
    for name in sorted(image.topics.by_name):
        t = image.topics.by_name[name]
        records.append(messages.TopicRecord(name=t.name, topic_id=t.topic_id))
        for index in sorted(t.partitions):
            p = t.partitions[index]
            records.append(messages.PartitionRecord(
                partition_id=index, topic_id=t.topic_id, replicas=list(p.replicas),
                isr=list(p.isr), removing_replicas=list(p.removing_replicas),
                adding_replicas=list(p.adding_replicas), leader=p.leader,
                leader_recovery_state=int(p.leader_recovery_state),
                leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                directories=list(p.directories),
                eligible_leader_replicas=_opt_list(p.eligible_leader_replicas),
                last_known_elr=_opt_list(p.last_known_elr)))
    resources = image.configs.resources
    for resource in sorted(resources, key=lambda r: (int(r.type), r.name)):
        m = resources[resource]
        for key in sorted(m):
            records.append(messages.ConfigRecord(resource_type=int(resource.type),
                                                 resource_name=resource.name, name=key,
                                                 value=m[key]))
    for entity in sorted(image.client_quotas.entities, key=repr):
        values = image.client_quotas.entities[entity]
        for key in sorted(values):
            records.append(messages.ClientQuotaRecord(
                entity=[messages.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n)
                        for t, n in entity], key=key, value=values[key], remove=False))
    for acl_id in sorted(image.acls.by_id):
        records.append(acl_record(image.acls.by_id[acl_id], acl_id))
    for (user, mechanism), c in sorted(image.scram.credentials.items()):
        records.append(messages.UserScramCredentialRecord(
            name=user, mechanism=mechanism, salt=c.salt, stored_key=c.stored_key,
            server_key=c.server_key, iterations=c.iterations))
    if image.producer_ids.next_producer_id != -1:
        # Kafka's ProducerIdsImage writes the block owner as -1: only the next id matters.
        records.append(messages.ProducerIdsRecord(
            broker_id=-1, broker_epoch=-1,
            next_producer_id=image.producer_ids.next_producer_id))
    return records


def records_to_image(records: Iterable[Any], provenance: Provenance) -> MetadataImage:
    """Replay ``records`` on the empty image; MetadataReplayError if they do not fit."""
    delta = MetadataDelta(EMPTY_IMAGE)
    for record in records:
        delta.replay(record)
    return delta.apply(provenance)


def _opt_list(v: tuple | None) -> list | None:
    return None if v is None else list(v)


# ---------------------------------------------------------------- bytes

def encode_snapshot(image: MetadataImage) -> bytes:
    body = bytearray()
    records = image_to_records(image)
    count = len(records)
    for start in range(0, count, RECORDS_PER_BATCH):
        builder = RecordBatchBuilder(base_offset=start)
        for i, record in enumerate(records[start:start + RECORDS_PER_BATCH]):
            builder.append(0, None, encode_record(record), offset_delta=i)
        body += builder.build()
    p = image.provenance
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, p.offset, p.epoch, count, len(body),
                          crc32c.crc32c(body))
    return header + _HEADER_CRC.pack(crc32c.crc32c(header)) + bytes(body)


def _read_header(data: bytes) -> tuple[Provenance, int, int, int]:
    if len(data) < HEADER_SIZE:
        raise CorruptSnapshotError(f"snapshot shorter than its {HEADER_SIZE}-byte header")
    fields = _HEADER.unpack_from(data, 0)
    (header_crc,) = _HEADER_CRC.unpack_from(data, _HEADER.size)
    if crc32c.crc32c(data[:_HEADER.size]) != header_crc:
        raise CorruptSnapshotError("snapshot header CRC mismatch")
    magic, fmt, offset, epoch, count, body_length, body_crc = fields
    if magic != MAGIC or fmt != FORMAT_VERSION:
        raise CorruptSnapshotError(f"not a Ketch snapshot (magic {magic!r}, format {fmt})")
    if count < 0 or not 0 <= body_length <= SNAPSHOT_BYTES_MAX:
        raise CorruptSnapshotError("snapshot header with impossible sizes")
    return Provenance(offset, epoch), count, body_length, body_crc


def decode_snapshot(data: bytes) -> MetadataImage:
    provenance, count, body_length, body_crc = _read_header(data)
    body = memoryview(data)[HEADER_SIZE:]
    if len(body) != body_length:
        raise CorruptSnapshotError(f"snapshot body is {len(body)} bytes, header says "
                                   f"{body_length}")
    if crc32c.crc32c(body) != body_crc:
        raise CorruptSnapshotError("snapshot body CRC mismatch")
    records: list[Any] = []
    try:
        for batch in decode_batches(body):
            for r in batch.records:
                if r.offset != len(records) or r.value is None:
                    raise CorruptSnapshotError(f"snapshot record at offset {r.offset} is "
                                               f"out of place or empty")
                records.append(decode_record(r.value))
        if len(records) != count:
            raise CorruptSnapshotError(f"snapshot holds {len(records)} records, header says "
                                       f"{count}")
        return records_to_image(records, provenance)
    except (CorruptFrameError, RecordError, MetadataReplayError) as e:
        # The CRC matched, so these bytes were written this way: a bug, but report it typed.
        raise CorruptSnapshotError(f"snapshot records do not decode: {e}") from e


# ---------------------------------------------------------------- files

def snapshot_name(provenance: Provenance) -> str:
    assert provenance.offset >= 0 and provenance.epoch >= -1, provenance
    return f"{provenance.offset:020d}-{max(provenance.epoch, 0):010d}{SNAPSHOT_SUFFIX}"


def write_snapshot(directory: str | os.PathLike, image: MetadataImage) -> Path:
    """Write ``image`` atomically into ``directory``; returns the snapshot's path."""
    directory = Path(directory)
    path = directory / snapshot_name(image.provenance)
    tmp = path.with_suffix(path.suffix + ".tmp")
    data = encode_snapshot(image)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)          # make the rename itself durable
    finally:
        os.close(fd)
    return path


def read_snapshot(path: str | os.PathLike) -> MetadataImage:
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
        _, _, body_length, _ = _read_header(head)
        rest = f.read(body_length + 1)   # one byte more reveals trailing garbage
    return decode_snapshot(head + rest)


def list_snapshots(directory: str | os.PathLike) -> list[Path]:
    """Complete snapshot files in ``directory``, oldest first (temporaries ignored)."""
    paths = []
    for p in Path(directory).iterdir():
        if p.name.endswith(SNAPSHOT_SUFFIX):
            stem = p.name[:-len(SNAPSHOT_SUFFIX)]
            offset, _, epoch = stem.partition("-")
            if offset.isdigit() and epoch.isdigit():
                paths.append((int(offset), int(epoch), p))
    return [p for _, _, p in sorted(paths)]


def latest_snapshot(directory: str | os.PathLike) -> Path | None:
    snapshots = list_snapshots(directory)
    return snapshots[-1] if snapshots else None
