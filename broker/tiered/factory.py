"""The remote store a broker's properties name (remote.log.storage.manager.class.name)."""
from __future__ import annotations

import importlib.util
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
        # Wired at merge: broker/tiered/s3.py is the s3 helper's (T2) branch.
        if importlib.util.find_spec("broker.tiered.s3") is None:
            raise ConfigError("remote.log.storage.manager.class.name=s3: this build has no S3 "
                              "remote storage (broker/tiered/s3.py)")
        s3 = importlib.import_module("broker.tiered.s3")
        storage: RemoteStorageManager = s3.S3RemoteStorage.from_config(config)
        return storage
    raise ConfigError(f"remote.log.storage.manager.class.name={kind}: Ketch has filesystem and s3")
