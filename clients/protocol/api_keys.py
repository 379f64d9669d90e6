"""API keys, named after Kafka's (PRODUCE = 0, FETCH = 1, ...), derived from the schemas."""
from __future__ import annotations

import enum
import re

from clients.protocol import _schemas


def _constant(request_name: str) -> str:
    base = request_name[: -len("Request")]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).upper()


ApiKey = enum.IntEnum("ApiKey", sorted(
    ((_constant(name), table[0]) for name, table in _schemas.SCHEMAS.items()
     if table[1] == "request"), key=lambda kv: kv[1]), module=__name__)
ApiKey.__doc__ = "Kafka API keys (the int16 at the start of every request header)."

REQUEST_NAMES: dict[int, str] = {t[0]: n for n, t in _schemas.SCHEMAS.items() if t[1] == "request"}
RESPONSE_NAMES: dict[int, str] = {t[0]: n for n, t in _schemas.SCHEMAS.items() if t[1] == "response"}
