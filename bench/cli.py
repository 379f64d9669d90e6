"""Benchmark: ``ketch produce`` and ``ketch consume`` against kcat, same cluster, same run.

1. Produce: N lines of 100 bytes from a file, ``ketch produce TOPIC --file F`` vs
   ``kcat -P -l F``, each into its own fresh topic (6 partitions, RF 3), acks=all both.
2. Consume: ``ketch consume TOPIC -n N`` vs ``kcat -C -e -c N -q`` reading one of those
   topics from the beginning, output to /dev/null.

Wall time of the whole command is measured (process start, connecting, the work, exit),
as a user experiences it; ratio = kcat's time / ketch's time (>= 0.5 is the goal: ketch at
least half kcat's speed). Runs alternate and the best of --repeats is kept (other load on
a shared machine only slows a run down). The cluster is a ``LocalCluster`` of 1 controller
and 3 brokers started here and stopped at the end.

Usage: python bench/cli.py [--records 1000000] [--repeats 2]
Prints figures, then ONE JSON line (the last line). No assertions: a benchmark reports.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clients import Admin  # noqa: E402
from clients.admin import NewTopic  # noqa: E402
from clients.cli.launcher import LocalCluster  # noqa: E402

VALUE_BYTES = 100
PARTITIONS = 6


def timed(cmd: list[str], stdout=subprocess.DEVNULL) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        raise SystemExit("kcat is not installed (apt-get install kcat)")
    ketch = [sys.executable, "-m", "clients.cli"]
    work = tempfile.mkdtemp(prefix="bench-cli-")
    data = os.path.join(work, "lines.txt")
    line = b"x" * VALUE_BYTES + b"\n"
    with open(data, "wb") as f:
        for _ in range(args.records // 10_000):
            f.write(line * 10_000)
        f.write(line * (args.records % 10_000))
    cluster = LocalCluster(os.path.join(work, "cluster"), controllers=1, brokers=3)
    try:
        cluster.start(timeout_s=120)
        bs = cluster.spec.bootstrap_servers
        admin = Admin({"bootstrap.servers": bs})
        topics = [f"{who}-{i}" for i in range(args.repeats) for who in ("ketch", "kcat")]
        admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in topics])
        admin.close()
        produce = {"ketch": [], "kcat": []}
        consume = {"ketch": [], "kcat": []}
        for i in range(args.repeats):
            produce["ketch"].append(timed([*ketch, "produce", f"ketch-{i}", "--file", data,
                                           "--acks", "all", "--progress", "never", "-b", bs]))
            produce["kcat"].append(timed([kcat, "-P", "-b", bs, "-t", f"kcat-{i}", "-X", "acks=all",
                                          "-l", data]))
        for i in range(args.repeats):
            consume["ketch"].append(timed([*ketch, "consume", "ketch-0", "-n", str(args.records),
                                           "-b", bs]))
            consume["kcat"].append(timed([kcat, "-C", "-b", bs, "-t", "ketch-0", "-e", "-q",
                                          "-c", str(args.records)]))
    finally:
        cluster.stop(timeout_s=30)
        shutil.rmtree(work, ignore_errors=True)
    result = {"records": args.records, "value_bytes": VALUE_BYTES}
    for name, runs in (("produce", produce), ("consume", consume)):
        k, c = min(runs["ketch"]), min(runs["kcat"])
        result[f"{name}_ketch_s"] = round(k, 3)
        result[f"{name}_kcat_s"] = round(c, 3)
        result[f"{name}_ketch_records_per_s"] = round(args.records / k)
        result[f"{name}_kcat_records_per_s"] = round(args.records / c)
        result[f"{name}_ratio_to_kcat"] = round(c / k, 3)
        print(f"{name}: ketch {k:.2f} s ({args.records / k:,.0f} records/s), kcat {c:.2f} s "
              f"({args.records / c:,.0f} records/s): ratio {c / k:.2f} (goal >= 0.5)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
