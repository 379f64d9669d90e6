"""What ``ketch quorum``, ``ketch leader-election`` and ``ketch reassign`` share: the admin
clients they need, built from the command line, and their output and error handling.

The cluster is found as every verb finds it (``--bootstrap``, ``KETCH_BOOTSTRAP``, or
``--dir`` of a ``ketch up`` cluster), with ``-X key=value`` client properties and
``--output table|json``. These verbs add Kafka's ``--bootstrap-controller HOST:PORT,...``
(KIP-919): the controller calls (DescribeQuorum, ElectLeaders, reassignments) then go to
the controllers directly, without a broker in between. With ``--dir``, the controllers of
the ``ketch up`` cluster are known too.

A user error (a bad plan, an unknown topic, an unreachable cluster) prints one line and
exits 1; ``--debug`` shows the traceback.

TODO(issue 12): the shared ``clients/cli/_common.py`` (another helper's) was not there
when these verbs were written; the helpers below follow its described interface and
should defer to it once it lands.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any, Callable, Sequence

from clients._core.reassignment import PlanError
from clients.aio.admin import Admin
from clients.aio.controller_admin import ControllerAdmin
from clients.errors import KafkaApiError, KafkaTimeoutError, UnsupportedVersionError

__all__ = ["add_connection_args", "broker_admin", "guarded", "print_json", "print_table",
           "quorum_admin", "CliError"]

ADMIN_TIMEOUT_MS = 30_000


class CliError(Exception):
    """A user error: its message is the one line the command prints."""


def add_connection_args(p: argparse.ArgumentParser, *, controllers: bool) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--bootstrap", "-b", metavar="HOST:PORT[,...]",
                   help="brokers to start from (default: $KETCH_BOOTSTRAP, or --dir)")
    g.add_argument("--dir", metavar="DIR", help="the directory of a `ketch up` cluster (its cluster.json)")
    if controllers:
        g.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                       help="ask the controllers directly, no broker needed (KIP-919)")
    g.add_argument("-X", dest="props", action="append", default=[], metavar="KEY=VALUE",
                   help="a client property (e.g. -X request.timeout.ms=5000)")
    p.add_argument("--output", "-o", choices=("table", "json"), default="table",
                   help="table for people, json for scripts (default: %(default)s)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _props(args: argparse.Namespace) -> dict[str, str]:
    out = {"default.api.timeout.ms": str(ADMIN_TIMEOUT_MS)}
    for item in args.props:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"-X takes KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _cluster_json(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, "cluster.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise CliError(f"{directory} is not a `ketch up` cluster directory (no cluster.json)") from None
    except (OSError, ValueError) as e:
        raise CliError(f"cannot read {path}: {e}") from None


def _bootstrap(args: argparse.Namespace) -> str:
    if args.bootstrap:
        return args.bootstrap
    if os.environ.get("KETCH_BOOTSTRAP"):
        return os.environ["KETCH_BOOTSTRAP"]
    if args.dir:
        servers = _cluster_json(args.dir).get("bootstrap_servers")
        if servers:
            return servers
    raise CliError("no cluster given: use --bootstrap HOST:PORT, KETCH_BOOTSTRAP, or --dir "
                   "of a `ketch up` cluster")


def _controllers(args: argparse.Namespace) -> str | None:
    given = getattr(args, "bootstrap_controller", None)
    if given:
        return given
    if args.dir and not args.bootstrap:
        nodes = _cluster_json(args.dir).get("nodes", [])
        found = [f"127.0.0.1:{n['port']}" for n in nodes if n.get("role") == "controller"]
        return ",".join(found) or None
    return None


def broker_admin(args: argparse.Namespace) -> Admin:
    """The admin client through the brokers (topics, configs, metadata)."""
    try:
        return Admin({"bootstrap.servers": _bootstrap(args), "client.id": "ketch-cli", **_props(args)})
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None


def quorum_admin(args: argparse.Namespace) -> Admin:
    """The admin client for controller calls: the controllers themselves when known
    (--bootstrap-controller, or --dir), else through the brokers."""
    controllers = _controllers(args)
    try:
        if controllers:
            return ControllerAdmin(controllers, {"client.id": "ketch-cli", **_props(args)})
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    return broker_admin(args)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a verb: user errors become one line on stderr and exit code 1."""
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except KeyboardInterrupt:
            return 130
        except (CliError, PlanError, KafkaApiError, KafkaTimeoutError, ConnectionError,
                OSError, ValueError) as e:
            if getattr(args, "debug", False):
                traceback.print_exc()
            prog = f"ketch {args.command}"
            hint = ""
            if isinstance(e, UnsupportedVersionError) and "broker supports versions none" in str(e):
                hint = " (these brokers do not forward it: ask the controllers with --bootstrap-controller)"
            print(f"{prog}: {_one_line(e)}{hint}", file=sys.stderr)
            return 1
    return run
