"""Mirror topics' data path on the destination cluster (issue 21).

``_core``: the pure per-link fetcher core (``MirrorLinkCore``: what to ask the source next,
truncation by OffsetForLeaderEpoch, backoff, lag, state). ``manager``: the asyncio shell
(one task per link for the source's metadata, one per source leader for its fetches),
started and stopped from the metadata image. What does not live here: the link objects
and their manager (``metadata_log.cluster_links``, linkops's), the topic configs
(``metadata_log.mirror_topics``), and the appends themselves (``ReplicaManager.mirror_*``).
"""
from broker.mirror._core import (
    MirrorAssignment, MirrorLinkCore, MirrorLogPort, MirrorLogState, MirrorPartitionState,
    MirrorPartitionStatus, SourceEpochAnswer, SourceEpochQuery, SourceFetch, SourceFetched,
    SourcePartitionMetadata, SourceWork,
)

__all__ = [
    "MirrorAssignment", "MirrorLinkCore", "MirrorLogPort", "MirrorLogState", "MirrorPartitionState",
    "MirrorPartitionStatus", "SourceEpochAnswer", "SourceEpochQuery", "SourceFetch", "SourceFetched",
    "SourcePartitionMetadata", "SourceWork",
]
