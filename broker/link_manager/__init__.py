"""Cluster links on the destination (issue 21): the link manager, which keeps each link's
mirror topics in line with the source (topic discovery and creation, partition counts,
topic configs, a deleted source topic) and syncs consumer group offsets.

- ``core``: the pure decisions (``plan_topics``, ``plan_offsets``, ``LinkSchedule``,
  ``link_manager_broker``);
- ``driver``: the asyncio shell on the one broker that runs it.

Not here: the data path (each mirror partition's leader fetching from the source:
``broker/mirror``), the link's configs and their validation (``metadata_log.cluster_links``).
"""
from broker.link_manager.driver import LinkManagerDriver, LinkStatus

__all__ = ["LinkManagerDriver", "LinkStatus"]
