"""The historical archive (issue 18; Kafka's tiered storage, KIP-405). docs/tiered_storage.md.

- ``plan``: which segments to copy and to expire, backoffs, where a search by time starts (pure);
- ``manager``: the asyncio shell (Kafka's RemoteLogManager): replays the metadata topic on
  every broker, copies and expires on leaders, serves reads below the local log.

Not here: what a reader of the archive shares with the broker, in ``clients.tiered`` (the
store port and the stores, the ``__remote_log_metadata`` codec and index, reading a remote
segment), since the Spark source's executors read the store directly and clients import
nothing of the broker; the local log's retention of copied segments
(``broker.log.partition_log``); the topic configs (``metadata_log``).
"""
