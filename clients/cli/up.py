"""``ketch up``, ``ketch controller``, ``ketch broker``: running nodes.

Controllers and brokers run as their own processes (``python -m quorum`` / ``python -m
broker``); this module only starts them, so ``clients`` imports nothing from them.

Theory of operation. ``ketch up`` is a ``LocalCluster`` (clients/cli/launcher.py) plus a
watch loop: it refuses a directory another cluster runs in (the launcher's ``DIR/.lock``),
keeps the directory's ``server.properties`` files and prints what this run's overrides
changed in them, starts the nodes, prints ``bootstrap.servers=...``, then every half
second looks for nodes that exited. A dead node is reported with the command that
restarts it by hand; with ``--restart-dead`` ``ketch up`` restarts it itself after a
delay from ``RestartBackoff`` (pure: times are arguments). SIGINT/SIGTERM stop the
brokers with a controlled shutdown, then the controllers.

``ketch up --dir DIR --add-controller`` / ``--remove-controller ID`` start nothing: they
hand the change to the ``ketch up`` running in DIR (``clients/cli/up_requests.py``), whose
watch loop carries it out (``LocalCluster.add_controller`` / ``remove_controller``), one
at a time, and prints what it did there too. While it does, dead nodes wait to be
reported.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from clients.cli._common import one_line
from clients.cli.launcher import (DEFAULT_BROKERS, DEFAULT_CONTROLLERS, ClusterInUseError,
                                  ClusterSizeError, LocalCluster)
from clients.cli.up_requests import Request, RequestInbox, ask

RESTART_DELAY_FIRST_MS = 1_000
RESTART_DELAY_MAX_MS = 30_000
RESTART_STABLE_MS = 60_000      # up this long after a restart: the next death starts over at 1 s


class RestartBackoff:
    """When ``--restart-dead`` restarts each dead node: 1 s after its first death, the
    delay doubling with each death that follows soon after a restart (a node that fails
    at once, e.g. on a bad config, is not restarted in a tight loop), at most 30 s."""

    def __init__(self, first_ms: int = RESTART_DELAY_FIRST_MS, max_ms: int = RESTART_DELAY_MAX_MS,
                 stable_ms: int = RESTART_STABLE_MS) -> None:
        self.first_ms, self.max_ms, self.stable_ms = first_ms, max_ms, stable_ms
        self._deaths: dict[int, int] = {}       # node id -> deaths in a row
        self._started_ms: dict[int, int] = {}
        self._due_ms: dict[int, int] = {}

    def on_exit(self, node_id: int, now_ms: int) -> int:
        """The node died now: how long until it is restarted (ms)."""
        started = self._started_ms.pop(node_id, None)
        if started is not None and now_ms - started >= self.stable_ms:
            self._deaths[node_id] = 0
        deaths = self._deaths.get(node_id, 0)
        delay_ms = min(self.max_ms, self.first_ms << min(deaths, 16))
        self._deaths[node_id] = deaths + 1
        self._due_ms[node_id] = now_ms + delay_ms
        return delay_ms

    def due(self, now_ms: int) -> list[int]:
        """Nodes to restart now (each returned once per death)."""
        ready = sorted(n for n, t in self._due_ms.items() if t <= now_ms)
        for node_id in ready:
            del self._due_ms[node_id]
        return ready

    def on_start(self, node_id: int, now_ms: int) -> None:
        self._started_ms[node_id] = now_ms


def _props(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"ketch up: {flag} takes KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _describe_changes(cluster: LocalCluster) -> list[str]:
    lines = []
    for (role, key, old, new), ids in sorted(cluster.config_changes.items(),
                                             key=lambda item: (item[0][0], item[0][1])):
        who = f"{role}{'s' if len(ids) > 1 else ''} {','.join(map(str, sorted(ids)))}"
        if key.startswith("("):
            lines.append(f"ketch: {who}: server.properties was missing; written afresh")
        else:
            was = "not set before" if old is None else f"was {old}"
            lines.append(f"ketch: {who}: server.properties now has {key}={new} ({was})")
    return lines


def cmd_up(args: argparse.Namespace) -> int:
    if args.add_controller or args.remove_controller is not None:
        return _ask_running(args)
    if args.controllers is not None and args.controllers not in (1, 3, 5):
        print("ketch up: --controllers must be 1, 3 or 5 (a Raft quorum)", file=sys.stderr)
        return 2
    if args.brokers is not None and args.brokers < 1:
        print("ketch up: --brokers must be at least 1", file=sys.stderr)
        return 2
    broker_props = _props(args.broker_prop, "--broker-prop")
    controller_props = _props(args.controller_prop, "--controller-prop")
    try:
        cluster = LocalCluster(args.dir, args.controllers, args.brokers,
                               broker_props=broker_props, controller_props=controller_props,
                               secure=args.secure)
    except ClusterInUseError as e:
        print(f"ketch up: {e}", file=sys.stderr)
        return 1
    except ClusterSizeError as e:
        print(f"ketch up: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"ketch up: cannot use --dir {args.dir}: {e.strerror or e} "
              f"({e.filename or args.dir})", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        inbox = RequestInbox(cluster.dir)
        print(f"ketch: starting {len(cluster.spec.controllers)} controllers and "
              f"{len(cluster.spec.brokers)} brokers in {cluster.dir}", flush=True)
        if not cluster.formatted:
            print(f"ketch: {cluster.dir} holds cluster {cluster.spec.cluster_id}: each node keeps "
                  "its server.properties (hand edits too); this run's --broker-prop/"
                  "--controller-prop are set on top", flush=True)
            for line in _describe_changes(cluster):
                print(line, flush=True)
        if cluster.added_brokers:
            print(f"ketch: added brokers {','.join(map(str, cluster.added_brokers))}; existing "
                  "partitions stay where they are (move some with `ketch reassign`)", flush=True)
        cluster.start(timeout_s=args.timeout)
        print(f"ketch: cluster {cluster.spec.cluster_id} is up", flush=True)
        print(f"bootstrap.servers={cluster.spec.bootstrap_servers}", flush=True)
        if cluster.security is not None:
            path = os.path.join(cluster.dir, cluster.spec.client_properties or "")
            print(f"ketch: TLS and SASL on every broker listener (CA: {cluster.security.ca_path}); "
                  f"client properties, with the admin password, in {path} (mode 0600); the "
                  "ketch verbs with --dir use them. librdkafka / confluent-kafka:", flush=True)
            for key, value in cluster.security.client_props().items():
                print(f"{key}={value}", flush=True)
            print("ketch: Java clients:", flush=True)
            for key, value in cluster.security.java_client_props().items():
                print(f"{key}={value}", flush=True)
        elif args.secure:
            print(f"ketch: --secure applies to a new --dir only; {cluster.dir} was formatted "
                  "without it and stays PLAINTEXT", flush=True)
        scheme = "http" if cluster.security is None else "https"
        for n in cluster.spec.nodes:
            if n.http_port:
                print(f"ketch: {n.role} {n.id} status page, admin API (/v1) and /metrics at "
                      f"{scheme}://127.0.0.1:{n.http_port}/", flush=True)
        if cluster.security is not None:
            print("ketch: the admin API takes HTTP Basic logins (the admin user of the client "
                  "properties) for everything but /, /metrics and the probes", flush=True)
        print(f"ketch: Prometheus: prometheus --config.file="
              f"{os.path.join(cluster.dir, 'prometheus', 'prometheus.yml')}", flush=True)
        print(f"ketch: details in {cluster.json_path}; Ctrl-C stops the cluster", flush=True)
        _watch(cluster, stop, args.restart_dead, inbox)
    except (RuntimeError, TimeoutError, OSError) as e:
        print(f"ketch up: {e}", file=sys.stderr)
        cluster.stop()
        return 1
    except BaseException:
        cluster.stop()      # never leave nodes running behind a crash of ketch up itself
        raise
    print("ketch: stopping (controlled shutdown of the brokers first)", flush=True)
    cluster.stop()
    print("ketch: stopped", flush=True)
    return 0


_ASK_FLAGS = ("controllers", "brokers", "broker_prop", "controller_prop", "secure", "restart_dead")


def _ask_running(args: argparse.Namespace) -> int:
    """``--add-controller`` / ``--remove-controller ID``: asked of the running ``ketch up``."""
    given = [f"--{name.replace('_', '-')}" for name in _ASK_FLAGS if getattr(args, name) not in (None, False, [])]
    if given:
        print(f"ketch up: --add-controller and --remove-controller take only --dir and --timeout, "
              f"not {' '.join(given)}", file=sys.stderr)
        return 2
    if args.add_controller:
        body = {"op": "add-controller", "timeout_s": args.timeout}
    else:
        body = {"op": "remove-controller", "controller_id": args.remove_controller,
                "timeout_s": args.timeout}
    return ask(args.dir, body, args.timeout)


def _carry_out(cluster: LocalCluster, request: Request) -> None:
    """One request of another ``ketch up`` on this directory; its outcome, printed here
    too. A refusal is one line; the cluster runs on either way."""
    def say(line: str) -> None:
        print(line, flush=True)
        request.progress(line)
    op = request.body.get("op")
    flag = f"--{op}" + (f" {request.body.get('controller_id')}" if op == "remove-controller" else "")
    try:
        timeout_s = float(request.body.get("timeout_s", 60.0))
        if op == "add-controller":
            node = cluster.add_controller(timeout_s, progress=say)
            done = f"ketch: controller {node.id} added (asked by another `ketch up`)"
        elif op == "remove-controller":
            node = cluster.remove_controller(int(request.body["controller_id"]), timeout_s)
            done = (f"ketch: controller {node.id} removed (asked by another `ketch up`); its "
                    f"process stopped and its directory {os.path.dirname(node.config)} deleted")
        else:
            request.finish(2, f"ketch up: unknown request {op!r}")
            return
    except Exception as e:      # a refusal or a failure: the cluster runs on
        line = f"ketch up: {flag}: {one_line(e)}"
        print(line, flush=True)
        request.finish(1, line)
        return
    say(done)
    ids = ",".join(str(c.id) for c in cluster.spec.controllers)
    say(f"ketch: the controllers are now {ids}; {cluster.json_path} and every server.properties "
        "name them (the next `ketch up` starts them all as voters)")
    current = {c.id for c in cluster.spec.controllers}
    behind = sorted(b for b, known in cluster.known_controllers.items()
                    if b in cluster.processes and not current <= known)
    if behind:
        # Until brokers follow the voter set: they reach only the controllers they started with.
        say(f"ketch: running brokers {','.join(map(str, behind))} reach only the controllers they "
            "started with until they restart (a restarted broker knows them all): while another "
            "controller leads, they cannot reach it")
    request.finish(0, f"ketch: done; controllers {ids}")


def _watch(cluster: LocalCluster, stop: threading.Event, restart_dead: bool,
           inbox: RequestInbox | None = None) -> None:
    """Until ``stop``: report nodes that exit, and restart them if asked to; carry out
    the requests of other ``ketch up`` processes. A node that dies is not fatal: the rest
    of the cluster keeps serving."""
    backoff = RestartBackoff()
    reported: set[int] = set()
    while not stop.wait(0.5):
        for request in inbox.take() if inbox is not None else ():
            _carry_out(cluster, request)
        now_ms = int(time.monotonic() * 1000)
        for node_id, code in cluster.exited_nodes().items():
            if node_id in reported:
                continue
            reported.add(node_id)
            node = cluster.spec.node(node_id)
            if restart_dead:
                delay_ms = backoff.on_exit(node_id, now_ms)
                print(f"ketch: node {node_id} exited with {code}; restarting {node.role} {node_id} "
                      f"in {delay_ms / 1000:g}s (--restart-dead: the delay doubles while it keeps "
                      f"dying, up to {RESTART_DELAY_MAX_MS // 1000}s); see {node.log}", flush=True)
            else:
                print(f"ketch: node {node_id} exited with {code}; see {node.log}. Restart it by "
                      f"hand with `ketch {node.role} --config {node.config}` (that process is "
                      "yours to stop), or run `ketch up --restart-dead` to have dead nodes "
                      "restarted with backoff", flush=True)
        for node_id in backoff.due(now_ms):
            if stop.is_set():
                break
            proc = cluster.start_node(node_id)
            backoff.on_start(node_id, now_ms)
            reported.discard(node_id)
            print(f"ketch: restarted {cluster.spec.node(node_id).role} {node_id} (pid {proc.pid})",
                  flush=True)


def cmd_node(module: str, args: argparse.Namespace) -> int:
    os.execv(sys.executable, [sys.executable, "-m", module, "--config", args.config])
    return 1  # not reached


UP_EXAMPLES = """\
examples:
  ketch up                                      3 controllers + 3 brokers in ./ketch-data
  ketch up --dir /tmp/dev --controllers 1 --brokers 1
                                                the smallest cluster (see docs/operations.md)
  ketch up --broker-prop auto.create.topics.enable=false
                                                set a key in every broker's server.properties
  ketch up --brokers 5                          on an existing 3-broker DIR: adds brokers 4, 5
  ketch up --restart-dead                       restart nodes that die (1 s, 2 s, ... 30 s)
  ketch up --secure --dir /tmp/sec              TLS + SASL brokers, a CA, an admin user

A later run on the same --dir starts the same cluster with its data, keeps each node's
server.properties (edit them by hand between runs) and prints what --broker-prop /
--controller-prop changed. Brokers can be added, not removed. A DIR another `ketch up`
runs in is refused, naming its pid.

While a cluster runs, a second `ketch up` on its DIR grows or shrinks its controllers
(KIP-853; docs/operations.md):
  ketch up --dir D --add-controller             formats, starts and adds the next controller
  ketch up --dir D --remove-controller 1002     removes it, stops it, deletes its directory
"""


def register(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser("up", help="run a local cluster (3 controllers, 3 brokers)",
                        description="Run a local cluster of controller and broker processes "
                                    "on 127.0.0.1 until Ctrl-C.", epilog=UP_EXAMPLES)
    up.add_argument("--dir", default="./ketch-data", help="where the cluster keeps its data")
    up.add_argument("--controllers", type=int, default=None,
                    help=f"controllers of a new DIR: 1, 3 or 5 (default: {DEFAULT_CONTROLLERS}; "
                         "an existing DIR keeps its own and refuses another count)")
    up.add_argument("--brokers", type=int, default=None,
                    help=f"brokers of a new DIR (default: {DEFAULT_BROKERS}); on an existing DIR "
                         "a larger count adds brokers, a smaller one is refused")
    up.add_argument("--broker-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="set a server.properties key of every broker (repeatable; kept for "
                         "later runs)")
    up.add_argument("--controller-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="the same for every controller")
    up.add_argument("--secure", action="store_true",
                    help="a new DIR: a generated CA, TLS and SASL (SCRAM, PLAIN) on every broker "
                         "listener, an admin user; the client properties are printed")
    up.add_argument("--restart-dead", action="store_true",
                    help="restart a node that exits, after 1 s, doubling while it keeps dying, "
                         f"up to {RESTART_DELAY_MAX_MS // 1000} s")
    change = up.add_mutually_exclusive_group()
    change.add_argument("--add-controller", action="store_true",
                        help="ask the `ketch up` running in DIR to add a controller to the quorum: "
                             "the next id, formatted, started and added once caught up")
    change.add_argument("--remove-controller", type=int, metavar="ID",
                        help="ask the `ketch up` running in DIR to remove controller ID from the "
                             "quorum, stop it and delete its directory")
    up.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for every broker to be registered (with --add-controller "
                         "/ --remove-controller: for the change)")
    up.set_defaults(run=cmd_up)
    for role, module in (("controller", "quorum"), ("broker", "broker")):
        p = sub.add_parser(role, help=f"run one {role} from a server.properties file",
                           description=f"Run one {role} in the foreground (python -m {module}); "
                                       "logs go to stderr, SIGTERM stops it cleanly.",
                           epilog=f"examples:\n  ketch {role} --config ketch-data/{role}-"
                                  f"{1001 if role == 'controller' else 1}/server.properties\n"
                                  "                restart one node of a `ketch up` cluster by hand\n"
                                  "docs/operations.md shows the keys, with a single-node example.")
        p.add_argument("--config", required=True, help="the node's server.properties (Kafka's keys)")
        p.set_defaults(run=lambda args, module=module: cmd_node(module, args))
