"""The metadata quorum: controller processes replicating the metadata log with Raft
(pysyncobj), and the active controller's decisions.

Not here: broker data-plane code, or anything that reads partition logs.
"""
