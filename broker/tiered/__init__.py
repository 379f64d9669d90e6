"""The historical archive (issue 18; Kafka's tiered storage, KIP-405).

- ``remote_storage``: the RemoteStorageManager port and its errors (the contract with
  broker/tiered/s3.py);
- ``filesystem``: the store on a directory (an HDFS/NFS mount, a local path);
"""
