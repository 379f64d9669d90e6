"""``ketch up``, ``ketch controller``, ``ketch broker``: running nodes.

Controllers and brokers run as their own processes (``python -m quorum`` / ``python -m
broker``); this module only starts them, so ``clients`` imports nothing from them.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from clients.cli.launcher import LocalCluster


def _props(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"ketch: {flag} takes KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_up(args: argparse.Namespace) -> int:
    if args.controllers not in (1, 3, 5):
        print("ketch up: --controllers must be 1, 3 or 5 (a Raft quorum)", file=sys.stderr)
        return 2
    if args.brokers < 1:
        print("ketch up: --brokers must be at least 1", file=sys.stderr)
        return 2
    cluster = LocalCluster(args.dir, args.controllers, args.brokers,
                           broker_props=_props(args.broker_prop, "--broker-prop"),
                           controller_props=_props(args.controller_prop, "--controller-prop"))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        print(f"ketch: starting {len(cluster.spec.controllers)} controllers and "
              f"{len(cluster.spec.brokers)} brokers in {cluster.dir}", flush=True)
        cluster.start(timeout_s=args.timeout)
        print(f"ketch: cluster {cluster.spec.cluster_id} is up", flush=True)
        print(f"bootstrap.servers={cluster.spec.bootstrap_servers}", flush=True)
        for b in cluster.spec.brokers:
            if b.http_port:
                print(f"ketch: broker {b.id} admin API and metrics at http://127.0.0.1:{b.http_port}/",
                      flush=True)
        print(f"ketch: details in {cluster.json_path}; Ctrl-C stops the cluster", flush=True)
        reported: set[int] = set()
        while not stop.wait(0.5):
            # A node that dies is reported, not fatal: the rest of the cluster keeps serving
            # (the chaos suite kills nodes on purpose and restarts them).
            for node_id, code in cluster.exited_nodes().items():
                if node_id not in reported:
                    reported.add(node_id)
                    print(f"ketch: node {node_id} exited with {code}; see its node.log", flush=True)
            reported &= set(cluster.exited_nodes())
    except (RuntimeError, TimeoutError) as e:
        print(f"ketch up: {e}", file=sys.stderr)
        cluster.stop()
        return 1
    print("ketch: stopping (controlled shutdown of the brokers first)", flush=True)
    cluster.stop()
    print("ketch: stopped", flush=True)
    return 0


def cmd_node(module: str, args: argparse.Namespace) -> int:
    os.execv(sys.executable, [sys.executable, "-m", module, "--config", args.config])
    return 1  # not reached


def register(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser("up", help="run a local cluster (3 controllers, 3 brokers)")
    up.add_argument("--dir", default="./ketch-data", help="where the cluster keeps its data")
    up.add_argument("--controllers", type=int, default=3)
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--broker-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="a server.properties override for every broker")
    up.add_argument("--controller-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="a server.properties override for every controller")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the cluster")
    up.set_defaults(run=cmd_up)
    for role, module in (("controller", "quorum"), ("broker", "broker")):
        p = sub.add_parser(role, help=f"run one {role} from a server.properties file")
        p.add_argument("--config", required=True)
        p.set_defaults(run=lambda args, module=module: cmd_node(module, args))
