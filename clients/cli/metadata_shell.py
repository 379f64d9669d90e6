"""``ketch metadata-shell DIR [COMMAND]``: browse a controller's metadata image offline
(kafka-metadata-shell), read-only, from its data directory (Raft dump + journal).

DIR is a controller's data directory, or the directory of a ``ketch up`` cluster (its
first controller's is used; ``--controller ID`` picks another). With a COMMAND (``ls``,
``cat``, ``tree``, ``find``) it runs that and exits; without, it reads commands from stdin
(``cd``, ``ls``, ``cat``, ``pwd``, ``exit``). ``--output json`` prints the image (or the
node at PATH) with where it came from.

The image is rebuilt by ``quorum.offline_image`` (the quorum's own dump, journal and
replay code). ``clients`` may not import ``quorum`` (tests/test_layering.py), so, like
``ketch chaos``, this verb hands its arguments to that module's ``main`` in a new process
image (``os.execv``): only the argument parsing and the choice of directory live here.
"""
from __future__ import annotations

import argparse
import os
import sys

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch metadata-shell ./ketch-data ls /topics
  ketch metadata-shell ./ketch-data cat /topics/orders/0
  ketch metadata-shell ./ketch-data/controller-1001/data --output json /brokers
  ketch metadata-shell ./ketch-data                  # interactive: cd, ls, cat, pwd, exit
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metadata-shell", help="browse a controller's metadata image offline",
                       description=__doc__.split("\n\n")[0].replace("``", ""), epilog=EXAMPLES)
    p.add_argument("dir", metavar="DIR", help="a controller's data directory, or a `ketch up` directory")
    p.add_argument("words", nargs=argparse.REMAINDER, metavar="COMMAND",
                   help="ls|cat|tree|find [PATH] (options may follow it)")
    p.add_argument("--controller", type=int, metavar="ID",
                   help="with a `ketch up` DIR: this controller's data (default: the first)")
    c.add_output_args(p)
    p.set_defaults(run=c.guarded(run))


def data_dir(args: argparse.Namespace) -> str:
    if not os.path.exists(os.path.join(args.dir, "cluster.json")):
        if args.controller is not None:
            raise c.CliError("--controller needs the directory of a `ketch up` cluster")
        return args.dir
    nodes = [n for n in c.cluster_json(args.dir).get("nodes", []) if n.get("role") == "controller"]
    if args.controller is not None:
        nodes = [n for n in nodes if n.get("id") == args.controller]
        if not nodes:
            raise c.CliError(f"{args.dir} has no controller {args.controller}")
    if not nodes:
        raise c.CliError(f"{args.dir}/cluster.json names no controller")
    return nodes[0]["data_dir"]


def run(args: argparse.Namespace) -> int:
    # The user's own options after the command (REMAINDER) come last, so they win.
    argv = [sys.executable, "-m", "quorum.offline_image", data_dir(args), "--output", args.output,
            *(["--debug"] if args.debug else []), *args.words]
    sys.stdout.flush()
    os.execv(sys.executable, argv)
    return 0  # not reached
