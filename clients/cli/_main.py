"""The ``ketch`` command: one parser, each verb registered by its own module.

A verb module defines ``register(subparsers)``, which adds its sub-parser and sets
``run=<function(args) -> exit code>`` as the parser's default.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# Verb modules under clients.cli, in the order ``ketch --help`` lists them.
VERBS: tuple[str, ...] = ("up", "quorum", "leader_election", "reassign")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ketch", description="Ketch: a Kafka-compatible streaming platform.")
    sub = ap.add_subparsers(dest="command", required=True)
    for name in VERBS:
        importlib.import_module(f"clients.cli.{name}").register(sub)
    sub.add_parser("chaos", add_help=False,
                   help="the chaos suite: ketch chaos run [--scenario ID ...] [--rounds N] [--json FILE]")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["chaos"]:
        # Its own module, every argument passed on (clients imports nothing from chaos).
        os.execv(sys.executable, [sys.executable, "-m", "chaos", *argv[1:]])
    args = build_parser().parse_args(argv)
    return args.run(args)
