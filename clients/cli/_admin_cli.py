"""What ``ketch quorum``, ``ketch leader-election`` and ``ketch reassign`` add to the shared
verb helpers (``clients/cli/_common.py``): the controllers.

The cluster is found as every verb finds it (``--bootstrap``, ``KETCH_BOOTSTRAP``, or
``--dir`` of a ``ketch up`` cluster; ``-X key=value``; ``--output table|json``). These
verbs add Kafka's ``--bootstrap-controller HOST:PORT,...`` (KIP-919): the controller calls
(DescribeQuorum, ElectLeaders, reassignments) then go to the controllers directly, with
no broker in between. With ``--dir`` (and no ``--bootstrap``), the controllers of the
``ketch up`` cluster are used the same way.

The admin clients here are the asyncio ones (``clients.aio``): a verb runs one
``asyncio.run`` and may hold a broker client and a controller client at once.
"""
from __future__ import annotations

import argparse
from typing import Callable

from clients.aio.admin import Admin
from clients.aio.controller_admin import ControllerAdmin
from clients.cli._common import (
    ADMIN_TIMEOUT_MS, CliError, add_cluster_args, add_output_args, bootstrap, cluster_json,
    cluster_client_properties, guarded as _guarded, parse_kv, print_json, print_table,
)
from clients.errors import UnsupportedVersionError

__all__ = ["CliError", "add_connection_args", "broker_admin", "guarded", "print_json",
           "print_table", "quorum_admin"]


def add_connection_args(p: argparse.ArgumentParser, *, controllers: bool) -> None:
    add_cluster_args(p)
    if controllers:
        p.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                       help="ask the controllers directly, no broker needed (KIP-919)")
    add_output_args(p)


def _props(args: argparse.Namespace) -> dict[str, str | int]:
    # A secured `ketch up` directory's TLS and SASL settings: its controllers' listener
    # takes the same login as its brokers'.
    return {"client.id": "ketch-cli", "default.api.timeout.ms": ADMIN_TIMEOUT_MS,
            **cluster_client_properties(args), **parse_kv(getattr(args, "props", []), "-X")}


def _controllers(args: argparse.Namespace) -> str | None:
    given = getattr(args, "bootstrap_controller", None)
    if given:
        return given
    if getattr(args, "dir", None) and not getattr(args, "bootstrap", None):
        nodes = cluster_json(args.dir).get("nodes", [])
        found = [f"127.0.0.1:{n['port']}" for n in nodes if n.get("role") == "controller"]
        return ",".join(found) or None
    return None


def broker_admin(args: argparse.Namespace) -> Admin:
    """The asyncio admin client through the brokers (topics, configs, metadata)."""
    try:
        return Admin({"bootstrap.servers": bootstrap(args), **_props(args)})
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None


def quorum_admin(args: argparse.Namespace) -> Admin:
    """The admin client for controller calls: the controllers themselves when known
    (--bootstrap-controller, or --dir), else through the brokers."""
    controllers = _controllers(args)
    if controllers is None:
        return broker_admin(args)
    try:
        return ControllerAdmin(controllers, _props(args))
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None


def guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``_common.guarded``, and a hint when a broker does not forward a controller API."""
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except UnsupportedVersionError as e:
            if "broker supports versions none" not in str(e):
                raise
            raise CliError(f"{e} (these brokers do not forward it: ask the controllers "
                           f"with --bootstrap-controller)") from e
    return _guarded(run)
