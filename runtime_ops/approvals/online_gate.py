"""The online half of the gate, on every approvals-sensor tick: each pending request's live-traffic evidence (the
rollout beside it, `online/evidence.py`) judged by `policies/gate_rule.judge_online`, and the decision it calls
for taken through `decisions.decide_by_policy` as `policy:online` (audited; the Slack message shows it on the same
tick). A rejected candidate's rollout stops at once, with the reason.

`request_evidence` is also what the approval page and the Slack message show (`Announcer.view`). Fail closed: an
evidence that cannot be computed approves nothing. No Dagster here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runtime_ops.decisions.decide import decide_by_policy
from runtime_ops.labels import version_label
from runtime_ops.online.evidence import EvidenceLimits, OnlineEvidence, online_evidence
from runtime_ops.online.evidence_text import evidence_lines, summary
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.store import StateStore

log = logging.getLogger("runtime_ops.approvals")

POLICY_ACTOR = "policy:online"


@dataclass(frozen=True)
class RequestEvidence:
    """The online half of one request: the rollout beside it (None: none ran), its evidence, or why there is none."""

    rollout: dict[str, Any] | None
    evidence: OnlineEvidence | None
    first_model: bool = False
    error: str | None = None

    def rollout_text(self) -> str | None:
        r = self.rollout
        if r is None:
            return None
        state = r["status"] if r["status"] == "active" else f"{r['status']} ({r.get('reason') or 'no reason'})"
        return f"rollout #{r['id']}: {r['mode']} at {float(r['share']) * 100:g}% of traffic, {state}"

    def lines(self) -> list[str]:
        return evidence_lines(self.evidence, first_model=self.first_model, rollout=self.rollout_text(),
                              error=self.error)  # fmt: skip

    @property
    def verdict(self) -> str | None:
        return self.evidence.verdict if self.evidence is not None else None


def request_evidence(store: StateStore, request: dict[str, Any], policy: OnlinePolicy) -> RequestEvidence:
    """The online evidence of `request`'s candidate from the newest rollout beside it (active or ended)."""
    report = store.evaluations.get_eval_report(request["eval_report_id"]) or {}
    if report.get("production_version") is None:
        return RequestEvidence(None, None, first_model=True)
    rollout = store.rollouts.for_request(request["id"])
    if rollout is None:
        return RequestEvidence(None, None)
    try:
        inputs = store.query_log.online_inputs(int(rollout["id"]))
        limits = EvidenceLimits(max_key_share=policy.max_key_share, max_session_share=policy.max_session_share)
        evidence = online_evidence(inputs, mode=str(rollout["mode"]), min_queries=policy.min_queries, limits=limits)
    except Exception as exc:  # fail closed: shown as unavailable, decides nothing
        log.warning(f"online evidence of {request['id']} (rollout #{rollout['id']}) failed: {exc}")
        return RequestEvidence(rollout, None, error=f"{type(exc).__name__}: {exc}")
    return RequestEvidence(rollout, evidence)


def review_pending(
    store: StateStore, policy: OnlinePolicy, now: datetime, emit: Callable[[str], None] = log.info
) -> dict[str, list[str]]:
    """Judge every pending request of the (scoped) store on its online evidence; the ids approved and rejected."""
    # numpy (gate_rule's offline half): kept out of the code location's load
    from runtime_ops.policies.gate_rule import judge_online

    done: dict[str, list[str]] = {"approved online": [], "rejected online": []}
    for request in store.requests.list_requests(status="pending"):
        found = request_evidence(store, request, policy)
        report = store.evaluations.get_eval_report(request["eval_report_id"]) or {}
        evidence = found.evidence
        ruling = judge_online(
            policy=policy,
            offline_auto_approve=bool((report.get("verdict") or {}).get("auto_approve")),
            first_model=found.first_model,
            verdict=found.verdict,
            decides=evidence.decides if evidence is not None else True,
            error=found.error,
            caveat=evidence.caveat if evidence is not None else None,
        )
        if ruling.action not in ("approve", "reject") or evidence is None:
            continue
        reason = f"{ruling.reason}: {summary(evidence)}"
        outcome = decide_by_policy(
            store,
            request["id"],
            actor=POLICY_ACTOR,
            vote=ruling.action,
            reason=reason,
            now=now,
            detail={"online": evidence.to_dict()},
        )
        if not outcome.decided:  # a person or the deadline decided first: theirs stands
            continue
        candidate = version_label(request["candidate_version"])
        if ruling.action == "reject":
            lost = f"lost online with confidence over {evidence.queries} queries (request {request['id']} rejected)"
            store.rollouts.stop(reason=lost, actor=POLICY_ACTOR, approval_id=request["id"], now=now)
            done["rejected online"].append(request["id"])
            emit(f"candidate {candidate} rejected by {POLICY_ACTOR} ({request['id']}): {reason}")
        else:
            done["approved online"].append(request["id"])
            emit(f"candidate {candidate} approved by {POLICY_ACTOR} ({request['id']}): {reason}")
    return done
