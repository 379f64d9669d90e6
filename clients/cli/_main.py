"""The ``ketch`` command: one parser, each verb registered by its own module.

A verb module defines ``register(subparsers)``, which adds its sub-parser and sets
``run=<function(args) -> exit code>`` as the parser's default. Every parser under ``ketch``
is a ``KetchParser``: its help shows each option's default and prints the ``epilog`` (a
verb's examples) as written.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys

# Verb modules under clients.cli, in the order ``ketch --help`` lists them.
VERBS: tuple[str, ...] = ("up", "quorum", "leader_election", "reassign", "log_dirs", "topic",
                          "produce", "consume", "group", "dlq", "transactions", "config", "quota",
                          "acl", "user", "feature", "cluster", "link", "mirror",
                          "dump_log", "metadata_shell")


EXAMPLES = """\
examples:
  ketch up --dir ./ketch-data                   run a local cluster (3 controllers, 3 brokers)
  ketch up --controllers 1 --brokers 1          the smallest one
  ketch up --restart-dead                       and restart nodes that die
  ketch VERB --help                             a verb's options, defaults and examples
"""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults in the help (but not the empty ones: None, False, []); epilogs as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, []) or "default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class KetchParser(argparse.ArgumentParser):
    """Sub-parsers inherit the class (argparse's add_subparsers), so every verb gets it."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def version() -> str:
    try:
        return importlib.metadata.version("ketch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def build_parser() -> argparse.ArgumentParser:
    ap = KetchParser(prog="ketch", description="Ketch: a Kafka-compatible streaming platform.",
                     epilog=EXAMPLES)
    ap.add_argument("--version", action="version", version=f"ketch {version()}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="VERB")
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
