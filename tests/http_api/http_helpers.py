"""A blocking HTTP client for the admin API tests (the standard library's: nothing to mock)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def call(port: int, method: str, path: str, body: Any = None, raw: bytes | None = None,
         timeout_s: float = 30.0) -> tuple[int, Any]:
    """(status, decoded JSON body, or the text when it is not JSON)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            status, text = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text.decode(errors="replace")


def get(port: int, path: str, timeout_s: float = 30.0) -> tuple[int, Any]:
    return call(port, "GET", path, timeout_s=timeout_s)
