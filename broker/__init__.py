"""The broker: network server, partition log storage, replication and the group coordinator.

Not here: the metadata quorum (`quorum`) or the wire codec (`clients.protocol`), which
broker and clients share.
"""
