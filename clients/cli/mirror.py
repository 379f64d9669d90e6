"""``ketch mirror create|list|promote|restore``: mirror topics (issue 21).

A mirror topic follows a topic of a link's source cluster with the same partitions,
offsets and batches, and is read-only while it mirrors. ``create`` adds the source
topic's name to the link's ``topics`` (the link manager creates the mirror topic at its
next look at the source); ``list`` shows every mirror topic's link, source topic and state
(``active``, ``stopped``: its source topic was deleted, ``promoted``); ``promote`` makes
mirror topics writable at their current end, for failover (``ketch.mirror.state=promoted``);
``restore`` (truncate-and-restore) makes a promoted topic, or a former source, follow the
link's source again: it truncates to where the two diverged and follows from there.
"""
from __future__ import annotations

import argparse

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch mirror create orders --link east
  ketch mirror list
  ketch mirror promote orders payments
  ketch mirror restore orders --link west
"""


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "mirror", "mirror topics: create, list, promote, restore",
                                 __doc__, EXAMPLES)
    a = action("create", "mirror a source topic through a link", create)
    a.add_argument("topic", help="the source topic (the mirror gets the same name)")
    a.add_argument("--link", required=True)
    action("list", "every mirror topic, its link, source topic and state", list_)
    a = action("promote", "make mirror topics writable (failover)", promote)
    a.add_argument("topics", nargs="+", metavar="TOPIC")
    a = action("restore", "make a topic follow a link's source again (truncate-and-restore)", restore)
    a.add_argument("topic")
    a.add_argument("--link", required=True)
    a.add_argument("--source-topic", help="the source topic (default: the same name)")


def create(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        admin.create_mirror_topic(args.topic, args.link)
    c.emit(args, {"topic": args.topic, "link": args.link, "requested": True},
           rows=[{"topic": args.topic, "link": args.link,
                  "requested": "yes: created at the link's next look at the source"}])
    return 0


def list_(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        mirrors = admin.list_mirror_topics()
    rows = [{"topic": t, **m} for t, m in mirrors.items()]
    c.emit(args, rows, ["topic", "link", "source_topic", "state"])
    return 0


def promote(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        mirrors = admin.list_mirror_topics()
        for topic in args.topics:
            if topic not in mirrors:
                raise c.CliError(f"topic {topic!r} is not a mirror topic")
        admin.promote_mirror_topics(args.topics)
    c.emit(args, [{"topic": t, "state": "promoted"} for t in args.topics], ["topic", "state"])
    return 0


def restore(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        admin.restore_mirror_topic(args.topic, args.link, args.source_topic)
    c.emit(args, {"topic": args.topic, "link": args.link, "state": "active"},
           rows=[{"topic": args.topic, "link": args.link, "state": "active"}])
    return 0
