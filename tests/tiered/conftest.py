"""Tiered storage process tests, parametrized by the remote store.

``remote_storage`` yields the broker properties (name -> string) that point the brokers at
one store; each test module starts its cluster with them. ``filesystem``: a directory of
this test's; ``s3``: moto's S3 server as a real process (``tests/tiered/s3_server.py``)."""
from __future__ import annotations

from typing import Iterator

import pytest

BACKENDS = ["filesystem", "s3"]


@pytest.fixture(scope="module", params=BACKENDS)
def remote_storage(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if request.param == "filesystem":
        path = tmp_path_factory.mktemp("remote-store")
        yield {"remote.log.storage.manager.class.name": "filesystem",
               "ketch.remote.storage.fs.path": str(path)}
    else:
        from s3_server import s3_server
        with s3_server(tmp_path_factory.mktemp("s3")) as properties:
            yield {"remote.log.storage.manager.class.name": "s3", **properties}
