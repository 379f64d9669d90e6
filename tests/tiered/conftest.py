"""Tiered storage process tests, parametrized by the remote store.

``remote_storage`` yields the broker properties (name -> string) that point the brokers at
one store; each test module starts its cluster with them. ``filesystem``: a directory of
this test's; ``s3`` (moto's server as a process, tests/tiered/s3_server.py) is added where
that module exists."""
from __future__ import annotations

from typing import Iterator

import pytest

BACKENDS = ["filesystem"]


@pytest.fixture(scope="module", params=BACKENDS)
def remote_storage(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if request.param == "filesystem":
        path = tmp_path_factory.mktemp("remote-store")
        yield {"remote.log.storage.manager.class.name": "filesystem",
               "ketch.remote.storage.fs.path": str(path)}
    else:                                      # pragma: no cover - wired with s3_server.py
        raise AssertionError(f"unknown remote storage {request.param}")
