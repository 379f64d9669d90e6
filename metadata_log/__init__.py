"""What the cluster knows, as a log of records: metadata record types, the immutable
`MetadataImage` built by replaying them, and snapshots.

Not here: networking, Raft, or any decision about what to append (that is `quorum`).
"""
