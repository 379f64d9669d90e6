"""``ketch quorum status|replication``: the metadata quorum, as ``kafka-metadata-quorum
describe --status`` / ``--replication`` show it.

Both ask DescribeQuorum (KIP-595/836) through Ketch's admin client: through a broker,
which forwards it to the active controller, or with ``--bootstrap-controller`` straight
to the controllers (KIP-919), which works while no broker runs. Only the quorum's leader
knows where the others are, and that is whom the request reaches either way.

``status``: cluster id, leader id and epoch, high watermark, the largest follower lag
(records and ms, Kafka's MaxFollowerLag / MaxFollowerLagTimeMs), voters and observers.
``replication``: one row per voter and observer: log end offset, lag, last fetch and last
caught-up times, and its role (Leader, Follower, Observer).
"""
from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from clients.cli import _admin_cli as cli
from clients._core.admin import QuorumInfo, QuorumReplica

EXAMPLES = """examples:
  ketch quorum status --dir ./ketch-data
  ketch quorum replication --bootstrap 127.0.0.1:9092 --output json
  ketch quorum status --bootstrap-controller 127.0.0.1:9093   # no broker needed
"""


def status_view(info: QuorumInfo, cluster_id: str | None) -> dict[str, Any]:
    """``kafka-metadata-quorum describe --status``, with stable snake_case names.
    MaxFollowerLag(TimeMs) are Kafka's: the voter with the lowest log end offset, its lag
    and how long before the leader's own caught-up time it was last caught up (None when
    the leader does not know)."""
    leader = next((v for v in info.voters if v.replica_id == info.leader_id), None)
    laggard = min(info.voters, key=lambda v: v.log_end_offset) if info.voters else None
    lag: int | None = None
    lag_time_ms: int | None = None
    if laggard is not None and leader is not None:
        if laggard.replica_id == leader.replica_id:
            lag, lag_time_ms = 0, 0
        else:
            lag = laggard.lag
            if leader.last_caught_up_timestamp >= 0 and laggard.last_caught_up_timestamp >= 0:
                lag_time_ms = leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
    return {
        "cluster_id": cluster_id,
        "leader_id": info.leader_id,
        "leader_epoch": info.leader_epoch,
        "high_watermark": info.high_watermark,
        "max_follower_lag": lag,
        "max_follower_lag_time_ms": lag_time_ms,
        "current_voters": [v.replica_id for v in info.voters],
        "current_observers": [o.replica_id for o in info.observers],
    }


def _row(r: QuorumReplica, status: str) -> dict[str, Any]:
    return {"node_id": r.replica_id, "log_end_offset": r.log_end_offset, "lag": r.lag,
            "last_fetch_timestamp": r.last_fetch_timestamp,
            "last_caught_up_timestamp": r.last_caught_up_timestamp, "status": status}


def replication_view(info: QuorumInfo) -> list[dict[str, Any]]:
    """``kafka-metadata-quorum describe --replication``: the leader first, as Kafka lists it."""
    rows = [_row(v, "Leader" if v.replica_id == info.leader_id else "Follower")
            for v in info.voters]
    rows.sort(key=lambda r: r["status"] != "Leader")
    return rows + [_row(o, "Observer") for o in info.observers]


def _ago(ts_ms: int, now_ms: int) -> str:
    return "unknown" if ts_ms < 0 else f"{max(0, now_ms - ts_ms)} ms ago"


async def _describe(args: argparse.Namespace) -> tuple[QuorumInfo, str | None]:
    async with cli.quorum_admin(args) as admin:
        info = await admin.describe_quorum()
        try:
            cluster_id = (await admin.describe_cluster()).cluster_id or None
        except Exception:       # the id is a courtesy: the quorum answer is what was asked
            cluster_id = None
        return info, cluster_id


def run_status(args: argparse.Namespace) -> int:
    info, cluster_id = asyncio.run(_describe(args))
    view = status_view(info, cluster_id)
    if args.output == "json":
        cli.print_json(view)
        return 0
    labels = {"cluster_id": "ClusterId", "leader_id": "LeaderId", "leader_epoch": "LeaderEpoch",
              "high_watermark": "HighWatermark", "max_follower_lag": "MaxFollowerLag",
              "max_follower_lag_time_ms": "MaxFollowerLagTimeMs",
              "current_voters": "CurrentVoters", "current_observers": "CurrentObservers"}
    width = max(len(v) for v in labels.values()) + 2
    for key, label in labels.items():
        value = view[key]
        if isinstance(value, list):
            value = "[" + ",".join(map(str, value)) + "]"
        print(f"{label + ':':<{width}}{'unknown' if value is None else value}")
    return 0


def run_replication(args: argparse.Namespace) -> int:
    info, _ = asyncio.run(_describe(args))
    rows = replication_view(info)
    if args.output == "json":
        cli.print_json(rows)
        return 0
    now_ms = int(time.time() * 1000)
    cli.print_table(["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                     "LastCaughtUpTimestamp", "Status"],
                    [[r["node_id"], r["log_end_offset"], "-" if r["lag"] is None else r["lag"],
                      _ago(r["last_fetch_timestamp"], now_ms),
                      _ago(r["last_caught_up_timestamp"], now_ms), r["status"]] for r in rows])
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quorum", help="the metadata quorum: leader, epoch, voters, observers, lag",
                       description=__doc__.split("\n\n")[0], epilog=EXAMPLES)
    verbs = p.add_subparsers(dest="quorum_command", required=True)
    for name, fn, text in (("status", run_status, "leader id and epoch, high watermark, "
                            "largest follower lag, voters and observers"),
                           ("replication", run_replication, "per voter and observer: log end "
                            "offset, lag, last fetch and last caught-up time")):
        v = verbs.add_parser(name, help=text, description=text, epilog=EXAMPLES)
        cli.add_connection_args(v, controllers=True)
        v.set_defaults(run=cli.guarded(fn))
