"""What every everyday ``ketch`` verb shares: finding the cluster, client properties,
output (tables for people, JSON for scripts) and how a user error ends a command.

Theory of operation. A verb's ``register`` calls ``add_cluster_args`` (``--bootstrap``,
``--dir``, ``-X``) and ``add_output_args`` (``--output``, ``--debug``) and sets its
``run`` to a function wrapped in ``guarded``. The cluster is found in this order:
``--bootstrap HOST:PORT,...``, then ``$KETCH_BOOTSTRAP``, then ``--dir`` of a ``ketch up``
cluster (its cluster.json names the brokers), then ``./ketch-data`` (``ketch up``'s
default directory) when it holds a cluster.json. ``-X key=value`` goes into the client's
config as given, so any client property can be set (an unknown one is refused by the
client's own config parser, as one line).

Errors: ``CliError`` (and the client's errors: a Kafka error code, a timeout, an
unreachable cluster, a bad config value) print ONE line ``ketch VERB: message`` on stderr
and exit 1; argparse's usage errors exit 2; ``--debug`` prints the traceback as well.
Ctrl-C exits 130 after the verb's own cleanup (``finally`` blocks run).

JSON output uses snake_case field names that do not change between releases; tables are
plain aligned columns (``rich`` would add a dependency for nothing a CLI piping into
``column -t`` or ``jq`` needs).
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from clients.errors import KafkaClientError
from clients.protocol.errors import KafkaApiError

__all__ = [
    "CliError", "add_cluster_args", "add_output_args", "admin", "bootstrap", "client_props",
    "cluster_client_properties",
    "guarded", "emit", "print_json", "print_table", "parse_kv",
]

# A CLI call should answer within this unless -X default.api.timeout.ms says otherwise.
ADMIN_TIMEOUT_MS = 30_000
# Where `ketch up` puts a cluster by default; used when nothing else names one.
DEFAULT_DIR = "./ketch-data"


class CliError(Exception):
    """A user error: its message is the one line the command prints."""


def verb_with_actions(sub: argparse._SubParsersAction, name: str, help: str, doc: str | None,
                      examples: str,
                      common: Callable[[argparse.ArgumentParser], None] | None = None,
                      ) -> Callable[[str, str, Callable[[argparse.Namespace], int]], argparse.ArgumentParser]:
    """A verb whose actions share the cluster and output options (``ketch topic create``).

    Returns ``action(name, help, fn)``, which adds one action (``common`` adds the options
    every action of the verb takes) and returns its parser for action-specific options."""
    p = sub.add_parser(name, help=help, description=(doc or "").split("\n\n")[0].replace("``", ""),
                       epilog=examples)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(action_name: str, action_help: str, fn: Callable[[argparse.Namespace], int]
               ) -> argparse.ArgumentParser:
        a = actions.add_parser(action_name, help=action_help, epilog=examples)
        if common is not None:
            common(a)
        add_cluster_args(a)
        add_output_args(a)
        a.set_defaults(run=guarded(fn))
        return a
    return action


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--bootstrap", "-b", metavar="HOST:PORT[,...]",
                   help="brokers to start from (default: $KETCH_BOOTSTRAP, or --dir)")
    g.add_argument("--dir", metavar="DIR",
                   help="the directory of a `ketch up` cluster (its cluster.json)")
    g.add_argument("-X", dest="props", action="append", default=[], metavar="KEY=VALUE",
                   help="a client property, repeatable (e.g. -X request.timeout.ms=5000)")


def add_output_args(p: argparse.ArgumentParser, *, output: bool = True) -> None:
    if output:
        p.add_argument("--output", "-o", choices=("table", "json"), default="table",
                       help="table for people, json for scripts")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def parse_kv(items: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{what} takes KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def cluster_json(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, "cluster.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise CliError(f"{directory} is not a `ketch up` cluster directory (no cluster.json)") from None
    except (OSError, ValueError) as e:
        raise CliError(f"cannot read {path}: {e}") from None


def bootstrap(args: argparse.Namespace) -> str:
    if getattr(args, "bootstrap", None):
        return args.bootstrap
    if os.environ.get("KETCH_BOOTSTRAP"):
        return os.environ["KETCH_BOOTSTRAP"]
    if getattr(args, "dir", None):
        servers = cluster_json(args.dir).get("bootstrap_servers")
        if servers:
            return servers
        raise CliError(f"{args.dir}/cluster.json names no brokers")
    if os.path.exists(os.path.join(DEFAULT_DIR, "cluster.json")):
        # `ketch up`'s own default directory, here: the cluster a new user just started.
        return bootstrap(argparse.Namespace(dir=DEFAULT_DIR))
    raise CliError("no cluster given: use --bootstrap HOST:PORT, KETCH_BOOTSTRAP, or --dir "
                   f"of a `ketch up` cluster (none in {DEFAULT_DIR})")


def client_props(args: argparse.Namespace, **defaults: Any) -> dict[str, Any]:
    """The client config: bootstrap, the cluster's own client properties (a ``ketch up
    --secure`` directory's TLS and SASL settings), the verb's defaults, then -X (the
    user's word wins)."""
    return {"bootstrap.servers": bootstrap(args), "client.id": "ketch-cli",
            **cluster_client_properties(args), **defaults,
            **parse_kv(getattr(args, "props", []), "-X")}


def cluster_client_properties(args: argparse.Namespace) -> dict[str, str]:
    """The client.properties a secured ``ketch up`` directory names, when the cluster
    comes from that directory (not from --bootstrap or KETCH_BOOTSTRAP)."""
    from clients.properties import load_properties
    if getattr(args, "bootstrap", None) or os.environ.get("KETCH_BOOTSTRAP"):
        return {}
    directory = getattr(args, "dir", None) or (
        DEFAULT_DIR if os.path.exists(os.path.join(DEFAULT_DIR, "cluster.json")) else None)
    if not directory:
        return {}
    name = cluster_json(directory).get("client_properties")
    if not name:
        return {}
    try:
        return load_properties(os.path.join(directory, name))
    except OSError as e:
        raise CliError(f"{directory}/{name}: {e.strerror or e}") from None


def admin(args: argparse.Namespace):
    """Ketch's blocking admin client for this command's cluster. A verb whose main client
    is a producer or consumer also asks an admin client (does the topic exist?); of -X,
    that one takes only the keys an admin client has (the main client checks the rest)."""
    from clients._core.config import config_keys
    from clients.admin import Admin
    props = client_props(args, **{"default.api.timeout.ms": ADMIN_TIMEOUT_MS})
    if getattr(args, "command", None) in ("produce", "consume"):
        known = {k.name for k in config_keys("admin")}
        props = {k: v for k, v in props.items() if k in known}
    try:
        return Admin(props)
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None


@dataclass(frozen=True)
class HttpNode:
    """One node's HTTP admin API, as this command reaches it: HTTPS checked against the
    cluster's CA and Basic credentials when its client properties have them (a ``ketch up
    --secure`` directory: the admin user)."""
    base: str                                   # http(s)://127.0.0.1:PORT
    ssl_context: Any = None
    authorization: str | None = field(default=None, repr=False)

    def get_json(self, path: str, timeout_s: float = 3.0) -> Any | None:
        """GET a JSON document; None when the node does not answer (it is down, or fenced
        and restarting) or refuses: the caller reports the field as unknown."""
        import urllib.error
        import urllib.request
        headers = {} if self.authorization is None else {"Authorization": self.authorization}
        try:
            with urllib.request.urlopen(urllib.request.Request(self.base + path, headers=headers),
                                        timeout=timeout_s, context=self.ssl_context) as r:
                return json.loads(r.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None


def broker_http(args: argparse.Namespace) -> dict[int, HttpNode]:
    """Each broker's HTTP admin API (``/v1/...``) when the cluster came from a ``ketch up``
    directory (its cluster.json names the ports); {} otherwise. Kafka's protocol has no
    call for a few things an operator wants (a leader's log end offset, whether a broker
    is fenced); the verbs add them from here when they can, and say "unknown" when not."""
    directory = getattr(args, "dir", None)
    if getattr(args, "bootstrap", None) or os.environ.get("KETCH_BOOTSTRAP"):
        return {}
    if not directory:
        directory = DEFAULT_DIR if os.path.exists(os.path.join(DEFAULT_DIR, "cluster.json")) else None
    if not directory:
        return {}
    props = cluster_client_properties(args)
    scheme, context, authorization = "http", None, None
    if props.get("ssl.ca.location"):
        from clients.security.tls import client_ssl_context
        scheme, context = "https", client_ssl_context(props.get)
    if props.get("sasl.username"):
        token = f"{props['sasl.username']}:{props.get('sasl.password', '')}".encode()
        authorization = "Basic " + base64.b64encode(token).decode()
    return {n["id"]: HttpNode(f"{scheme}://127.0.0.1:{n['http_port']}", context, authorization)
            for n in cluster_json(directory).get("nodes", [])
            if n.get("role") == "broker" and n.get("http_port")}


# ------------------------------------------------------------------ output

def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [["" if c is None else _cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def _cell(c: Any) -> str:
    if isinstance(c, (list, tuple)):
        return ",".join(str(x) for x in c)
    return str(c)


def emit(args: argparse.Namespace, value: Any, headers: Sequence[str] | None = None,
         rows: Sequence[Mapping[str, Any]] | None = None) -> None:
    """``value`` as JSON, or ``rows`` (default: ``value``) as a table of ``headers``."""
    if getattr(args, "output", "table") == "json":
        print_json(value)
        return
    rows = value if rows is None else rows
    if headers is None:
        headers = list(rows[0].keys()) if rows else []
    if headers:
        print_table([h.upper() for h in headers], [[r.get(h) for h in headers] for r in rows])


# ------------------------------------------------------------------ errors

def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a verb: a user error becomes one line on stderr and exit code 1."""
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            # `ketch consume ... | head`: the reader left; not an error worth a line.
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            return 0
        except (CliError, KafkaClientError, KafkaApiError, ConnectionError, OSError, ValueError, TimeoutError) as e:
            if getattr(args, "debug", False):
                traceback.print_exc()
            print(f"ketch {args.command}: {one_line(e)}", file=sys.stderr)
            return 1
    return run
