"""Run the registered benchmarks, print a table, write bench/results/latest.{json,md}.

    python -m bench                 every benchmark
    python -m bench -k approvals    only those whose name contains "approvals"
    python -m bench --list          list them

Exit status: 0 when every benchmark ran (whether or not it met its target), 1 when one crashed, 130 when
interrupted. Servers and databases a benchmark starts are stopped on every way out.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import pkgutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import bench
from bench.common import REGISTRY, BenchResult, machine_info

RESULTS = Path(__file__).resolve().parent / "results"


def discover() -> None:
    for mod in pkgutil.iter_modules(bench.__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"bench.{mod.name}")


def _num(x: float) -> str:
    if x is None or math.isnan(x):
        return "n/a"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def table(rows: list[dict[str, Any]]) -> list[list[str]]:
    head = ["benchmark", "ours", "baseline", "ratio", "unit", "target", "met"]
    body = [
        [
            r["name"],
            _num(r["ours"]),
            _num(r["baseline"]),
            "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}x",
            r["unit"],
            r["target"],
            "yes" if r["passed_target"] else "NO",
        ]
        for r in rows
    ]
    return [head, *body]


def render_text(cells: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_markdown(cells: list[list[str]], machine: dict[str, Any], started: str) -> str:
    out = [
        "# runtime_ops benchmarks",
        "",
        f"Run {started} on {machine['cpus']} CPUs, Python {machine['python']}, {machine['platform']}.",
        "Ratios are ours / baseline, both measured in the same run; targets are reported, not asserted.",
        "",
        "| " + " | ".join(cells[0]) + " |",
        "|" + "|".join("---" for _ in cells[0]) + "|",
    ]
    out += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(out) + "\n"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="runtime_ops benchmarks")
    parser.add_argument("-k", dest="pattern", default="", help="run only benchmarks whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)

    # SIGTERM unwinds like Ctrl-C, so every benchmark's `finally` stops its servers and databases.
    signal.signal(signal.SIGTERM, _interrupt)
    discover()
    selected = [b for name, b in sorted(REGISTRY.items()) if args.pattern in name]
    if args.list:
        for b in selected:
            print(f"{b.name:24} {b.description}")
        return 0
    if not selected:
        print(f"no benchmark matches {args.pattern!r}; have: {', '.join(sorted(REGISTRY))}", file=sys.stderr)
        return 1

    machine = machine_info()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results: list[BenchResult] = []
    crashed = []
    for b in selected:
        print(f">> {b.name}: {b.description}", flush=True)
        t0 = time.monotonic()
        try:
            results += b.run()
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        except Exception:
            traceback.print_exc()
            crashed.append(b.name)
        print(f"   done in {time.monotonic() - t0:.1f}s", flush=True)

    rows = [r.to_json(machine) for r in results]
    cells = table(rows)
    print()
    print(render_text(cells))
    for r in rows:
        if r["details"]:
            print(f"\n{r['name']}:\n{json.dumps(r['details'], indent=2)}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(rows, indent=2) + "\n")
    (RESULTS / "latest.md").write_text(render_markdown(cells, machine, started))
    print(f"\nwrote {RESULTS / 'latest.json'} and {RESULTS / 'latest.md'}")
    if crashed:
        print(f"crashed: {', '.join(crashed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
