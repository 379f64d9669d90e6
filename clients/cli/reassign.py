"""``ketch reassign``: being written in this session (issue 12, part C); not usable yet."""
from __future__ import annotations

import argparse
import sys


def _run(args: argparse.Namespace) -> int:
    print("ketch reassign: not implemented yet", file=sys.stderr)
    return 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reassign", help="(not implemented yet)")
    p.set_defaults(run=_run)
