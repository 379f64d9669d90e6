"""Golden Kafka frames from real clients, and the loader the tests use.

The ``<client>.json`` files next to this module are written by ``tools/capture_golden.py``
(regenerate on purpose and read the diff). Each entry is one whole wire frame, 4-byte
length prefix included, in hex, beside its sidecar facts:

- ``client``/``client_version``: who produced the frame: a live client talking to the
  capturing broker (``confluent-kafka``, ``kcat``, ``kafka-python``, ``aiokafka``) or a
  library's own encoder called directly (``kafka-python-encoder``, ``aiokafka-encoder``);
- ``direction``: ``request``, or ``response`` (responses are all encoded by kafka-python's
  protocol classes, an encoder independent of Ketch's);
- ``api_key``/``api_name``/``api_version``; ``variant``: the run (compression codec,
  consumer group, admin, SASL...); ``sha256`` of the frame, checked on load.

Nothing here needs the capture tool or any client library at test time.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GOLDEN_DIR", "GoldenCase", "load"]

GOLDEN_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class GoldenCase:
    client: str
    client_version: str
    encoder: str
    variant: str
    direction: str         # "request" | "response"
    api_key: int
    api_name: str
    api_version: int
    frame: bytes           # the whole wire frame: int32 length + payload
    sha256: str

    @property
    def payload(self) -> bytes:
        """The frame without its length prefix (what decode_request/decode_response take)."""
        return self.frame[4:]

    @property
    def correlation_id(self) -> int:
        offset = 4 if self.direction == "request" else 0   # after api key and version
        return int.from_bytes(self.payload[offset:offset + 4], "big", signed=True)

    def __str__(self) -> str:  # pytest ids
        return (f"{self.client}-{self.api_name}-v{self.api_version}-{self.direction}"
                f"-{self.variant}-{self.sha256[:8]}")


def _parse(entry: dict) -> GoldenCase:
    frame = bytes.fromhex(entry["frame"])
    if hashlib.sha256(frame).hexdigest() != entry["sha256"]:
        raise ValueError(f"golden frame {entry['sha256'][:8]} does not match its sha256")
    if int.from_bytes(frame[:4], "big") != len(frame) - 4:
        raise ValueError(f"golden frame {entry['sha256'][:8]} has a wrong length prefix")
    return GoldenCase(
        client=entry["client"], client_version=entry["client_version"],
        encoder=entry["encoder"], variant=entry["variant"], direction=entry["direction"],
        api_key=entry["api_key"], api_name=entry["api_name"],
        api_version=entry["api_version"], frame=frame, sha256=entry["sha256"],
    )


def load(api_name: str | None = None, *, direction: str | None = None,
         client: str | None = None) -> list[GoldenCase]:
    """Golden cases, optionally filtered; ordered by client file, then as stored."""
    cases = []
    for path in sorted(GOLDEN_DIR.glob("*.json")):
        for entry in json.loads(path.read_text()):
            case = _parse(entry)
            if api_name is not None and case.api_name != api_name:
                continue
            if direction is not None and case.direction != direction:
                continue
            if client is not None and case.client != client:
                continue
            cases.append(case)
    return cases
