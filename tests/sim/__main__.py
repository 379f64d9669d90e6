"""``python -m tests.sim``: a long random search, one seed, or one scenario.

    python -m tests.sim --seeds 100000            # explore seeds 0..99999, stop at the first failure
    python -m tests.sim --seeds 100000 --workers 2  # the same, on two cores
    python -m tests.sim --seeds 1000 --start 5000 --power-cuts
    python -m tests.sim --seed 1234               # replay one seed, print its verdict and trace
    python -m tests.sim --scenario N10 --seed 7   # one SCENARIOS.md id at one seed
    python -m tests.sim --bug 1 --seeds 2000      # search with chaos bug 1 re-introduced

Prints progress (seeds, seeds/s) and, on failure, ``SIM_SEED=<n>``, the invariant and the
last events; the exit status is 1 on a failure.
"""
from __future__ import annotations

import argparse
import logging
import sys

from broker.replica_manager import ReplicaManager
from tests.sim.bugs import LostAnswerFallsBack, PausesOnLeaderBehind
from tests.sim.explorer import FAULTS, FAULTS_WITH_POWER_CUTS, explore, process_pool, search
from tests.sim.invariants import InvariantViolation
from tests.sim.scenarios import SCENARIOS, run_scenario

CORES = {"0": ReplicaManager, "1": LostAnswerFallsBack, "2": PausesOnLeaderBehind}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, help="explore this many seeds")
    parser.add_argument("--start", type=int, default=0, help="first seed of --seeds")
    parser.add_argument("--seed", type=int, help="run one seed")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), help="a SCENARIOS.md id")
    parser.add_argument("--power-cuts", action="store_true", help="explore power cuts too")
    parser.add_argument("--bug", choices=["1", "2"], help="re-introduce chaos bug 1 or 2")
    parser.add_argument("--verbose", action="store_true", help="show the cores' log lines")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes exploring --seeds in parallel (verdicts in seed order)")
    args = parser.parse_args(argv)
    if not args.verbose:
        logging.disable(logging.CRITICAL)
    core = CORES[args.bug or "0"]
    kinds = FAULTS_WITH_POWER_CUTS if args.power_cuts else FAULTS
    if args.scenario:
        seeds = [args.seed] if args.seed is not None else range(args.start, args.start + (args.seeds or 1))
        for seed in seeds:
            try:
                out = run_scenario(args.scenario, seed, core)
            except InvariantViolation as v:
                print(v)
                return 1
            print(f"{args.scenario} SIM_SEED={seed} ok: {out.figures} divergent={out.divergent} {out.notes}")
        return 0
    if args.seed is not None:
        verdict = explore(args.seed, core, fault_kinds=kinds)
        print(verdict)
        return 0 if verdict.ok else 1
    count = args.seeds or 1000

    def progress(n: int, seed: int, seconds: float) -> None:
        print(f"{n} seeds ok (last {seed}), {n / seconds:.0f} seeds/s", flush=True)
    pool = process_pool(args.workers) if args.workers > 1 else None
    try:
        failed, n, seconds = search(range(args.start, args.start + count), core, progress,
                                    progress_every=max(1, min(1000, count // 20)),
                                    fault_kinds=kinds, executor=pool)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if failed is not None:
        print(failed)
        print(f"first failure after {n} seeds ({seconds:.1f} s); replay: python -m tests.sim "
              f"--seed {failed.seed}{' --power-cuts' if args.power_cuts else ''}"
              f"{' --bug ' + args.bug if args.bug else ''}")
        return 1
    print(f"{n} seeds ok in {seconds:.1f} s ({n / seconds:.0f} seeds/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
