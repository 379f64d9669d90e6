"""The historical archive (issue 18; Kafka's tiered storage, KIP-405). docs/tiered_storage.md.

- ``remote_storage``: the RemoteStorageManager port and its errors (the contract with
  ``s3``, the S3-compatible store);
- ``filesystem``: the store on a directory (an HDFS/NFS mount, a local path);
- ``factory``: the store a broker's properties name;
- ``metadata``: the records of ``__remote_log_metadata`` and the remote segment index
  rebuilt by replaying them (pure);
- ``plan``: which segments to copy and to expire, backoffs, where a remote read starts (pure);
- ``manager``: the asyncio shell (Kafka's RemoteLogManager): replays the metadata topic on
  every broker, copies and expires on leaders, serves reads below the local log.

Not here: the local log's retention of copied segments (``broker.log.partition_log``),
the topic configs (``metadata_log``).
"""
