"""The active controller's decisions: pure managers over the committed metadata image.

- ``controller``: ``QuorumController``, the facade the quorum server calls;
- ``cluster_control``: broker registration, heartbeats, fencing, controlled shutdown;
- ``replication_control``: topics, partitions, AlterPartition, elections;
- ``config_control``: IncrementalAlterConfigs and AlterConfigs (the known configs are ``metadata_log.config_defs``);
- ``producer_ids``: producer id blocks; ``placement``: rack-aware replica placement;
- ``election``: leader election and ISR edits for one partition;
- ``result``: ``ControllerResult``; ``config``: ``ControllerConfig``.

Not here: Raft, sockets, clocks (time comes in as ``now_ms``), or global randomness (a
``random.Random`` is passed in).
"""
from quorum.controller.config import METADATA_VERSION, ControllerConfig
from quorum.controller.controller import QuorumController
from quorum.controller.election import Election
from quorum.controller.result import ControllerResult

__all__ = ["ControllerConfig", "ControllerResult", "Election", "METADATA_VERSION",
           "QuorumController"]
