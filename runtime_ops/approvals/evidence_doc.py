"""One approval request's evidence as JSON, pending or decided: what `approvals show --json`, `GET
/api/approvals/{id}` and `GET /api/approvals` return under `evidence` (glue over the state store; no Dagster).

- `offline`: the evaluation report the request was opened with (versions, metrics, verdict, interval);
- `online`: the rollout beside the request while it waited and its live evidence (`approvals/online_gate.py`);
- `ramp`: the stages after approval, each with its share, times, query count, interval and verdict, and the
  ramp's outcome in one word (`online/stage_results.py`);
- `rollback`: an alert's rollback request, its alert and live evidence (`approvals/rollback_facts.py`).

An asset gate's request keeps the evidence its gate recorded (its materialization's metadata). Evidence that cannot
be computed says so in place (`error`) instead of failing the whole answer.
"""

from __future__ import annotations

import logging
from typing import Any

from runtime_ops.approvals.online_gate import request_evidence
from runtime_ops.approvals.rollback_facts import rollback_facts
from runtime_ops.approvals.stage_evidence import StageRule, stage_online_evidence
from runtime_ops.online.stage_results import StageResult, ramp_outcome
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.store import StateStore

log = logging.getLogger("runtime_ops.approvals")


def stage_results(
    store: StateStore, stages: list[dict[str, Any]], rule: StageRule, *, live: bool = True
) -> list[StageResult]:
    """Each ramp stage (rows of `store.rollouts.stages`) with its evidence as the ramp decided on it
    (`approvals/stage_evidence.py`; `live=False`: the rows only, no query-log reads)."""
    results = []
    for index, row in enumerate(stages):
        evidence = None
        if live:
            try:
                evidence = stage_online_evidence(store, stages, index, rule)
            except Exception as exc:  # shown as unavailable; one stage never hides the others
                log.warning(f"evidence of ramp stage rollout #{row['id']} failed: {exc}")
        results.append(StageResult.of(row, evidence, max_loss=rule.max_loss))
    return results


def _offline(store: StateStore, request: dict[str, Any]) -> dict[str, Any] | None:
    report = store.evaluations.get_eval_report(request["eval_report_id"]) if request.get("eval_report_id") else None
    if not report:
        return None
    verdict = report.get("verdict") or {}
    return {
        "report_id": report.get("id"),
        "candidate_version": report.get("candidate_version"),
        "production_version": report.get("production_version"),
        "candidate_metrics": report.get("candidate_metrics"),
        "production_metrics": report.get("production_metrics"),
        "verdict": verdict.get("reason"),
        "auto_approve": verdict.get("auto_approve"),
        "interval": verdict.get("interval"),
    }


def _online(store: StateStore, request: dict[str, Any], policy: OnlinePolicy) -> dict[str, Any]:
    found = request_evidence(store, request, policy)
    rollout = found.rollout
    return {
        "rollout": None
        if rollout is None
        else {k: rollout.get(k) for k in ("id", "mode", "share", "status", "reason", "started_at", "ended_at")},
        "evidence": found.evidence.to_dict() if found.evidence is not None else None,
        "verdict": found.verdict,
        "first_model": found.first_model,
        "error": found.error,
        "lines": found.lines(),
    }


def evidence_doc(
    store: StateStore,
    request: dict[str, Any],
    *,
    online: OnlinePolicy,
    stage_rule: StageRule,
    live: bool = True,
) -> dict[str, Any] | None:
    """The evidence of `request` (see the module docstring). `live=False` leaves out what reads the query log (the
    online evidence and the stages' counts): a list of many requests stays a handful of reads each."""
    if request.get("target") is not None:
        evidence: dict[str, Any] | None = request.get("evidence")
        return evidence
    stages = store.rollouts.stages(request["id"])
    doc: dict[str, Any] = {
        "offline": _offline(store, request),
        "ramp": {
            "outcome": ramp_outcome(stages),
            "stages": [s.to_dict() for s in stage_results(store, stages, stage_rule, live=live)],
        },
    }
    if live:
        try:
            doc["online"] = _online(store, request, online)
        except Exception as exc:  # the rest of the evidence is still answered
            doc["online"] = {"error": f"{type(exc).__name__}: {exc}"}
    facts = rollback_facts(request)
    if facts is not None:
        doc["rollback"] = facts.to_json()
    return doc
