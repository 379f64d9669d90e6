"""The four codecs as Kafka uses them: round trips, the formats other writers produce
(xerial and raw snappy, lz4 frames, zstd frames without content size), limits against
decompression bombs, and garbage that may only raise a RecordError subclass."""
from __future__ import annotations

import struct
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from aiokafka import codec as aiokafka_codec
from hypothesis import given
from hypothesis import strategies as st

from clients.protocol.errors import ErrorCode
from clients.records import (
    CompressionType,
    CorruptRecordError,
    RecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
    compress,
    compression_type_for,
    decompress,
)
from clients.records.compression import XERIAL_BLOCK_BYTES, XERIAL_MAGIC

LIMIT = 64 << 20
TEXT = b"".join(b"record %06d: the quick brown fox jumps over the lazy dog\n" % i for i in range(3000))


@given(data=st.binary(max_size=5000), codec=st.sampled_from(list(CompressionType)),
       level=st.sampled_from([None, 1]))
def test_round_trip(data, codec, level):
    blob = compress(codec, data, level=None if codec == CompressionType.SNAPPY else level)
    assert decompress(codec, blob, decompressed_bytes_max=len(data)) == data


def test_large_input_round_trips_and_shrinks():
    for codec in CompressionType:
        blob = compress(codec, TEXT)
        assert decompress(codec, blob, decompressed_bytes_max=LIMIT) == TEXT
        if codec != CompressionType.NONE:
            assert len(blob) < len(TEXT) // 2, codec


def test_snappy_is_written_xerial_framed_like_the_java_producer():
    blob = compress(CompressionType.SNAPPY, TEXT)
    assert blob[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(blob):
        (n,) = struct.unpack_from(">i", blob, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(blob[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert pos == len(blob)
    assert all(len(b) == XERIAL_BLOCK_BYTES for b in blocks[:-1])
    assert b"".join(blocks) == TEXT
    # and a reader that is not ours agrees
    assert aiokafka_codec.snappy_decode(blob) == TEXT


def test_snappy_reads_raw_blocks_and_other_xerial_writers():
    raw = bytes(cramjam.snappy.compress_raw(TEXT))
    assert decompress(CompressionType.SNAPPY, raw, decompressed_bytes_max=LIMIT) == TEXT
    for block_bytes in (1000, 32 * 1024, 100_000):
        framed = aiokafka_codec.snappy_encode(TEXT, xerial_compatible=True, xerial_blocksize=block_bytes)
        assert decompress(CompressionType.SNAPPY, framed, decompressed_bytes_max=LIMIT) == TEXT
    # version fields written little-endian (seen from some writers) are tolerated
    framed = bytearray(aiokafka_codec.snappy_encode(TEXT))
    framed[8:16] = struct.pack("<ii", 1, 1)
    assert decompress(CompressionType.SNAPPY, bytes(framed), decompressed_bytes_max=LIMIT) == TEXT


def test_lz4_reads_frames_from_any_writer():
    for kwargs in ({}, {"store_size": True, "content_checksum": True},
                   {"block_linked": True, "block_size": lz4.frame.BLOCKSIZE_MAX4MB}):
        blob = lz4.frame.compress(TEXT, **kwargs)
        assert decompress(CompressionType.LZ4, blob, decompressed_bytes_max=LIMIT) == TEXT
    assert decompress(CompressionType.LZ4, aiokafka_codec.lz4_encode(TEXT), decompressed_bytes_max=LIMIT) == TEXT


def test_zstd_reads_frames_without_content_size_as_librdkafka_writes_them():
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(TEXT)
    assert zstandard.get_frame_parameters(no_size).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, no_size, decompressed_bytes_max=LIMIT) == TEXT
    # streamed, as zstd-jni and librdkafka do: no content size, several blocks
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = b"".join(cobj.compress(TEXT[i : i + 4096]) for i in range(0, len(TEXT), 4096)) + cobj.flush()
    assert decompress(CompressionType.ZSTD, streamed, decompressed_bytes_max=LIMIT) == TEXT
    # larger than the first buffer guess
    big = TEXT * 20
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(big)
    assert decompress(CompressionType.ZSTD, no_size, decompressed_bytes_max=LIMIT) == big


def test_gzip_reads_concatenated_members():
    blob = compress(CompressionType.GZIP, b"abc") + compress(CompressionType.GZIP, b"def")
    assert decompress(CompressionType.GZIP, blob, decompressed_bytes_max=6) == b"abcdef"
    with pytest.raises(RecordTooLargeError):
        decompress(CompressionType.GZIP, blob, decompressed_bytes_max=5)


def test_every_codec_stops_exactly_at_the_limit():
    for codec in CompressionType:
        blob = compress(codec, TEXT)
        assert decompress(codec, blob, decompressed_bytes_max=len(TEXT)) == TEXT
        with pytest.raises(RecordTooLargeError) as e:
            decompress(codec, blob, decompressed_bytes_max=len(TEXT) - 1)
        assert e.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


def _bombs() -> dict[str, tuple[CompressionType, bytes]]:
    """Small blobs that inflate to 256 MiB of zeros, built without holding 256 MiB."""
    chunk = bytes(16 << 20)
    gzip_member = compress(CompressionType.GZIP, chunk, level=9)
    lz4_frame = compress(CompressionType.LZ4, chunk)
    snappy_block = bytes(cramjam.snappy.compress_raw(bytes(XERIAL_BLOCK_BYTES)))
    xerial = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + (
        struct.pack(">i", len(snappy_block)) + snappy_block) * ((256 << 20) // XERIAL_BLOCK_BYTES)
    cobj = zstandard.ZstdCompressor(level=1).compressobj()
    zstd_streamed = b"".join(cobj.compress(chunk) for _ in range(16)) + cobj.flush()
    return {
        "gzip-members": (CompressionType.GZIP, gzip_member * 16),
        "lz4-frames": (CompressionType.LZ4, lz4_frame * 16),
        "snappy-xerial": (CompressionType.SNAPPY, xerial),
        "snappy-raw-header": (CompressionType.SNAPPY, b"\x80\x80\x80\x80\x01" + b"\x00" * 10),
        "zstd-no-content-size": (CompressionType.ZSTD, zstd_streamed),
        "zstd-content-size": (CompressionType.ZSTD, zstandard.ZstdCompressor(level=1).compress(chunk)),
    }


def test_decompression_bombs_raise_before_inflating():
    limit = 1 << 20
    for name, (codec, blob) in _bombs().items():
        assert len(blob) < 40 << 20, name
        tracemalloc.start()
        try:
            with pytest.raises(RecordTooLargeError):
                decompress(codec, blob, decompressed_bytes_max=limit)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # Python-visible allocations stay within a few times the limit, far from 256 MiB
        # (the zstd path may try a buffer of the limit twice).
        assert peak < 4 * limit + 2 * len(blob), (name, peak)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids_are_unsupported(codec_id):
    with pytest.raises(UnsupportedCompressionTypeError) as e:
        decompress(codec_id, b"whatever", decompressed_bytes_max=LIMIT)
    assert e.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE == 76
    with pytest.raises(UnsupportedCompressionTypeError):
        compression_type_for(codec_id)


def test_truncated_streams_are_corrupt():
    for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD):
        blob = compress(codec, TEXT)
        for cut in (0, 1, 8, 17, len(blob) // 2, len(blob) - 1):
            with pytest.raises(CorruptRecordError):
                decompress(codec, blob[:cut], decompressed_bytes_max=LIMIT)


def test_trailing_garbage_is_corrupt():
    for codec in (CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD):
        with pytest.raises(CorruptRecordError):
            decompress(codec, compress(codec, TEXT) + b"junk", decompressed_bytes_max=LIMIT)


@given(garbage=st.binary(max_size=200), codec=st.sampled_from(list(CompressionType)),
       prefix=st.sampled_from([b"", XERIAL_MAGIC, XERIAL_MAGIC + struct.pack(">ii", 1, 1),
                               b"\x1f\x8b\x08\x00", b"\x04\x22\x4d\x18", b"\x28\xb5\x2f\xfd"]))
def test_garbage_raises_only_record_errors(garbage, codec, prefix):
    try:
        decompress(codec, prefix + garbage, decompressed_bytes_max=1 << 16)
    except RecordError:
        pass


def test_gzip_output_is_plain_gzip():
    blob = compress(CompressionType.GZIP, TEXT)
    assert blob[:2] == b"\x1f\x8b"
    assert zlib.decompress(blob, 16 + zlib.MAX_WBITS) == TEXT
