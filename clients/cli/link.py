"""``ketch link create|list|describe|delete``: cluster links (issue 21), the destination's
record of a source cluster to mirror topics from.

A link is a config resource of the destination cluster (Ketch's CLUSTER_LINK type):
``create`` writes its configs with IncrementalAlterConfigs, ``describe`` reads them with
DescribeConfigs (defaults shown, secrets such as ``sasl.password`` hidden), ``delete``
removes every key, which the controller refuses while a mirror topic (active or stopped)
uses the link. Keys: ``bootstrap.servers`` (required), ``topics`` (comma-separated
regexes matched in full against source topic names), the source's security
(``security.protocol``, ``sasl.*``, ``ssl.*``, with the names Ketch's client takes),
``consumer.offset.sync.enable`` / ``.groups`` / ``.ms``, ``topic.config.sync.ms``,
``metadata.max.age.ms``.

``describe`` also shows, with a ``ketch up`` directory, each mirror partition of the link
from every broker's ``GET /v1/mirrors`` (state, lag, last error): the lag of a partition
is the source's high watermark minus the local log end offset.
"""
from __future__ import annotations

import argparse

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch link create east --source 10.0.0.5:9092 --topics 'orders,audit-.*'
  ketch link create east --source 10.0.0.5:9093 -c security.protocol=SASL_SSL \\
      -c sasl.mechanism=SCRAM-SHA-512 -c sasl.username=mirror -c sasl.password=secret \\
      -c consumer.offset.sync.enable=true -c 'consumer.offset.sync.groups=.*'
  ketch link list
  ketch link describe east --output json
  ketch link delete east
"""


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "link", "cluster links: source clusters to mirror from",
                                 __doc__, EXAMPLES)
    a = action("create", "create a link to a source cluster", create)
    a.add_argument("name", help="the link's name")
    a.add_argument("--source", required=True, metavar="HOST:PORT[,...]",
                   help="the source cluster's bootstrap servers")
    a.add_argument("--topics", default="", metavar="REGEX[,...]",
                   help="source topics to mirror (full-match regexes; a plain name is one)")
    a.add_argument("-c", "--config", dest="configs", action="append", default=[], metavar="KEY=VALUE",
                   help="another link config (repeatable)")
    a.add_argument("--dry-run", action="store_true", help="validate only, create nothing")
    action("list", "every link and its source", list_)
    a = action("describe", "a link's configs and its mirror partitions' state and lag", describe)
    a.add_argument("name")
    a = action("delete", "delete a link (refused while mirror topics use it)", delete)
    a.add_argument("name")


def create(args: argparse.Namespace) -> int:
    configs = {"bootstrap.servers": args.source}
    if args.topics:
        configs["topics"] = args.topics
    configs.update(c.parse_kv(args.configs, "create"))
    with c.admin(args) as admin:
        admin.create_cluster_link(args.name, configs, validate_only=args.dry_run)
    c.emit(args, {"link": args.name, "created": not args.dry_run},
           rows=[{"link": args.name, "created": not args.dry_run}])
    return 0


def list_(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        links = admin.list_cluster_links()
    rows = [{"link": n, "bootstrap_servers": s} for n, s in links.items()]
    c.emit(args, rows, ["link", "bootstrap_servers"])
    return 0


def mirror_partitions(args: argparse.Namespace, link: str | None = None) -> list[dict] | None:
    """Every broker's ``/v1/mirrors`` rows of ``link`` (None: all links), or None when no
    broker's HTTP API is known or none serves the route (a build without mirror topics)."""
    rows = mirror_partitions_of(c.broker_http(args))
    return None if rows is None else [r for r in rows if link is None or r.get("link") == link]


def mirror_partitions_of(http: dict[int, c.HttpNode]) -> list[dict] | None:
    """The rows of every broker in ``http`` (id -> its HTTP API) that answers ``/v1/mirrors``
    (each broker lists the mirror partitions it leads); None when none answers."""
    rows: list[dict] = []
    answered = False
    for _, node in sorted(http.items()):
        got = node.get_json("/v1/mirrors")
        if isinstance(got, dict):
            got = got.get("mirrors")
        if not isinstance(got, list):
            continue
        answered = True
        rows += [r for r in got if isinstance(r, dict)]
    if not answered:
        return None
    return sorted(rows, key=lambda r: (str(r.get("link")), str(r.get("topic")), r.get("partition", 0)))


def describe(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        entries = admin.describe_cluster_link(args.name)
        mirrors = {t: m for t, m in admin.list_mirror_topics().items() if m["link"] == args.name}
    configs = [{"key": e.name, "value": "(hidden)" if e.sensitive else e.value,
                "default": e.is_default} for e in sorted(entries.values(), key=lambda e: e.name)]
    partitions = mirror_partitions(args, args.name)
    view = {"link": args.name, "configs": configs,
            "mirror_topics": [{"topic": t, **m} for t, m in sorted(mirrors.items())],
            "partitions": partitions}
    if args.output == "json":
        c.print_json(view)
        return 0
    print(f"link {args.name}")
    c.print_table(["KEY", "VALUE", "DEFAULT"], [[r["key"], r["value"], r["default"]] for r in configs])
    print()
    c.print_table(["MIRROR TOPIC", "SOURCE TOPIC", "STATE"],
                  [[m["topic"], m["source_topic"], m["state"]] for m in view["mirror_topics"]])
    print()
    if partitions is None:
        print("partition state and lag: unknown (no broker HTTP API answered /v1/mirrors; "
              "use --dir with a `ketch up` cluster)")
    else:
        c.print_table(["TOPIC", "PARTITION", "STATE", "LAG", "LAST ERROR"],
                      [[p.get("topic"), p.get("partition"), p.get("state"), p.get("lag"),
                        p.get("last_error") or ""] for p in partitions])
    return 0


def delete(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        admin.delete_cluster_link(args.name)
    c.emit(args, {"link": args.name, "deleted": True}, rows=[{"link": args.name, "deleted": True}])
    return 0
