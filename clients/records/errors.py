"""Typed errors of the record layer (record batches v2 and their compression codecs).

Every way a `records` payload can be bad raises a subclass of `RecordError`, never an
IndexError, struct.error, zlib.error or a codec library's own exception: the broker turns
`error.error_code` into the partition's error code in a Produce response (STYLE.md section 4:
inside cores a Kafka outcome is data), and a client shell raises it to the user.

Which code for which failure follows Kafka's broker:

* CORRUPT_MESSAGE (2): bad CRC, bad lengths, truncated or malformed records, a codec stream
  that does not decode (Kafka's CorruptRecordException).
* UNSUPPORTED_VERSION (35): a legacy message set (magic 0 or 1). Ketch serves Produce v3+ and
  Fetch v4+, which carry only magic 2; retrying the same bytes cannot succeed, so we answer
  with a non-retriable code instead of CORRUPT_MESSAGE, which Kafka marks retriable.
* UNSUPPORTED_COMPRESSION_TYPE (76): codec id 5..7 in the attributes.
* MESSAGE_TOO_LARGE (10): a compressed blob that inflates past the caller's limit (a
  decompression bomb), or a batch the caller's limit does not allow.
* INVALID_RECORD (87): a well-formed batch that breaks a semantic rule (a control batch
  without exactly one record, a control record key of the wrong size).
"""

from __future__ import annotations

from clients.protocol.errors import ErrorCode

__all__ = [
    "RecordError",
    "CorruptRecordError",
    "UnsupportedMagicError",
    "UnsupportedCompressionTypeError",
    "RecordTooLargeError",
    "InvalidRecordError",
]


class RecordError(ValueError):
    """Base of every record-layer error; `error_code` is the Kafka code to answer with."""

    error_code: ErrorCode = ErrorCode.CORRUPT_MESSAGE


class CorruptRecordError(RecordError):
    """Bytes that are not a valid record batch v2: CRC, lengths, varints, codec stream."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class UnsupportedMagicError(RecordError):
    """A legacy message set (magic 0/1): recognised, refused, never mis-parsed as v2."""

    error_code = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, magic: int, message: str | None = None) -> None:
        self.magic = magic
        super().__init__(
            message
            or f"record batch magic {magic} is a legacy message set; Ketch accepts only "
            "magic 2 (record batch v2, Produce v3+ / Fetch v4+)"
        )


class UnsupportedCompressionTypeError(RecordError):
    """Compression codec id 5..7: no such codec in Kafka."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE

    def __init__(self, codec_id: int) -> None:
        self.codec_id = codec_id
        super().__init__(f"unknown compression codec id {codec_id} (Kafka knows 0..4)")


class RecordTooLargeError(RecordError):
    """Output would pass a size limit the caller set (decompression bomb, oversized batch)."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidRecordError(RecordError):
    """A well-formed batch that breaks a semantic rule (control batches)."""

    error_code = ErrorCode.INVALID_RECORD
