"""The soak's report, from a history and its verdict (pure): faults per kind with their recovery times, search
availability and p99 outside and inside fault windows, what was processed, and the invariant violations."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

from runtime_ops_tests.soak.checker import Verdict
from runtime_ops_tests.soak.history import Call, History

__all__ = ["p99", "render"]


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _in_window(call: Call, history: History) -> bool:
    return any(start <= call.t <= end for start, end in (f.window(history.grace) for f in history.faults))


def _search_line(label: str, calls: list[Call]) -> str:
    if not calls:
        return f"| {label} | 0 | - | - |"
    ok = [c for c in calls if c.status == 200]
    tail = p99([c.latency_ms for c in ok])
    return (
        f"| {label} | {len(calls)} | {100 * len(ok) / len(calls):.2f} % | {tail:.0f} ms |"
        if tail is not None
        else (f"| {label} | {len(calls)} | 0.00 % | - |")
    )


def _phases(phases: dict[str, int | None] | None) -> str:
    if not phases:
        return "- phases: not recorded"
    drain = phases.get("drain_s")
    return (
        f"- phases: setup (production v1 serving) {phases.get('setup_s')} s, workload and faults "
        f"{phases.get('soak_s')} s, drain " + (f"{drain} s" if drain is not None else "did not finish")
    )


def render(history: History, verdict: Verdict) -> str:
    lines = [f"### Soak: seed {history.seed}, {history.minutes:g} min", ""]
    lines += ["| fault kind | injected | recovery median | recovery max |", "|---|---:|---:|---:|"]
    by_kind: dict[str, list[float | None]] = defaultdict(list)
    for fault in history.faults:
        by_kind[fault.kind].append(None if fault.recovered is None else fault.recovered - fault.start)
    for kind in sorted(by_kind):
        times = [t for t in by_kind[kind] if t is not None]
        never = len(by_kind[kind]) - len(times)
        median = f"{statistics.median(times):.1f} s" if times else "-"
        worst = f"{max(times):.1f} s" if times else "-"
        if never:
            worst += f" ({never} never)"
        lines.append(f"| {kind} | {len(by_kind[kind])} | {median} | {worst} |")
    lines.append(f"| **all {len(by_kind)} kinds** | **{len(history.faults)}** | | |")

    searches = [c for c in history.calls if c.what == "search"]
    inside = [c for c in searches if _in_window(c, history)]
    outside = [c for c in searches if not _in_window(c, history)]
    lines += ["", "| searches | requests | answered 200 | p99 of the 200s |", "|---|---:|---:|---:|"]
    lines += [_search_line("outside fault windows", outside), _search_line("inside fault windows", inside)]

    errors = [c for c in history.calls if c.status is None or c.status >= 500]
    blamed = Counter(next(f.kind for f in history.faults if f.id == fault_id) for fault_id in verdict.blamed.values())
    final = history.final
    statuses = Counter(d["status"] for d in final.documents)
    decisions = Counter(c.channel for c in history.calls if c.what == "decision" and c.acknowledged)
    requests = Counter(r["status"] for r in final.requests)
    promotions = sum(1 for c in final.production_changes if c["new_target"] is not None)

    def acked(what: str) -> int:
        return sum(1 for c in history.calls if c.what == what and c.acknowledged)

    lines += [
        "",
        f"- landed: {sum(1 for x in history.landed if x.op == 'put')} puts, "
        f"{sum(1 for x in history.landed if x.op == 'delete')} deletes "
        f"({sum(1 for x in history.landed if x.corrupt)} corrupt); ledger: "
        + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
        f"- queries: {len(searches)} searches, {acked('feedback')} "
        f"feedback acknowledged ({len(final.feedback)} stored); alerts: "
        f"{acked('alert')} webhooks acknowledged "
        f"({len(final.alerts)} stored)",
        f"- decisions acknowledged: {sum(decisions.values())} ("
        + ", ".join(f"{n} {ch}" for ch, n in sorted(decisions.items()))
        + "); requests: "
        + ", ".join(f"{n} {s}" for s, n in sorted(requests.items()))
        + f"; production moved {promotions} times, now v{final.production}",
        f"- errors (5xx or no answer): {len(errors)}, each inside a fault window: "
        + (", ".join(f"{n} in {k}" for k, n in sorted(blamed.items())) or "none"),
        _phases(history.diagnostics.get("phases")),
        "- Dagster runs: " + (", ".join(f"{n} {k}" for k, n in history.diagnostics.get("runs", {}).items()) or "-"),
        "- hung runs killed and failed by run_recovery_sensor (stacks in code_server.log): "
        + (", ".join(history.diagnostics.get("stalled_runs", [])) or "none"),
        "- dagster-daemon restarted by its supervisor (stale heartbeats; stacks in the soak log): "
        + ("; ".join(history.diagnostics.get("daemon_restarts_by_supervisor", [])) or "never"),
        f"- **invariant violations: {len(verdict.violations)}**",
    ]
    lines += [f"  - {v}" for v in verdict.violations[:50]]
    if len(verdict.violations) > 50:
        lines.append(f"  - ... and {len(verdict.violations) - 50} more (the history file has them all)")
    return "\n".join(lines)
