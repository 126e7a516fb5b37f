"""`python -m runtime_ops_tests.soak` (what `make soak` runs): a seeded chaos soak, or a saved history checked again.

    python -m runtime_ops_tests.soak --minutes 30 --seed 7            # .soak/seed-7/{report.md,history.json,...}
    python -m runtime_ops_tests.soak --check .soak/seed-7/history.json

Exit status: 0 the checker found no violation (and, with --min-faults/--min-kinds, enough faults were injected);
1 it found some, or too few faults; 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from runtime_ops_tests.soak.checker import check
from runtime_ops_tests.soak.fault_plan import BY_NAME
from runtime_ops_tests.soak.history import History
from runtime_ops_tests.soak.report import render


def _set_env(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime_ops_tests.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long the workload and faults run")
    parser.add_argument("--seed", type=int, default=1, help="draws the faults and the workload; replay with it")
    parser.add_argument("--out", type=Path, default=None, help="where the history and report go (.soak/seed-N)")
    parser.add_argument("--kinds", default="", help=f"comma-separated fault kinds (default: all of {sorted(BY_NAME)})")
    parser.add_argument("--min-faults", type=int, default=0, help="fail unless at least this many were injected")
    parser.add_argument("--min-kinds", type=int, default=0, help="fail unless at least this many kinds were injected")
    parser.add_argument("--check", type=Path, default=None, help="check a saved history.json instead of running")
    args = parser.parse_args(argv)

    if args.check is not None:
        if not args.check.is_file():
            print(f"error: no history at {args.check}: give the history.json a soak wrote", file=sys.stderr)
            return 2
        history = History.load(args.check)
        verdict = check(history)
        print(render(history, verdict))
        return 0 if verdict.ok else 1

    from runtime_ops_tests.soak.harness import SoakConfig, run_soak

    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip()) or None
    unknown = sorted(set(kinds or ()) - set(BY_NAME))
    if unknown:
        print(f"error: unknown fault kinds {unknown}; known: {sorted(BY_NAME)}", file=sys.stderr)
        return 2
    out = args.out or Path(".soak") / f"seed-{args.seed}"
    cfg = SoakConfig(seed=args.seed, minutes=args.minutes, out=out.resolve(), kinds=kinds)
    history, verdict, report = run_soak(cfg, _set_env, log=lambda line: print(line, flush=True))
    print("\n" + report)
    print(
        f"\nhistory: {cfg.out / 'history.json'}  (replay: make soak SOAK_SEED={args.seed} "
        f"SOAK_MINUTES={args.minutes:g})"
    )
    n_kinds = len({f.kind for f in history.faults})
    short = len(history.faults) < args.min_faults or n_kinds < args.min_kinds
    if short:
        print(
            f"too few faults: {len(history.faults)} of {n_kinds} kinds injected; wanted at least {args.min_faults} "
            f"of {args.min_kinds} kinds",
            file=sys.stderr,
        )
    return 0 if verdict.ok and not short else 1


if __name__ == "__main__":
    sys.exit(main())
