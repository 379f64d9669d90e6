"""Runs scenarios against fresh clusters and prints the verdict table.

    python -m chaos run [--scenario ID ...] [--rounds N] [--json FILE] [--ci] [--keep] [--secure]
    python -m chaos list

Each round of each scenario gets a new cluster in its own directory (kept with ``--keep``
or when the round fails, for the node.log files). Progress goes to stdout as it happens;
every finished round prints one verdict line with its seed; the table comes last. The
exit status is 1 when any round FAILs.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from chaos.checker import Check, Figures, Verdict, check, judge
from chaos.scenarios import SCENARIOS
from chaos.scenarios.base import CI, FULL, Context, Profile, Scenario

__all__ = ["Result", "main", "run_scenario", "table"]


@dataclass
class Result:
    scenario: str
    title: str
    round: int
    seed: int
    expected: str
    figures: Figures
    verdict: Verdict
    checks: list[Check]
    notes: list[str]
    duration_s: float
    events: list[tuple[float, str]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    workdir: str | None = None

    def line(self) -> str:
        f = self.figures
        text = (f"{self.scenario} {self.verdict.word} acked={f.acked} lost={f.lost} "
                f"duplicated={f.duplicated} reordered={f.reordered} phantom={f.phantom} "
                f"divergent={f.divergent} unavailable_s={f.unavailable_s} seed={self.seed} "
                f"({self.duration_s:.0f}s; expected {self.expected})")
        if not self.verdict.passed:
            text += " -- " + "; ".join(self.verdict.reasons)
        return text

    def to_json(self) -> dict:
        return {"scenario": self.scenario, "title": self.title, "round": self.round,
                "seed": self.seed, "expected": self.expected, "verdict": self.verdict.word,
                "reasons": list(self.verdict.reasons), "figures": self.figures.to_json(),
                "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
                "notes": self.notes, "extra": self.extra, "duration_s": round(self.duration_s, 1),
                "events": [(round(t, 2), e) for t, e in self.events], "workdir": self.workdir}


def run_scenario(scenario: Scenario, profile: Profile = FULL, seed: int | None = None,
                 round_: int = 1, base_dir: str | None = None, keep: bool = False,
                 say: Callable[[str], None] = print, secure: bool = False) -> Result:
    seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
    workdir = tempfile.mkdtemp(prefix=f"chaos-{scenario.id}-", dir=base_dir)
    started = time.monotonic()

    def progress(text: str) -> None:
        say(f"  [{scenario.id} {time.monotonic() - started:6.1f}s] {text}")

    ctx = Context(scenario.id, workdir, seed, profile, progress, secure=secure)
    progress(f"{scenario.title} (seed {seed}, profile {profile.name}"
             f"{', secured cluster' if secure else ''})")
    error: str | None = None
    try:
        scenario.run(ctx)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
        progress("error: " + error)
        progress(traceback.format_exc().rstrip().splitlines()[-3])
    figures = check(ctx.history.snapshot(), ctx.logs, ctx.divergences, ctx.window, ctx.corrupt)
    checks = list(ctx.checks)
    if error is not None:
        checks.append(Check("scenario ran to the end", False, error[:500]))
    if not ctx.logs and error is None:
        checks.append(Check("log read back", False, "the scenario read nothing back"))
    expect = scenario.expect
    if ctx.expect_lost is not None:
        expect = dataclasses.replace(expect, lost=f"={ctx.expect_lost}")
        checks.append(Check("the hazard window held acknowledged records", ctx.expect_lost > 0,
                            f"{ctx.expect_lost}"))
    verdict = judge(figures, expect, checks)
    duration = time.monotonic() - started
    keep_dir = keep or not verdict.passed
    ctx.close(keep=keep_dir)
    events = [(t - ctx.history.t0, e) for t, e in ctx.history.events]
    return Result(scenario.id, scenario.title, round_, seed, expect.describe(), figures,
                  verdict, checks, ctx.notes, duration, events, ctx.extra,
                  workdir if keep_dir else None)


def table(results: list[Result]) -> str:
    head = ["scenario", "round", "expected", "acked", "lost", "dup", "reord", "phantom",
            "divergent", "unavail_s", "verdict", "notes"]
    rows = []
    for r in results:
        f = r.figures
        notes = "; ".join(list(r.verdict.reasons) if not r.verdict.passed else r.notes[:1])
        rows.append([r.scenario, str(r.round), r.expected, str(f.acked), str(f.lost), str(f.duplicated),
                     str(f.reordered), str(f.phantom), str(f.divergent), f"{f.unavailable_s:.1f}",
                     r.verdict.word, notes[:140]])
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    fmt = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    lines = [fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def _ids(wanted: list[str] | None) -> list[str]:
    if not wanted:
        return list(SCENARIOS)
    out = []
    for w in wanted:
        for item in w.split(","):
            key = item.strip().upper()
            if key not in SCENARIOS:
                raise SystemExit(f"unknown scenario {item!r}; known: {', '.join(SCENARIOS)}")
            out.append(key)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos", description="Ketch's chaos suite (SCENARIOS.md)")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run scenarios against fresh local clusters")
    run.add_argument("--scenario", "-s", action="append", metavar="ID",
                     help="a scenario id (N1..N13, N12C, N15, N17, L1..L7, D1, X1); repeat or comma-separate; default all")
    run.add_argument("--rounds", type=int, default=1, help="run each scenario N times")
    run.add_argument("--json", metavar="FILE", help="write the results as JSON")
    run.add_argument("--seed", type=int, help="the fault seed (default: random per round)")
    run.add_argument("--ci", action="store_true", help="the small CI profile (fewer records and repeats)")
    run.add_argument("--dir", help="where the clusters' directories go (default: the temp dir)")
    run.add_argument("--keep", action="store_true", help="keep every cluster directory")
    run.add_argument("--secure", action="store_true",
                     help="run on `ketch up --secure` clusters (SASL_SSL listeners, the controllers' "
                          "too, ACLs on); the harness's clients log in as the admin user, a super user")
    sub.add_parser("list", help="list the scenarios")
    args = ap.parse_args(argv)
    if args.command == "list":
        for s in SCENARIOS.values():
            print(f"{s.id:4} {s.title}  [expected: {s.expect.describe()}]")
        return 0
    ids = _ids(args.scenario)
    profile = CI if args.ci else FULL
    results: list[Result] = []
    total = len(ids) * args.rounds
    started = time.monotonic()
    for round_ in range(1, args.rounds + 1):
        for sid in ids:
            n = len(results) + 1
            print(f"[{n}/{total}] {sid} round {round_}/{args.rounds}", flush=True)
            result = run_scenario(SCENARIOS[sid], profile, args.seed, round_, args.dir, args.keep,
                                  say=lambda t: print(t, flush=True), secure=args.secure)
            results.append(result)
            print(result.line(), flush=True)
            if result.workdir:
                print(f"  cluster directory kept: {result.workdir}", flush=True)
            if args.json:
                _write_json(args.json, results, started)
    print()
    print(table(results))
    failed = [r for r in results if not r.verdict.passed]
    print(f"\n{len(results) - len(failed)}/{len(results)} passed in {time.monotonic() - started:.0f}s")
    return 1 if failed else 0


def _write_json(path: str, results: list[Result], started: float) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": "python -m chaos " + " ".join(sys.argv[1:]),
                   "elapsed_s": round(time.monotonic() - started, 1),
                   "results": [r.to_json() for r in results]}, f, indent=2)
    os.replace(tmp, path)
