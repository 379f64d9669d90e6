"""``ketch leader-election``: being written in this session (issue 12, part C); not usable yet."""
from __future__ import annotations

import argparse
import sys


def _run(args: argparse.Namespace) -> int:
    print("ketch leader-election: not implemented yet", file=sys.stderr)
    return 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leader-election", help="(not implemented yet)")
    p.set_defaults(run=_run)
