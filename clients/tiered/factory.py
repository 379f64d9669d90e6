"""The remote store a set of properties names (remote.log.storage.manager.class.name): a
broker's, or the Spark source's ``ketch.remote.storage*`` options (the same names)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from clients.tiered.filesystem import FileSystemRemoteStorage
from clients.tiered.remote_storage import RemoteStorageConfigError, RemoteStorageManager

__all__ = ["remote_storage_from_config"]


def remote_storage_from_config(config: Mapping[str, str]) -> RemoteStorageManager:
    """``config``: the properties (name -> string). Raises RemoteStorageConfigError naming
    the key at fault."""
    kind = (config.get("remote.log.storage.manager.class.name") or "filesystem").strip().lower()
    if kind == "filesystem":
        path = (config.get("ketch.remote.storage.fs.path") or "").strip()
        if not path:
            raise RemoteStorageConfigError("ketch.remote.storage.fs.path is required with "
                              "remote.log.storage.manager.class.name=filesystem")
        return FileSystemRemoteStorage(Path(path))
    if kind == "s3":
        from clients.tiered.s3 import S3RemoteStorage    # boto3 is the optional ketch[s3] extra
        return S3RemoteStorage.from_config(config)
    raise RemoteStorageConfigError(f"remote.log.storage.manager.class.name={kind}: Ketch has "
                                   "filesystem and s3")
