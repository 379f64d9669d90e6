"""The four compression codecs of record batch v2: gzip, snappy, lz4, zstd.

Theory of operation
-------------------
A compressed batch stores its whole records region as one blob; bits 0-2 of the batch
attributes name the codec (kafka-protocol/README.md, "Record batch v2"). `compress` and
`decompress` turn one region into the other. Both are pure functions over bytes.

What each codec means *in Kafka* (not what the library calls the codec by default):

* gzip (1): an RFC 1952 gzip stream (Java's GZIPOutputStream). We accept several
  concatenated members on the way in, as Java's GZIPInputStream does.
* snappy (2): Kafka's Java client writes snappy-java's "xerial" framing: the 16-byte header
  ``b"\\x82SNAPPY\\x00"`` + int32 version 1 + int32 compatible version 1, then blocks of
  int32 compressed length + raw snappy, each block holding at most 32 KiB of input.
  librdkafka and some others write one bare raw-snappy block instead. Readers tell them
  apart by the 8-byte magic (as the Java client and kafka-python do); we write xerial, like
  the Java producer, so every Kafka client can read what Ketch writes.
* lz4 (3): a standard LZ4 frame (since magic 1 / KIP-57; the broken header checksum of
  magic 0 does not concern v2). We write independent 64 KiB blocks and no content size,
  as Java's KafkaLZ4BlockOutputStream does.
* zstd (4): a zstd frame. librdkafka and Java's zstd-jni stream the data and leave the
  content size out of the frame header, so the reader may not trust the header to size
  its buffer.

Limits. A compressed region of one megabyte can claim to inflate to gigabytes. Every
decoder takes `decompressed_bytes_max` and stops producing output once it is passed,
raising `RecordTooLargeError` (MESSAGE_TOO_LARGE) before memory is spent, so a
decompression bomb costs at most about the limit. A stream that does not decode,
is truncated, or carries trailing garbage raises `CorruptRecordError`. Codec ids 5..7 raise
`UnsupportedCompressionTypeError` (UNSUPPORTED_COMPRESSION_TYPE, 76). No library exception
escapes this module.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from clients.records.errors import (
    CorruptRecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)

__all__ = [
    "CompressionType",
    "compression_type_for",
    "compress",
    "decompress",
    "XERIAL_MAGIC",
    "XERIAL_BLOCK_BYTES",
]


class CompressionType(IntEnum):
    """Bits 0-2 of the batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_CODEC_BY_ID: tuple[CompressionType, ...] = tuple(CompressionType)


def compression_type_for(codec_id: int) -> CompressionType:
    """The codec named by an attributes value's low 3 bits; 5..7 are not codecs."""
    try:
        return _CODEC_BY_ID[codec_id]
    except IndexError:
        raise UnsupportedCompressionTypeError(codec_id) from None


# -- snappy (xerial framing) ---------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
# Header: magic, version, minimum compatible version. snappy-java writes 1 and 1.
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_HEADER_BYTES = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# snappy-java's SnappyOutputStream default block size; its reader accepts any block size.
XERIAL_BLOCK_BYTES = 32 * 1024
_INT32 = struct.Struct(">i")


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER_BYTES]
    for start in range(0, len(view), XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_BYTES]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_block(block: memoryview, bytes_left: int) -> bytes:
    """One raw snappy block, refusing it before decoding if it declares too much output."""
    try:
        # Raw snappy opens with the uvarint length of its output: check it first so a
        # bomb is refused before cramjam allocates that much.
        declared = cramjam.snappy.decompress_raw_len(block)
    except Exception as e:  # cramjam.DecompressionError and friends: the library's own types
        raise CorruptRecordError(f"snappy: {e}") from None
    if declared > bytes_left:
        raise RecordTooLargeError(
            f"snappy block inflates to {declared} bytes, past the decompression limit"
        )
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as e:
        raise CorruptRecordError(f"snappy: {e}") from None


def _snappy_decompress(data: memoryview, bytes_max: int) -> bytes:
    if bytes(data[:8]) != XERIAL_MAGIC:
        return _snappy_raw_block(data, bytes_max)
    if len(data) < _XERIAL_HEADER.size:
        raise CorruptRecordError("snappy: truncated xerial header")
    # Version and compatible version are not checked: snappy-java's reader only insists on
    # the magic, and some writers (redpanda) are known to store them little-endian.
    parts: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER.size
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("snappy: truncated xerial block length")
        (block_len,) = _INT32.unpack_from(data, pos)
        pos += 4
        if block_len < 0 or pos + block_len > end:
            raise CorruptRecordError(
                f"snappy: xerial block of {block_len} bytes at {pos} overruns {end} bytes"
            )
        chunk = _snappy_raw_block(data[pos : pos + block_len], bytes_max - total)
        total += len(chunk)
        parts.append(chunk)
        pos += block_len
    return b"".join(parts)


# -- gzip ----------------------------------------------------------------------------------

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip wrapper only, as Kafka writes and reads it


def _gzip_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    # zlib with a gzip wrapper writes mtime 0, so equal input gives equal bytes.
    c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: memoryview, bytes_max: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: bytes | memoryview = data
    try:
        while True:  # one gzip member per turn
            d = zlib.decompressobj(_GZIP_WBITS)
            # Ask for one byte past the limit: getting it proves the limit is passed,
            # without ever holding more than limit + 1 bytes.
            chunk = d.decompress(rest, bytes_max - total + 1)
            total += len(chunk)
            if total > bytes_max:
                raise RecordTooLargeError(
                    f"gzip: inflates past the decompression limit of {bytes_max} bytes"
                )
            parts.append(chunk)
            if not d.eof:
                raise CorruptRecordError("gzip: truncated stream")
            rest = d.unused_data
            if not rest:
                return b"".join(parts)
    except zlib.error as e:
        raise CorruptRecordError(f"gzip: {e}") from None


# -- lz4 -----------------------------------------------------------------------------------

# lz4 allocates max_length up front; asking for the whole limit at once would cost an
# allocation of the limit per batch, so output is pulled in steps of at most this.
_LZ4_STEP_BYTES = 1 << 20


def _lz4_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    return lz4.frame.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,  # Kafka's Java reader requires independent blocks
        content_checksum=False,
        store_size=False,
    )


def _lz4_decompress(data: memoryview, bytes_max: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: bytes | memoryview = data
    step = max(_LZ4_STEP_BYTES, 4 * len(data))
    try:
        while True:  # one frame per turn; Kafka writes one, we tolerate several
            d = lz4.frame.LZ4FrameDecompressor()
            chunk = d.decompress(rest, max_length=min(bytes_max - total + 1, step))
            while True:
                total += len(chunk)
                if total > bytes_max:
                    raise RecordTooLargeError(
                        f"lz4: inflates past the decompression limit of {bytes_max} bytes"
                    )
                parts.append(chunk)
                if d.eof or d.needs_input:
                    break
                chunk = d.decompress(b"", max_length=min(bytes_max - total + 1, step))
            if not d.eof:
                raise CorruptRecordError("lz4: truncated frame")
            rest = d.unused_data
            if not rest:
                return b"".join(parts)
    except RecordTooLargeError:
        raise
    except CorruptRecordError:
        raise
    except Exception as e:  # lz4 raises RuntimeError/ValueError on a bad frame
        raise CorruptRecordError(f"lz4: {e}") from None


# -- zstd ----------------------------------------------------------------------------------

# For a frame without content size the library allocates max_output_size up front; try a
# modest buffer first, and only a stream that needs more pays for a limit-sized one.
_ZSTD_FIRST_GUESS_BYTES = 1 << 20


def _zstd_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)


def _zstd_decompress(data: memoryview, bytes_max: int) -> bytes:
    # One ZstdDecompressor per call: instances are not safe to share between threads.
    dctx = zstandard.ZstdDecompressor()
    try:
        params = zstandard.get_frame_parameters(data)
    except zstandard.ZstdError as e:
        raise CorruptRecordError(f"zstd: {e}") from None
    if params.content_size != zstandard.CONTENTSIZE_UNKNOWN:
        if params.content_size > bytes_max:
            raise RecordTooLargeError(
                f"zstd: frame declares {params.content_size} bytes, past the "
                f"decompression limit of {bytes_max} bytes"
            )
        try:
            return dctx.decompress(data, allow_extra_data=False)
        except zstandard.ZstdError as e:
            raise CorruptRecordError(f"zstd: {e}") from None
    # No content size (librdkafka, zstd-jni): decode into a bounded buffer.
    guess = min(bytes_max, max(_ZSTD_FIRST_GUESS_BYTES, 8 * len(data)))
    try:
        return dctx.decompress(data, max_output_size=guess, allow_extra_data=False)
    except zstandard.ZstdError:
        pass
    if guess < bytes_max:
        try:
            return dctx.decompress(data, max_output_size=bytes_max, allow_extra_data=False)
        except zstandard.ZstdError:
            pass
    # The library says "did not decompress full frame" both for a truncated frame and for
    # a buffer too small; a bounded streaming read tells the two apart.
    try:
        produced = len(
            zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=False).read(bytes_max + 1)
        )
    except zstandard.ZstdError as e:
        raise CorruptRecordError(f"zstd: {e}") from None
    if produced > bytes_max:
        raise RecordTooLargeError(
            f"zstd: inflates past the decompression limit of {bytes_max} bytes"
        )
    raise CorruptRecordError("zstd: truncated or malformed frame")


# -- dispatch ------------------------------------------------------------------------------


def compress(
    compression: CompressionType, data: bytes | bytearray | memoryview, *, level: int | None = None
) -> bytes:
    """The records region `data` compressed as Kafka's `compression` codec expects it.

    `level` is the codec's own level (gzip 1-9, lz4 0-16, zstd -7..22); None picks the
    Kafka producer's default (gzip 6, lz4 fast, zstd 3). Snappy has no level.
    """
    if compression == CompressionType.GZIP:
        return _gzip_compress(data, level)
    if compression == CompressionType.SNAPPY:
        return _snappy_compress(data)
    if compression == CompressionType.LZ4:
        return _lz4_compress(data, level)
    if compression == CompressionType.ZSTD:
        return _zstd_compress(data, level)
    assert compression == CompressionType.NONE, compression
    return bytes(data)


def decompress(
    compression: CompressionType | int,
    data: bytes | bytearray | memoryview,
    *,
    decompressed_bytes_max: int,
) -> bytes:
    """The records region inside a compressed blob, at most `decompressed_bytes_max` bytes.

    Raises CorruptRecordError (bad stream), RecordTooLargeError (past the limit) or
    UnsupportedCompressionTypeError (codec id 5..7); nothing else.
    """
    assert decompressed_bytes_max >= 0, decompressed_bytes_max
    compression = compression_type_for(compression)
    view = memoryview(data)
    if compression == CompressionType.NONE:
        if len(view) > decompressed_bytes_max:
            raise RecordTooLargeError(
                f"{len(view)} bytes pass the limit of {decompressed_bytes_max} bytes"
            )
        return bytes(view)
    if compression == CompressionType.GZIP:
        return _gzip_decompress(view, decompressed_bytes_max)
    if compression == CompressionType.SNAPPY:
        return _snappy_decompress(view, decompressed_bytes_max)
    if compression == CompressionType.LZ4:
        return _lz4_decompress(view, decompressed_bytes_max)
    assert compression == CompressionType.ZSTD, compression
    return _zstd_decompress(view, decompressed_bytes_max)
