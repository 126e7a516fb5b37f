"""Run the registered benchmarks, print a table, write bench/results/latest.{json,md}.

    python -m bench                 every benchmark; bench/results/latest.* are rewritten
    python -m bench -k approvals    only those whose name contains "approvals"; their rows in latest.* are
                                    replaced, every other row is kept (each row records when it ran)
    python -m bench -k load --out /tmp/r   write the results to /tmp/r/latest.* instead (no merge there
                                    unless that folder already holds results)
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


def _runs_line(rows: list[dict[str, Any]]) -> str:
    """When the rows ran: one run, or (after `-k` runs merged into a full one) which benchmarks ran when."""
    by_time: dict[str, list[str]] = {}
    for r in rows:
        by_time.setdefault(r.get("run_at") or "an earlier run", []).append(r["name"].split(".")[0])
    if len(by_time) == 1:
        return f"Run {next(iter(by_time))}"
    parts = [f"{', '.join(dict.fromkeys(names))} at {when}" for when, names in sorted(by_time.items())]
    return "Runs: " + "; ".join(parts)


def merge(previous: list[dict[str, Any]], fresh: list[dict[str, Any]], rerun: list[str]) -> list[dict[str, Any]]:
    """`previous` rows minus those of the benchmarks in `rerun`, plus `fresh`, in benchmark order (each
    benchmark's rows stay in the order it reported them)."""

    def of_rerun(name: str) -> bool:
        return any(name == b or name.startswith(b + ".") for b in rerun)

    kept = [r for r in previous if not of_rerun(r["name"])]
    return sorted(kept + fresh, key=lambda r: r["name"].split(".")[0])


def render_markdown(cells: list[list[str]], machine: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    out = [
        "# runtime_ops benchmarks",
        "",
        f"{_runs_line(rows)} on {machine['cpus']} CPUs, Python {machine['python']}, {machine['platform']}.",
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
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="folder for latest.json / latest.md (default: bench/results)"
    )
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

    rows = [{**r.to_json(machine), "run_at": started} for r in results]
    print()
    print(render_text(table(rows)))
    for r in rows:
        if r["details"]:
            print(f"\n{r['name']}:\n{json.dumps(r['details'], indent=2)}")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    written = out / "latest.json"
    if args.pattern and written.exists():
        # A partial run updates its own rows only: the full report of the last `make bench` stays whole.
        rows = merge(json.loads(written.read_text()), rows, [b.name for b in selected])
    written.write_text(json.dumps(rows, indent=2) + "\n")
    (out / "latest.md").write_text(render_markdown(table(rows), machine, rows))
    print(f"\nwrote {written} and {out / 'latest.md'}")
    if crashed:
        print(f"crashed: {', '.join(crashed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
