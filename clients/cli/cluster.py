"""``ketch cluster info|health|decommission``: brokers, the active controller and the partitions that
need attention (rpk cluster info / health, kafka-topics --under-replicated-partitions).

Sources, all through Ketch's admin client: DescribeCluster (cluster id and the brokers a
broker knows as live: unfenced), DescribeQuorum (the active controller, its epoch),
Metadata for every topic (leaders, replicas, ISR) and each topic's
``min.insync.replicas`` (DescribeConfigs). A partition is *offline* with no leader,
*under-replicated* when its ISR is smaller than its replica set, *under-min-ISR* when
its ISR is smaller than ``min.insync.replicas``. A broker named in a replica set but not
live is listed with ``live: false`` (it is fenced or gone).

Kafka's DescribeCluster v0-1 (what Ketch's brokers speak) says nothing of fencing or
controlled shutdown. With a ``ketch up`` directory, a broker's HTTP admin API
(``/v1/cluster/brokers``: its metadata image's registrations) adds ``fenced`` and
``in_controlled_shutdown`` (null when no broker answers), and a registered broker or a
broker of cluster.json that is not live is listed too.

Cluster links (issue 21): each link's source, and with a ``ketch up`` directory its mirror
partitions from every broker's ``GET /v1/mirrors`` (how many, their states, the largest
lag: source high watermark minus local log end offset, and the last error); ``null``
when no broker serves that route.

``health`` exits 0 when healthy and 1 when not (scripts: ``ketch cluster health || ...``):
unhealthy is any offline, under-replicated or under-min-ISR partition, a replica on a
broker that is not live, or no quorum leader.
"""
from __future__ import annotations

import argparse

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch cluster info --dir ./ketch-data
  ketch cluster health --output json
  ketch cluster health || echo "needs attention"
  ketch cluster decommission 4 --dry-run
"""


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "cluster", "brokers, active controller, partition health",
                                 __doc__, EXAMPLES)
    action("info", "brokers, controller and partition counts", info)
    action("health", "exit 1 when anything needs attention", health)
    d = action("decommission", "move every replica off a broker (then stop it)", decommission)
    d.add_argument("broker", type=int, help="the broker id to empty")
    d.add_argument("--dry-run", action="store_true", help="print the plan, move nothing")


def survey(admin, http: dict[int, c.HttpNode] | None = None) -> dict:
    from clients.admin import ConfigResource
    cluster = admin.describe_cluster()
    try:
        quorum = admin.describe_quorum()
        controller = {"leader_id": quorum.leader_id, "leader_epoch": quorum.leader_epoch,
                      "high_watermark": quorum.high_watermark,
                      "voters": [v.replica_id for v in quorum.voters]}
    except Exception as e:  # noqa: BLE001 -- reported, and health fails on it
        controller = {"leader_id": None, "error": c.one_line(e)}
    topics = admin.list_topics(include_internal=True)
    described = admin.describe_topics(sorted(topics)) if topics else {}
    min_isr: dict[str, int] = {}
    if described:
        res = [ConfigResource.topic(t) for t in sorted(described)]
        for r, entries in admin.describe_configs(res).items():
            e = entries.get("min.insync.replicas")
            min_isr[r.name] = int(e.value) if e is not None and e.value else 1
    live = {b.node_id for b in cluster.brokers}
    offline, under, under_min = [], [], []
    hosting: set[int] = set()
    count = 0
    for t, d in sorted(described.items()):
        for p in d.partitions:
            count += 1
            hosting.update(p.replicas)
            name = {"topic": t, "partition": p.partition, "leader": p.leader,
                    "replicas": list(p.replicas), "isr": list(p.isr)}
            if p.leader < 0:
                offline.append(name)
            if len(p.isr) < len(p.replicas):
                under.append(name)
            if len(p.isr) < min_isr.get(t, 1):
                under_min.append({**name, "min_insync_replicas": min_isr.get(t, 1)})
    http = http or {}
    registered: dict[int, dict] = {}
    for node in http.values():      # any live node's metadata image lists every broker
        got = node.get_json("/v1/cluster/brokers")
        if isinstance(got, list):
            registered = {b["id"]: b for b in got}
            break

    def state(n: int) -> dict:
        b = registered.get(n)
        return {"fenced": None if b is None else b["fenced"],
                "in_controlled_shutdown": None if b is None else b["in_controlled_shutdown"]}
    brokers = [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "live": True,
                **state(b.node_id)}
               for b in sorted(cluster.brokers, key=lambda b: b.node_id)]
    brokers += [{"node_id": n, "host": None, "port": None, "rack": None, "live": False, **state(n)}
                for n in sorted((hosting | set(http) | set(registered)) - live)]
    return {"cluster_id": cluster.cluster_id, "controller": controller, "brokers": brokers,
            "topics": len(described), "partitions": count,
            "offline_partitions": offline, "under_replicated_partitions": under,
            "under_min_isr_partitions": under_min, "links": links_view(admin, http)}


def links_view(admin, http: dict[int, c.HttpNode]) -> list[dict]:
    """Each cluster link with its mirror partitions' states and largest lag."""
    from clients.cli.link import mirror_partitions_of
    try:
        links = admin.list_cluster_links()
    except Exception as e:  # noqa: BLE001 -- a cluster without links support: say so, go on
        return [{"link": None, "error": c.one_line(e)}]
    rows = mirror_partitions_of(http)
    out = []
    for name, servers in links.items():
        mine = None if rows is None else [r for r in rows if r.get("link") == name]
        lags = [r.get("lag") for r in mine or () if isinstance(r.get("lag"), int) and r["lag"] >= 0]
        states: dict[str, int] = {}
        for r in mine or ():
            states[str(r.get("state"))] = states.get(str(r.get("state")), 0) + 1
        errors = sorted({r["last_error"] for r in mine or () if r.get("last_error")})
        out.append({"link": name, "bootstrap_servers": servers,
                    "partitions": None if mine is None else len(mine),
                    "states": None if mine is None else states,
                    "max_lag": None if mine is None else (max(lags) if lags else None),
                    "errors": errors, "partition_lag": None if mine is None else [
                        {"topic": r.get("topic"), "partition": r.get("partition"),
                         "state": r.get("state"), "lag": r.get("lag")} for r in mine]})
    return out


def problems(view: dict) -> list[str]:
    out = []
    if view["controller"].get("leader_id") in (None, -1):
        out.append("no active controller" + (f": {view['controller']['error']}"
                                             if view["controller"].get("error") else ""))
    down = [b["node_id"] for b in view["brokers"] if not b["live"]]
    if down:
        out.append(f"brokers not live: {down}")
    for key, what in (("offline_partitions", "offline"),
                      ("under_replicated_partitions", "under-replicated"),
                      ("under_min_isr_partitions", "under min ISR")):
        if view[key]:
            names = ", ".join(f"{p['topic']}-{p['partition']}" for p in view[key][:5])
            more = f" (+{len(view[key]) - 5})" if len(view[key]) > 5 else ""
            out.append(f"{len(view[key])} {what} partitions: {names}{more}")
    return out


def info(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        view = survey(admin, c.broker_http(args))
    if args.output == "json":
        c.print_json(view)
        return 0
    ctl = view["controller"]
    print(f"cluster {view['cluster_id']}  active controller {ctl.get('leader_id')}"
          f" (epoch {ctl.get('leader_epoch')})  topics {view['topics']}  "
          f"partitions {view['partitions']}")
    c.print_table(["BROKER", "HOST", "PORT", "RACK", "LIVE", "FENCED"],
                  [[b["node_id"], b["host"], b["port"], b["rack"], b["live"],
                    "?" if b["fenced"] is None else b["fenced"]] for b in view["brokers"]])
    print(f"offline {len(view['offline_partitions'])}  under-replicated "
          f"{len(view['under_replicated_partitions'])}  under-min-ISR "
          f"{len(view['under_min_isr_partitions'])}")
    if view["links"]:
        def unknown(v):
            return "?" if v is None else v
        c.print_table(["LINK", "SOURCE", "MIRROR PARTITIONS", "STATES", "MAX LAG", "LAST ERROR"],
                      [[l["link"], l.get("bootstrap_servers"), unknown(l.get("partitions")),
                        unknown(l.get("states") and ",".join(f"{k}={v}" for k, v in l["states"].items())),
                        unknown(l.get("max_lag")), (l.get("errors") or [l.get("error") or ""])[0]]
                       for l in view["links"]])
    return 0


def decommission(args: argparse.Namespace) -> int:
    """Admin.decommission_broker: each replica on the broker goes to the least-loaded other
    live broker; the moves run as partition reassignments."""
    with c.admin(args) as admin:
        plan = admin.decommission_broker(args.broker, dry_run=args.dry_run)
    rows = [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
            for tp, r in sorted(plan.items())]
    if args.output == "json":
        c.print_json({"broker": args.broker, "dry_run": args.dry_run, "partitions": rows})
        return 0
    verb = "would move" if args.dry_run else "moving"
    print(f"broker {args.broker}: {verb} {len(rows)} replica(s)"
          + ("" if args.dry_run or not rows else
             f"; stop it once `ketch cluster decommission {args.broker} --dry-run` plans nothing"))
    c.print_table(["TOPIC", "PARTITION", "REPLICAS"],
                  [[r["topic"], r["partition"], ",".join(map(str, r["replicas"]))] for r in rows])
    return 0


def health(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        view = survey(admin, c.broker_http(args))
    found = problems(view)
    if args.output == "json":
        c.print_json({"healthy": not found, "problems": found, **view})
    else:
        print("healthy" if not found else "unhealthy")
        for line in found:
            print(f"  {line}")
    return 0 if not found else 1
