"""Real-process fault injection that proves ../shared/SCENARIOS.md.

- ``cluster``: a LocalCluster with per-link fault proxies and the questions scenarios ask
  (leader of a partition, active controller, high watermarks);
- ``proxy``: the loopback fault proxy (cut both/one way, delay, drop responses);
- ``faults``: faults as data (Kill, Terminate, Pause/Resume, Cut, DropResponses,
  TornTail, FlipByte) and ``inject``;
- ``workload``: producers logging every attempt, readers, replica files;
- ``checker``: the SCENARIOS.md figures and verdicts;
- ``scenarios``: N1-N10, L1-L6 (and D1, disk faults); ``runner``: ``python -m chaos run``.
"""
