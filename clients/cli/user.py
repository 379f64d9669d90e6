"""``ketch user create|delete|list``: SCRAM users (kafka-configs --entity-type users
--alter --add-config 'SCRAM-SHA-512=[password=...]').

``create`` sets (or replaces) a user's password for each ``--mechanism`` (default both
SCRAM-SHA-256 and SCRAM-SHA-512); the password is salted and hashed here, as Kafka's Admin
does, and only the salted password reaches the cluster, which keeps the verifier in its
metadata log. The password comes from ``--password-file``, ``$KETCH_USER_PASSWORD`` or a
prompt (never a command-line argument: it would show in ``ps``). ``delete`` removes the
user's credentials (each ``--mechanism``, default every one the user has). ``list`` shows
users and their mechanisms and iteration counts, never a key.
"""
from __future__ import annotations

import argparse
import getpass
import os

from clients.cli import _common as c

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

EXAMPLES = """examples:
  ketch user create alice                         (prompts for the password)
  KETCH_USER_PASSWORD=s3cret ketch user create alice --mechanism SCRAM-SHA-512
  ketch user list --output json
  ketch user delete alice
  ketch user list -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 \\
      -X sasl.username=admin -X sasl.password=... -X ssl.ca.location=ca.pem
"""


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "user", "create, delete and list SCRAM users", __doc__, EXAMPLES)
    a = action("create", "set a user's SCRAM password (AlterUserScramCredentials)", create)
    a.add_argument("name")
    a.add_argument("--mechanism", action="append", choices=MECHANISMS,
                   help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (default: both)")
    a.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations (4096-16384)")
    a.add_argument("--password-file", metavar="PATH", help="read the password from this file's first line")
    a = action("delete", "remove a user's SCRAM credentials", delete)
    a.add_argument("name")
    a.add_argument("--mechanism", action="append", choices=MECHANISMS,
                   help="the mechanism(s) to remove (default: every one the user has)")
    action("list", "users with SCRAM credentials", list_)


def _password(args: argparse.Namespace) -> str:
    if args.password_file:
        try:
            with open(args.password_file) as f:
                password = f.readline().rstrip("\n")
        except OSError as e:
            raise c.CliError(f"--password-file: {e}") from None
    elif os.environ.get("KETCH_USER_PASSWORD"):
        password = os.environ["KETCH_USER_PASSWORD"]
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if password != getpass.getpass("again: "):
            raise c.CliError("the passwords differ")
    if not password:
        raise c.CliError("the password must not be empty")
    return password


def create(args: argparse.Namespace) -> int:
    from clients.admin import UserScramCredentialUpsertion
    password = _password(args)
    mechanisms = args.mechanism or list(MECHANISMS)
    with c.admin(args) as admin:
        admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(args.name, m, password, args.iterations) for m in mechanisms])
    c.emit(args, [{"user": args.name, "mechanism": m, "iterations": args.iterations, "created": True}
                  for m in mechanisms], ["user", "mechanism", "iterations", "created"])
    return 0


def delete(args: argparse.Namespace) -> int:
    from clients.admin import UserScramCredentialDeletion
    with c.admin(args) as admin:
        mechanisms = args.mechanism or [i.mechanism for i in
                                        admin.describe_user_scram_credentials([args.name])[args.name]]
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(args.name, m) for m in mechanisms])
    c.emit(args, [{"user": args.name, "mechanism": m, "deleted": True} for m in mechanisms],
           ["user", "mechanism", "deleted"])
    return 0


def list_(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        users = admin.describe_user_scram_credentials()
    rows = [{"user": user, "mechanism": info.mechanism, "iterations": info.iterations}
            for user in sorted(users) for info in users[user]]
    c.emit(args, rows, ["user", "mechanism", "iterations"])
    return 0
