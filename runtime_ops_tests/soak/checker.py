"""The soak's history checker: what a run's history must show for nothing to have been lost, doubled or left
half-done, whatever faults it rode out (pure: a `History` in, violations out).

Each violation names its invariant and the record it is about, so a failing soak says *which* document, vote or
run to look at:

    document-lost        a landed object version the ledger never recorded (and nothing later replaced)
    document-unfinished  a ledger row still pending or parsed after recovery
    document-twice       one object version recorded more than once
    quarantine-no-reason a quarantined document without the reason why
    corrupt-ingested     bytes no parser accepts that ended ingested rather than quarantined
    document-stale       the newest version of a key that did not end current (superseded by an older one)
    ack-lost             a write acknowledged 2xx (feedback, a vote, an alert, a Slack click) that left no record
    click-not-counted    a decision acknowledged as counted whose vote is missing
    recorded-twice       one feedback signal or one alert firing period stored twice
    counted-twice        one approver's vote on one request counted more than once
    promotion-unapproved production moved to a new version without a counted approval for that digest
    double-promotion     one approval moved production to its candidate more than once
    serving-disagrees    `production`, the serving index and the audit log name different versions
    audit-broken         `runtime-ops audit verify` did not pass
    run-stuck            a Dagster run still STARTING or STARTED after recovery
    unexplained-error    a 5xx (or no answer) whose request was in flight outside every fault's window
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from runtime_ops_tests.soak.history import Call, Fault, History

__all__ = ["COUNTED", "TERMINAL", "Verdict", "Violation", "check"]

# Ledger statuses a document may end in (`deleted`: its object left the landing); `quarantined` also needs a reason.
TERMINAL = frozenset({"ok", "superseded", "duplicate", "quarantined", "deleted"})
# Decision outcomes that count a vote (the ops API's, the CLI's, the link page's and Slack's alike).
COUNTED = frozenset({"accepted", "recorded"})


@dataclass(frozen=True)
class Violation:
    invariant: str
    record: str  # what to look at: "landing/a.md@9f2c…", "request ar_12 / U2", "run 4f2a…"
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.record}: {self.detail}"


@dataclass
class Verdict:
    violations: list[Violation] = field(default_factory=list)
    blamed: dict[int, int] = field(default_factory=dict)  # index of an erroring call -> id of the fault it fell in

    @property
    def ok(self) -> bool:
        return not self.violations


def check(history: History) -> Verdict:
    verdict = Verdict()
    out = verdict.violations
    out += _documents(history)
    out += _acknowledged_writes(history)
    out += _promotions(history)
    out += _serving(history)
    out += [
        Violation("run-stuck", f"run {r['run_id']}", f"{r.get('job', '?')} is still {r['status']} after recovery")
        for r in history.final.unfinished_runs
    ]
    errors, verdict.blamed = _errors(history.calls, history.faults, history.grace)
    out += errors
    return verdict


# ---------------------------------------------------------------------------------------------------- documents
def _documents(history: History) -> list[Violation]:
    out: list[Violation] = []
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for doc in history.final.documents:
        rows[(doc["key"], doc["version"])].append(doc)
    ops_by_key: dict[str, list[Any]] = defaultdict(list)
    for landed in sorted(history.landed, key=lambda x: x.t):
        ops_by_key[landed.key].append(landed)

    for key, ops in ops_by_key.items():
        for i, op in enumerate(ops):
            if op.op != "put" or op.version is None:
                continue
            name = f"{key}@{op.version}"
            found = rows.get((key, op.version), [])
            # A later put or delete of the key may replace a version before any poll saw it (S3 keeps one version
            # of an unversioned key, and a create followed by a removal in one poll is never recorded).
            replaced = any(later.version != op.version for later in ops[i + 1 :])
            newest = not replaced
            if not found:
                if newest:
                    out.append(Violation("document-lost", name, f"landed at t={op.t:.1f}s, never in the ledger"))
                continue
            if any(later.version == op.version for later in ops[i + 1 :] if later.op == "put"):
                continue  # the same bytes put again later: judged at the last put
            for doc in found:
                status = doc["status"]
                if status not in TERMINAL:
                    out.append(Violation("document-unfinished", name, f"still {status} after recovery"))
                elif status == "quarantined" and not (doc.get("reason") or "").strip():
                    out.append(Violation("quarantine-no-reason", name, "quarantined without a reason"))
                elif op.corrupt and status != "quarantined":
                    out.append(Violation("corrupt-ingested", name, f"unparseable bytes ended {status}"))
                elif newest and ops[-1].op == "put" and status == "superseded":
                    out.append(Violation("document-stale", name, "the newest version of its key ended superseded"))
    for (key, version), found in rows.items():
        if len(found) > 1:
            ids = ", ".join(str(d.get("id", "?")) for d in found)
            out.append(Violation("document-twice", f"{key}@{version}", f"{len(found)} ledger rows ({ids})"))
    return out


# ------------------------------------------------------------------------------------ acknowledged writes, once
def _acknowledged_writes(history: History) -> list[Violation]:
    final = history.final
    out: list[Violation] = []
    feedback = Counter((f["request_id"], int(f["chunk_id"]), f["signal"]) for f in final.feedback)
    alerts = Counter((a["fingerprint"], a["starts_at"]) for a in final.alerts)
    votes = Counter((v["request_id"], v["actor"]) for v in final.votes)
    deliveries = {d["dedupe_key"]: d for d in final.deliveries}

    for call in history.calls:
        if not call.acknowledged:
            continue
        rec = call.record
        if call.what == "feedback":
            fb = (rec["request_id"], int(rec["chunk_id"]), rec["signal"])
            if not feedback[fb]:
                out.append(
                    Violation(
                        "ack-lost",
                        f"feedback {fb[2]} on {fb[0]} chunk {fb[1]}",
                        f"acknowledged {call.status} at t={call.t:.1f}s, not stored",
                    )
                )
        elif call.what == "alert":
            key = (rec["fingerprint"], rec["starts_at"])
            if not alerts[key]:
                out.append(
                    Violation(
                        "ack-lost",
                        f"alert {key[0]} starting {key[1]}",
                        f"acknowledged {call.status} at t={call.t:.1f}s, not in the inbox",
                    )
                )
        elif call.what == "decision":
            who = f"request {rec['request_id']} / {rec['actor']}"
            outcome = call.outcome
            if call.channel == "slack":
                delivery = deliveries.get(rec.get("dedupe_key", ""))
                if delivery is None:
                    out.append(
                        Violation(
                            "ack-lost",
                            f"{who} (Slack click {rec.get('dedupe_key')})",
                            f"acknowledged {call.status} at t={call.t:.1f}s, no delivery recorded",
                        )
                    )
                    continue
                outcome = delivery["outcome"]
            if outcome in COUNTED and not votes[(rec["request_id"], rec["actor"])]:
                out.append(
                    Violation(
                        "click-not-counted",
                        f"{who} via {call.channel}",
                        f"answered {outcome!r} at t={call.t:.1f}s, no vote stored",
                    )
                )

    out += [
        Violation("recorded-twice", f"feedback {s} on {r} chunk {c}", f"{n} rows")
        for (r, c, s), n in feedback.items()
        if n > 1
    ]
    out += [
        Violation("recorded-twice", f"alert {fp} starting {at}", f"{n} rows") for (fp, at), n in alerts.items() if n > 1
    ]
    out += [
        Violation("counted-twice", f"request {r} / {actor}", f"{n} votes counted")
        for (r, actor), n in votes.items()
        if n > 1
    ]
    return out


# ---------------------------------------------------------------------------------------------------- promotions
def _promotions(history: History) -> list[Violation]:
    final = history.final
    out: list[Violation] = []
    requests = {r["id"]: r for r in final.requests}
    approvals = Counter(v["request_id"] for v in final.votes if v["vote"] == "approve")
    seen_targets: set[int] = set()
    moved_by: dict[tuple[str, int], list[Any]] = defaultdict(list)

    for change in sorted(final.production_changes, key=lambda c: c["id"]):
        target = change["new_target"]
        if target is None:
            continue
        if change.get("approval_id"):
            moved_by[(change["approval_id"], target)].append(change["id"])
        forward = target not in seen_targets and change.get("old_target") is not None
        seen_targets.add(target)
        if change.get("old_target") is not None and not forward:
            continue  # back to a version that served before: a rollback or a saga's compensation
        if change.get("old_target") is None and not change.get("approval_id"):
            continue  # the first production of all, set by the gate's policy for a first model
        what = f"production -> v{target} (alias change {change['id']})"
        request = requests.get(change.get("approval_id") or "")
        if request is None:
            out.append(Violation("promotion-unapproved", what, f"no approval request {change.get('approval_id')!r}"))
            continue
        live = request.get("live_digest")
        needed = 0 if request.get("kind") == "policy" else int(request.get("required_approvals") or 1)
        if request.get("candidate_version") != target:
            problem = f"request {request['id']} approved v{request.get('candidate_version')}"
        elif live is not None and request["candidate_digest"] != live:
            approved = request["candidate_digest"][:12]
            problem = f"request {request['id']} approved digest {approved}, v{target} with its report is {live[:12]}"
        elif request["status"] != "approved":
            problem = f"request {request['id']} is {request['status']}"
        elif approvals[request["id"]] < needed:
            problem = f"request {request['id']} counted {approvals[request['id']]} of {needed} approvals"
        else:
            continue
        out.append(Violation("promotion-unapproved", what, problem))

    for (approval_id, target), changes in moved_by.items():
        if len(changes) > 1:
            out.append(
                Violation(
                    "double-promotion",
                    f"request {approval_id} -> v{target}",
                    f"production moved to it {len(changes)} times (alias changes {changes})",
                )
            )
    return out


def _serving(history: History) -> list[Violation]:
    final = history.final
    out: list[Violation] = []
    names = {
        "production": final.production,
        "serving index": final.serving_version,
        "audit log": final.audit_production,
    }
    if len({v for v in names.values()}) > 1:
        said = ", ".join(f"{k} v{v}" for k, v in names.items())
        out.append(Violation("serving-disagrees", "production", said))
    if not final.audit_verified:
        out.append(Violation("audit-broken", "audit log", final.audit_detail or "verify did not pass"))
    return out


# -------------------------------------------------------------------------------------------------------- errors
def _errors(calls: list[Call], faults: list[Fault], grace: float) -> tuple[list[Violation], dict[int, int]]:
    out: list[Violation] = []
    blamed: dict[int, int] = {}
    windows = [(f, *f.window(grace)) for f in faults]
    for i, call in enumerate(calls):
        if call.status is not None and call.status < 500:
            continue
        # The call lasted from `t` until its answer (or its timeout): a fault that began while it was in flight
        # explains it as well as one that began before it was sent.
        answered = call.t + call.latency_ms / 1000
        hit = [f for f, start, end in windows if start <= answered and call.t <= end]
        if hit:
            blamed[i] = hit[-1].id  # the latest fault that began before it
            continue
        answer = "no answer" if call.status is None else str(call.status)
        out.append(
            Violation("unexplained-error", f"{call.what} at t={call.t:.1f}s", f"{answer} outside every fault window")
        )
    return out, blamed
