"""The historical archive (tiered storage, KIP-405) as its readers and writers share it: the
broker's RemoteLogManager (``broker.tiered``) writes and serves it, the Spark source's
executors read it directly (``clients.spark.archive``). Here rather than under ``broker``
because clients import nothing of the broker (tests/test_layering.py), as Kafka keeps its
RemoteStorageManager and RemoteLogSegmentMetadata in a storage API module apart from the
broker.

- ``remote_storage``: the RemoteStorageManager port, segment ids and object names, errors;
- ``filesystem``, ``s3``: the stores; ``factory``: the store a set of properties names;
- ``metadata``: the records of ``__remote_log_metadata`` and the remote segment index
  rebuilt by replaying them (pure);
- ``reading``: where a read of a remote segment starts, which batches it returns, which
  transactions read_committed drops (pure); ``aborted_txn``: the transaction index entry.
"""
