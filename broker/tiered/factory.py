"""The remote store a broker's properties name (remote.log.storage.manager.class.name)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from broker.tiered.filesystem import FileSystemRemoteStorage
from broker.tiered.remote_storage import RemoteStorageManager
from metadata_log.node_config import ConfigError

__all__ = ["remote_storage_from_config"]


def remote_storage_from_config(config: Mapping[str, str]) -> RemoteStorageManager:
    """``config``: the broker's properties (name -> string). Raises ConfigError naming the
    key at fault."""
    kind = (config.get("remote.log.storage.manager.class.name") or "filesystem").strip().lower()
    if kind == "filesystem":
        path = (config.get("ketch.remote.storage.fs.path") or "").strip()
        if not path:
            raise ConfigError("ketch.remote.storage.fs.path is required with "
                              "remote.log.storage.manager.class.name=filesystem")
        return FileSystemRemoteStorage(Path(path))
    if kind == "s3":
        from broker.tiered.s3 import S3RemoteStorage    # boto3 is the optional ketch[s3] extra
        return S3RemoteStorage.from_config(config)
    raise ConfigError(f"remote.log.storage.manager.class.name={kind}: Ketch has filesystem and s3")
