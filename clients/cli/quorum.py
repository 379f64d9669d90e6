"""``ketch quorum``: being written in this session (issue 12, part C); not usable yet."""
from __future__ import annotations

import argparse
import sys


def _run(args: argparse.Namespace) -> int:
    print("ketch quorum: not implemented yet", file=sys.stderr)
    return 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quorum", help="(not implemented yet)")
    p.set_defaults(run=_run)
