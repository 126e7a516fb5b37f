"""The ramp after approval (glue: state store + the pure stage machine `online/rollout_plan.py`; no Dagster): an
approved candidate of a pipeline that declares `rollout.mode` and a non-empty `rollout.ramp` is not promoted at
once. The approvals sensor calls `advance_ramp` for it on every tick instead:

- no stage yet: the rollout beside the request stops ("approved: ramp starts") and stage 0 starts, a canary at
  `ramp[0]` of the candidate's ready index, in one transaction;
- the active stage's online evidence decides (`next_step`): it completes and the next one starts (one transaction),
  or, after the last, it completes and the promotion launches as it always did (run key = request id);
- a loss rolls back: the stage row ends `rolled_back`, which is what returns its traffic to production, and the
  request's promotion is refused for good (`ramp_refusal`, read by `verify_promotion`). One transaction (the row and
  its audit record, actor `policy:online`), so no saga: nothing can be half-done. The Slack message and thread reply
  follow from that state (`Announcer.note`, once, through the effects ledger), and the page reads it too;
- a stage at its max_duration without enough queries halts the ramp (row `stopped`): nothing is promoted silently;
  the request stays approved and unpromoted, and its page and message say how to go on.

Each of these is also the candidate's lifecycle move (`ramp_start`, `ramp_advance`, `ramp_pass`, `ramp_loss`,
`halt`), written in the stage's own transaction: a move the machine refuses undoes the stage. An approval that
arrives before the candidate's index is ready (a person deciding within seconds of the request opening, while the
training run still fills it) waits for the index: nothing promotes around the ramp. A first model has no production
to ramp against; the approvals sensor launches it without one (`approvals/lifecycle_gate.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runtime_ops.approvals.lifecycle_gate import facts_for
from runtime_ops.approvals.stage_evidence import StageRule, plan_evidence, stage_online_evidence
from runtime_ops.command_hint import command
from runtime_ops.labels import version_label
from runtime_ops.lifecycle.machine import Facts, TransitionRefused
from runtime_ops.online.rollout_plan import StageEvidence, next_step
from runtime_ops.pipeline.spec import RolloutSpec
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.store import StateStore
from runtime_ops.store.serving.indexes import READY
from runtime_ops.store.serving.rollouts import ACTIVE, COMPLETED, ROLLED_BACK, STOPPED, RolloutConflict
from runtime_ops.tags import PRODUCTION_ALIAS

POLICY_ACTOR = "policy:online"
RAMP_STARTS = "approved: ramp starts"

# The online evidence of the stage at an index of a request's stage rows (oldest first).
EvidenceOf = Callable[[list[dict[str, Any]], int], StageEvidence]


@dataclass(frozen=True)
class RampMove:
    """What one tick did with an approved request's ramp: launch its promotion now, and what to log ("": nothing
    changed); `rolled_back` when the ramp has rolled back (this tick or before: its announcement is owed until made)."""

    promote: bool
    message: str = ""
    rolled_back: bool = False


def _share(share: float) -> str:
    return f"{share:.0%}"


def advance_ramp(
    store: StateStore, plan: RolloutSpec, request: dict[str, Any], evidence_of: EvidenceOf, now: datetime
) -> RampMove:
    """One tick of the ramp of approved `request` (see the module docstring). Another request's rollout holding
    the pipeline's one active slot makes it wait (said in the log), never fails the tick."""
    try:
        return _advance(store, plan, request, evidence_of, now)
    except RolloutConflict as exc:
        return RampMove(False, f"{request['id']}: the ramp waits: {exc}")
    except TransitionRefused as exc:  # the candidate moved on (superseded, stopped, skipped): its ramp ends here
        return RampMove(False, f"{request['id']}: the ramp does not move: {exc}")


def ready_index(store: StateStore, request: dict[str, Any]) -> int | None:
    """The candidate's index a ramp serves from: the one its pre-approval rollout used, else its newest ready one."""
    beside = store.rollouts.for_request(request["id"])
    if beside is not None:
        return int(beside["candidate_index_id"])
    version = int(request["candidate_version"])
    ready = [i for i in store.indexes.list_indexes() if i["model_version"] == version and i["status"] == READY]
    return int(ready[-1]["id"]) if ready else None


def _moving(store: StateStore, rid: str, event: str, reason: str, facts: Facts, stage: int | None = None) -> Any:
    """The lifecycle move that goes with a ramp stage's write, in its transaction."""

    def then(conn: Any) -> None:
        store.lifecycle.move_in(conn, rid, event, actor=POLICY_ACTOR, reason=reason, facts=facts, stage=stage)

    return then


def _advance(
    store: StateStore, plan: RolloutSpec, request: dict[str, Any], evidence_of: EvidenceOf, now: datetime
) -> RampMove:
    rid = request["id"]
    stages = store.rollouts.stages(rid)
    ramp = plan.ramp
    facts = facts_for(store, plan, request)
    if not stages:
        production = store.registry.alias(PRODUCTION_ALIAS)
        if production is None:
            return RampMove(True, f"{rid}: promoted without a ramp (a first model has no production to compare with)")
        index_id = ready_index(store, request)
        if index_id is None:
            version = version_label(int(request["candidate_version"]))
            return RampMove(
                False,
                f"{rid}: the ramp waits for candidate {version}'s index (the training run's human_approval check "
                f"fills it); to promote without a ramp instead: {command(f'promote --approval {rid} --skip-ramp')}",
            )
        started = f"ramp stage 1/{len(ramp)} started at {_share(ramp[0])}"
        row = store.rollouts.next_stage(
            approval_id=rid,
            status=STOPPED,
            reason=RAMP_STARTS,
            actor=POLICY_ACTOR,
            stage=0,
            share=ramp[0],
            candidate_version=int(request["candidate_version"]),
            candidate_index_id=index_id,
            production_version=production,
            max_duration=plan.max_duration,
            now=now,
            then=_moving(store, rid, "ramp_start", started, facts),
        )
        return RampMove(False, f"{rid}: ramp stage 1/{len(ramp)} started: rollout #{row['id']}, {_share(ramp[0])}")
    last = stages[-1]
    stage = int(last["stage"])
    if last["status"] == COMPLETED and stage == len(ramp) - 1:
        return RampMove(True, f"{rid}: the ramp passed; promotion launches")  # a tick that failed after completing
    if last["status"] != ACTIVE:  # rolled back or halted: held for good, or for a person (the page says how)
        return RampMove(False, rolled_back=last["status"] == ROLLED_BACK)
    if stage >= len(ramp):
        why = f"ramp halted: the declared ramp {list(ramp)} has no stage {stage + 1} any more"
        store.rollouts.stop(
            reason=why, actor=POLICY_ACTOR, approval_id=rid, now=now, then=_moving(store, rid, "halt", why, facts)
        )
        return RampMove(False, f"{rid}: ramp halted (the declared ramp changed)")
    found = evidence_of(stages, len(stages) - 1)
    step = next_step(stage, ramp, found, overdue=now >= last["ends_at"], max_loss=plan.max_loss)
    if step.action == "wait":
        return RampMove(False)
    if step.action == "advance":
        assert step.next_stage is not None and step.next_share is not None
        row = store.rollouts.next_stage(
            approval_id=rid,
            status=COMPLETED,
            reason=step.reason,
            actor=POLICY_ACTOR,
            stage=step.next_stage,
            share=step.next_share,
            candidate_version=int(last["candidate_version"]),
            candidate_index_id=int(last["candidate_index_id"]),
            production_version=int(last["production_version"]),
            max_duration=plan.max_duration,
            now=now,
            then=_moving(store, rid, "ramp_advance", step.reason, facts, stage=step.next_stage),
        )
        return RampMove(False, f"{rid}: {step.reason}; stage {step.next_stage + 1} started (rollout #{row['id']})")
    status = {"promote": COMPLETED, "roll back": ROLLED_BACK, "halt": STOPPED}[step.action]
    reason = f"ramp halted: {step.reason}" if step.action == "halt" else step.reason
    event = {"promote": "ramp_pass", "roll back": "ramp_loss", "halt": "halt"}[step.action]
    store.rollouts.stop(
        reason=reason,
        actor=POLICY_ACTOR,
        status=status,
        approval_id=rid,
        now=now,
        then=_moving(store, rid, event, reason, facts),
    )
    if step.action == "promote":
        return RampMove(True, f"{rid}: {step.reason}; promotion launches")
    return RampMove(False, f"{rid}: {step.action}: {reason}", rolled_back=step.action == "roll back")


def stage_evidence(store: StateStore, plan: RolloutSpec, policy: OnlinePolicy | None = None) -> EvidenceOf:
    """A stage's evidence as the contract reads it (`approvals/stage_evidence.py`, the one computation every channel
    shows): the canary comparison of that stage's requests under `gate.online`'s limits."""
    rule = StageRule.of(plan, policy)

    def evidence_of(stages: list[dict[str, Any]], index: int) -> StageEvidence:
        return plan_evidence(stage_online_evidence(store, stages, index, rule))

    return evidence_of


def ramp_refusal(stages: list[dict[str, Any]]) -> str | None:
    """Why a request whose ramp rolled back may never be promoted (None: its ramp does not forbid it)."""
    rolled = [s for s in stages if s["status"] == ROLLED_BACK]
    if not rolled:
        return None
    return (
        f"its ramp rolled back at stage {int(rolled[-1]['stage']) + 1} ({rolled[-1]['reason']}); "
        "this approval can never promote the candidate"
    )


def ramp_held(stages: list[dict[str, Any]]) -> bool:
    """The ramp rolled back or halted: no promotion run follows from it."""
    return bool(stages) and stages[-1]["status"] in (ROLLED_BACK, STOPPED)


def ramp_text(request: dict[str, Any], stages: list[dict[str, Any]]) -> str:
    """What the request's page and Slack message say of its ramp ("" when it has none)."""
    if not stages:
        return ""
    last = stages[-1]
    where = f"stage {int(last['stage']) + 1} ({_share(float(last['share']))} of sessions)"
    production = version_label(int(last["production_version"]))
    if last["status"] == ACTIVE:
        return (
            f"Ramping: the candidate serves {where}. The next share starts when this stage rules out a loss with "
            "enough queries (rollout.min_queries, rollout.max_loss); a loss rolls back by itself. Production moves "
            "only after the last stage."
        )
    if last["status"] == ROLLED_BACK:
        return (
            f"Rolled back automatically: {last['reason']}. Traffic is back on production {production}; this "
            "approval can never promote the candidate."
        )
    if last["status"] == COMPLETED:
        return f"The ramp passed its last {where}; production moves to the candidate when the promotion run succeeds."
    by_hand = command(f"promote --approval {request['id']} --skip-ramp")
    return (
        f"The ramp stopped at {where}: {last['reason']}. Nothing was promoted; production stays on {production}. "
        f"To promote anyway, by hand: {by_hand}"
    )
