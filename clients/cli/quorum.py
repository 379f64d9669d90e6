"""``ketch quorum status|replication|add-controller|remove-controller``: the metadata
quorum, as ``kafka-metadata-quorum describe --status`` / ``--replication`` show it, and
its voters changed as ``kafka-metadata-quorum add-controller`` / ``remove-controller``
change them (KIP-853).

Both ask DescribeQuorum (KIP-595/836) through Ketch's admin client: through a broker,
which forwards it to the active controller, or with ``--bootstrap-controller`` straight
to the controllers (KIP-919), which works while no broker runs. Only the quorum's leader
knows where the others are, and that is whom the request reaches either way.

``status``: cluster id, leader id and epoch, high watermark, the largest follower lag
(records and ms, Kafka's MaxFollowerLag / MaxFollowerLagTimeMs), voters and observers.
``replication``: one row per voter and observer: log end offset, lag, last fetch and last
caught-up times, and its role (Leader, Follower, Observer).

``add-controller --controller-config PATH``: the controller that PATH configures (node.id,
its controller listener, its Raft port, the directory.id of its metadata.log.dir's
meta.properties) becomes a voter. Start it first: it joins as an observer, and the active
controller adds it once it has caught up with the log (until then the request is retried,
up to --timeout, and the reason printed). ``remove-controller --controller-id N
[--controller-directory-id ID]``: the voter leaves (its directory id is taken from
DescribeQuorum when not given); the last voter cannot.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from typing import Any

from clients.aio.admin import Admin
from clients.cli import _admin_cli as cli
from clients.cli._common import CliError
from clients._core.admin import QuorumInfo, QuorumReplica
from clients.properties import load_properties, parse_listeners
from clients.protocol.types import parse_uuid_text, uuid_text

EXAMPLES = """examples:
  ketch quorum status --dir ./ketch-data
  ketch quorum replication --bootstrap 127.0.0.1:9092 --output json
  ketch quorum status --bootstrap-controller 127.0.0.1:9093   # no broker needed
  ketch quorum add-controller --controller-config ./ketch-data/controller-4.properties --dir ./ketch-data
  ketch quorum remove-controller --controller-id 4 --dir ./ketch-data
"""

RAFT_PORT_OFFSET_DEFAULT = 10000


def controller_to_add(config_path: str) -> tuple[int, uuid.UUID, dict[str, tuple[str, int]]]:
    """(node id, directory id, endpoints by listener name) of the controller a
    server.properties configures, as AddRaftVoter names it."""
    try:
        props = load_properties(config_path)
    except OSError as e:
        raise CliError(f"cannot read {config_path}: {e}") from None
    base = os.path.dirname(os.path.abspath(config_path))
    try:
        node_id = int(props["node.id"])
        listeners = parse_listeners(props.get("listeners", ""))
    except (KeyError, ValueError) as e:
        raise CliError(f"{config_path}: node.id and listeners are needed ({e})") from None
    names = [n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()]
    name = names[0] if names else next(iter(listeners), "")
    if name not in listeners:
        raise CliError(f"{config_path}: no controller listener")
    host, port = listeners[name]
    log_dir = props.get("metadata.log.dir") or props.get("log.dirs", "").split(",")[0].strip()
    meta_path = os.path.join(base, log_dir, "meta.properties")
    try:
        directory_id = parse_uuid_text(load_properties(meta_path)["directory.id"])
    except (OSError, KeyError, ValueError) as e:
        raise CliError(f"{meta_path}: no directory.id ({e}): start the controller first, "
                       "it writes one") from None
    offset = int(props.get("ketch.raft.port.offset", RAFT_PORT_OFFSET_DEFAULT))
    return node_id, directory_id, {"CONTROLLER": (host, port), "RAFT": (host, port + offset)}


async def add_controller(admin: Admin, config_path: str, timeout_ms: int) -> tuple[int, uuid.UUID]:
    """Make the (running) controller that ``config_path`` configures a voter; its id and
    directory id. The admin client retries while the controller catches up, up to
    ``timeout_ms``. ``ketch quorum add-controller`` and ``ketch up --add-controller``."""
    node_id, directory_id, endpoints = controller_to_add(config_path)
    await admin.add_raft_voter(node_id, directory_id, endpoints, timeout_ms=timeout_ms)
    return node_id, directory_id


async def voter_directory_id(admin: Admin, controller_id: int) -> uuid.UUID:
    """A voter's directory id as DescribeQuorum reports it; CliError if it is no voter."""
    info = await admin.describe_quorum()
    voter = next((v for v in info.voters if v.replica_id == controller_id), None)
    if voter is None:
        raise CliError(f"controller {controller_id} is not a voter (voters: "
                       f"{', '.join(str(v.replica_id) for v in info.voters)})")
    return voter.directory_id


async def remove_controller(admin: Admin, controller_id: int, directory_id: uuid.UUID | None,
                            timeout_ms: int) -> uuid.UUID:
    """Remove a voter (its directory id from DescribeQuorum when None); the directory id
    removed. ``ketch quorum remove-controller`` and ``ketch up --remove-controller``."""
    if directory_id is None:
        directory_id = await voter_directory_id(admin, controller_id)
    await admin.remove_raft_voter(controller_id, directory_id, timeout_ms=timeout_ms)
    return directory_id


async def _add_controller(args: argparse.Namespace) -> tuple[int, uuid.UUID]:
    async with cli.quorum_admin(args) as admin:
        return await add_controller(admin, args.controller_config, args.timeout_ms)


async def _remove_controller(args: argparse.Namespace) -> uuid.UUID:
    directory_id = None
    if args.controller_directory_id:
        try:
            directory_id = parse_uuid_text(args.controller_directory_id)
        except ValueError as e:
            raise CliError(str(e)) from None
    async with cli.quorum_admin(args) as admin:
        return await remove_controller(admin, args.controller_id, directory_id, args.timeout_ms)


def run_add_controller(args: argparse.Namespace) -> int:
    node_id, directory_id = asyncio.run(_add_controller(args))
    print(f"Added controller {node_id} with directory id {uuid_text(directory_id)} to the quorum.")
    return 0


def run_remove_controller(args: argparse.Namespace) -> int:
    directory_id = asyncio.run(_remove_controller(args))
    print(f"Removed controller {args.controller_id} with directory id {uuid_text(directory_id)} "
          "from the quorum.")
    return 0


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
    text = "make a running controller a voter (AddRaftVoter, KIP-853)"
    v = verbs.add_parser("add-controller", help=text, description=text, epilog=EXAMPLES)
    cli.add_connection_args(v, controllers=True)
    v.add_argument("--controller-config", required=True, metavar="PATH",
                   help="the server.properties of the controller to add")
    v.add_argument("--timeout-ms", type=int, default=60_000,
                   help="how long to retry while the controller catches up")
    v.set_defaults(run=cli.guarded(run_add_controller))
    text = "remove a voter from the quorum (RemoveRaftVoter, KIP-853)"
    v = verbs.add_parser("remove-controller", help=text, description=text, epilog=EXAMPLES)
    cli.add_connection_args(v, controllers=True)
    v.add_argument("--controller-id", type=int, required=True)
    v.add_argument("--controller-directory-id", metavar="UUID",
                   help="its directory id (default: as DescribeQuorum reports it)")
    v.add_argument("--timeout-ms", type=int, default=60_000)
    v.set_defaults(run=cli.guarded(run_remove_controller))
