"""`runtime-ops approvals`, `retrain`, `promote`: decide as an authenticated operator, ask for a retrain, run the
promotion saga from the terminal."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime_ops import clock
from runtime_ops.approvals.gate import PromotionRefused, subject_label
from runtime_ops.approvals.lifecycle_gate import lifecycle_text, ready_to_promote, skip_ramp
from runtime_ops.approvals.operators import OperatorRefused, operator
from runtime_ops.approvals.requests import verify_promotion
from runtime_ops.approvals.rollback_facts import rollback_facts
from runtime_ops.cli.common import default_actor, print_table, request_store, state_store
from runtime_ops.cli.dev_operator import operator_key
from runtime_ops.cli.request_evidence import evidence_json, evidence_lines
from runtime_ops.components.loading import PipelineConfigError, get_spec
from runtime_ops.decisions.decide import decide
from runtime_ops.errors import UserError
from runtime_ops.lifecycle.machine import TransitionRefused
from runtime_ops.locks.factory import open_locker
from runtime_ops.models.sensors import request_retrain
from runtime_ops.online.stage_results import ramp_outcome
from runtime_ops.saga.engine import plan, run
from runtime_ops.settings import get_settings
from runtime_ops.vectors.factory import pipeline_vector_store

if TYPE_CHECKING:
    from runtime_ops.store import StateStore


def cmd_approvals_list(args: argparse.Namespace) -> int:
    """Every request with what it approves and, for a model candidate, where its ramp ended: "approved" with ramp
    "-" was promoted without one, "rolled back" or "halted" never promoted."""
    store = state_store(args.pipeline) if args.pipeline else state_store()
    rows = store.requests.list_requests(status=args.status)
    stages = store.rollouts.stages_by_request([r["id"] for r in rows])
    if args.json:
        for r in rows:
            r["evidence"] = evidence_json(store, r, live=False)
        print(json.dumps(rows, default=str, indent=2))
        return 0
    for r in rows:
        r["digest"] = r["candidate_digest"][:12]
        # What it approves: a model promotion's candidate, an alert's rollback, or an asset gate's materialization.
        facts = rollback_facts(r)
        r["candidate"] = (
            facts.label() if facts else f"v{r['candidate_version']}" if r.get("target") is None else r["target"]
        )
        r["ramp"] = ramp_outcome(stages.get(r["id"], []))
    print_table(rows, ["id", "pipeline", "status", "kind", "candidate", "ramp", "digest", "created_at", "decided_by"])
    return 0


def cmd_approvals_show(args: argparse.Namespace) -> int:
    """One request's story: what it approves (a model candidate, or a gated asset's materialization and its
    evidence), its state, its policy and its votes."""
    store = request_store(args.request_id)
    request = store.requests.get_request(args.request_id)
    if request is None:
        raise UserError(f"no approval request {args.request_id!r}; list them with: runtime-ops approvals list")
    lifecycle = lifecycle_text(store, request["id"])
    evidence = evidence_json(store, request)
    if args.json:
        votes = store.votes.for_request(request["id"])
        shown = {**request, "lifecycle": lifecycle, "evidence": evidence, "votes": votes}
        print(json.dumps(shown, default=str, indent=2))
        return 0
    facts = rollback_facts(request)
    if facts is not None:
        print(f"{request['id']}: {facts.title()} · {request['status']} ({request['kind']})")
    else:
        print(f"{request['id']}: {subject_label(request)} · {request['status']} ({request['kind']})")
    if lifecycle is not None:
        print(f"  candidate: {lifecycle}")
    print(f"  {'gate' if request.get('target') is not None else 'pipeline'}: {request['pipeline']}")
    print(f"  requested by {request['requested_by']} at {request['created_at']:%Y-%m-%d %H:%M} UTC")
    if request.get("expire_at") is not None:
        print(f"  expires {request['expire_at']:%Y-%m-%d %H:%M} UTC")
    if request.get("target") is not None:
        for name, value in (request.get("evidence") or {}).items():
            print(f"  evidence {name}: {value}")
    elif facts is not None:
        for label, line in facts.lines():
            print(f"  {label.lower()}: {line}")
    else:
        for line in evidence_lines(store, request, evidence or {}):
            print(f"  {line}")
    approvers = ", ".join(request.get("approvers") or []) or "anyone"
    print(f"  needs {request['required_approvals']} approval(s) of: {approvers}")
    for vote in store.votes.for_request(request["id"]):
        print(f"  {vote['vote']} by {vote['actor']} via {vote['channel']} at {vote['created_at']:%Y-%m-%d %H:%M} UTC")
    if request.get("decided_by"):
        reason = f": {request['decision_reason']}" if request.get("decision_reason") else ""
        print(f"  decided by {request['decided_by']}{reason}")
    return 0


def _operator_key(args: argparse.Namespace) -> str | None:
    if getattr(args, "key_file", None):
        try:
            return Path(args.key_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise UserError(f"cannot read --key-file {args.key_file}: {why}; name the file holding your key") from None
    return operator_key(get_settings())


def authenticate(store: StateStore, args: argparse.Namespace, *, request_id: str | None, action: str) -> str | None:
    """The approver id the operator's key decides as, or None (refusal printed and audited)."""
    try:
        return str(operator(store.api_keys, _operator_key(args), claimed=args.actor, now=clock.now()).approver)
    except OperatorRefused as exc:
        store.audit_log.append(
            event="attempt",
            request_id=request_id,
            actor=args.actor or default_actor(),
            channel="cli",
            outcome="unauthenticated",
            detail={"action": action, "message": str(exc), "api_key": exc.key_id},
            now=clock.now(),
        )
        print(f"error: {exc}", file=sys.stderr)
        return None


def _ramps(pipeline: str | None) -> bool:
    """The pipeline ramps an approved candidate up before promoting it (False when it is no longer declared)."""
    try:
        return pipeline is not None and get_spec(pipeline).rollout.ramps
    except PipelineConfigError:
        return False


def _decide(args: argparse.Namespace, approve: bool) -> int:
    store = request_store(args.request_id)
    actor = authenticate(store, args, request_id=args.request_id, action="approve" if approve else "reject")
    if actor is None:
        return 1
    request = store.requests.get_request(args.request_id)
    rollback = rollback_facts(request) if request is not None else None
    if rollback is not None and request is not None and request["status"] == "pending":
        # An alert's rollback: what it moves and why, not the target model's old evaluation.
        print(rollback.title())
        for label, line in rollback.lines():
            print(f"  {label.lower()}: {line}")
    elif request is not None and request["status"] == "pending":
        report = store.evaluations.get_eval_report(request["eval_report_id"])
        if report:  # the comparison, the verdict in words, the interval and the changed questions
            print(report["markdown"])
    outcome = decide(
        store,
        args.request_id,
        actor=actor,
        vote="approve" if approve else "reject",
        channel="cli",
        reason=args.reason,
        now=clock.now(),
    )
    print(outcome.message)
    if approve and getattr(args, "skip_ramp", False):
        return _skip_after_approval(store, outcome, actor, args.reason)
    if outcome.decided and rollback is not None:
        print(rollback.next_step(str((outcome.request or {}).get("status") or "")))
    elif outcome.decided and approve:
        if _ramps(store.pipeline):
            plan = get_spec(store.pipeline).rollout
            shares = ", ".join(f"{s:.0%}" for s in plan.ramp)
            print(
                f"The approvals sensor starts the ramp ({shares} of sessions) on its next tick; the promotion run "
                "launches after its last stage rules out a loss larger than rollout.max_loss, and a loss rolls it back."
            )
        elif request is not None and request.get("target") is not None:
            print("The gate's approval sensor launches its on_approval run on its next tick (run key = approval id).")
        else:
            print("The approvals sensor launches the promotion run on its next tick (run key = approval id).")
    return 0 if outcome.counted else 1


def _skip_after_approval(store: StateStore, outcome: Any, actor: str, reason: str | None) -> int:
    """`approve --skip-ramp`: once the request is approved, the person's explicit skip of the declared ramp."""
    request = outcome.request
    if not outcome.counted or request is None:
        return 1
    if request["status"] != "approved":
        print(f"not skipping the ramp yet: {request['id']} is {request['status']}; run again once it is approved")
        return 0
    if not _ramps(store.pipeline):
        print(f"{store.pipeline} declares no ramp: nothing to skip")
        return 0
    try:
        why = skip_ramp(store, get_spec(str(store.pipeline)).rollout, request, actor=actor, reason=reason or "")
    except TransitionRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{why}. The approvals sensor launches the promotion run on its next tick (run key = approval id).")
    return 0


def cmd_retrain(args: argparse.Namespace) -> int:
    """Ask the pipeline's corpus sensor for one retrain; the request names the authenticated operator, who then
    cannot approve the candidate it produces (four eyes)."""
    store = state_store(get_spec(args.pipeline).name)
    actor = authenticate(store, args, request_id=None, action="retrain")
    if actor is None:
        return 1
    request_id = request_retrain(store.retraining, store.ledger, reason=args.reason, requested_by=actor)
    print(
        f"retrain request #{request_id} for {store.pipeline} by {actor}: the corpus sensor launches it on its next tick"
    )
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    """Promote the approved candidate (the same saga as production_model), or print what it would change."""
    # numpy: kept out of every command's start (runtime_ops.cli imports this module)
    from runtime_ops.models import promotion_saga as p

    if args.approval and not args.pipeline:
        store = request_store(args.approval)
    else:
        store = state_store(get_spec(args.pipeline).name)
    try:
        version, request = verify_promotion(
            store.evaluations, store.requests, store.rollouts, approval_id=args.approval
        )
    except PromotionRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    spec = get_spec(store.pipeline)
    if args.skip_ramp and not args.dry_run:
        actor = authenticate(store, args, request_id=request["id"], action="skip_ramp")
        if actor is None:
            return 1
        try:
            print(skip_ramp(store, spec.rollout, request, actor=actor, reason=args.reason or "promoted by hand"))
        except TransitionRefused as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    vectors = pipeline_vector_store(spec.vector_store)
    refusal = p.backfill_refusal(store.indexes, vectors, version)
    if refusal is not None:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
    if args.dry_run:
        print(f"dry run: promoting candidate v{version} ({request['id']}) would make these transitions:")
        steps = p.promotion_steps(store, vectors, version=version, request=request, lease=None, run_id=None)
        for line in plan(steps, {}):
            print(f"  - {line}")
        print("nothing was changed")
        return 0
    held = ready_to_promote(store, spec.rollout, request, actor="cli", by_training_run=False)
    if held is not None:
        print(f"error: refusing to promote: {held}", file=sys.stderr)
        return 1
    assert store.pipeline is not None, "the promotion lock is per pipeline: a scoped store"
    lock = p.lock_name(store.pipeline)
    with open_locker(get_settings()).hold(lock, ttl_ms=p.LOCK_TTL_MS, wait_s=p.LOCK_WAIT_S) as lease:
        steps = p.promotion_steps(store, vectors, version=version, request=request, lease=lease, run_id=None, log=print)
        outcome = run(
            p.saga_id(request),
            steps,
            {},
            p.StoreJournal(store.sagas, "cli"),
            resume=not args.compensate,
            on_event=print,
        )
    print(f"saga {outcome.saga_id}: {outcome.status}")
    return 0 if outcome.status == "done" or (args.compensate and outcome.status == "compensated") else 1


def add_operator_arguments(p: argparse.ArgumentParser) -> None:
    """`--as` and `--key-file`: who an operator's command decides as."""
    p.add_argument(
        "--as",
        dest="actor",
        default=None,
        help="the approver id you decide as; optional, and only checked: your operator key says who decides",
    )
    p.add_argument(
        "--key-file", default=None, help="file holding your operator key (default: $RUNTIME_OPS_OPERATOR_KEY)"
    )


def register(sub: Any) -> None:
    approvals = sub.add_parser("approvals", help="list and decide promotion approval requests")
    asub = approvals.add_subparsers(dest="action", required=True)
    p = asub.add_parser("list", help="list approval requests")
    p.add_argument("--status", choices=["pending", "approved", "rejected", "superseded", "expired"])
    p.add_argument("--pipeline", default=None, help="only this pipeline's requests (default: every pipeline)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_approvals_list)
    p = asub.add_parser("show", help="one request: what it approves, its evidence, state, policy and votes")
    p.add_argument("request_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_approvals_show)
    for name, approve in (("approve", True), ("reject", False)):
        p = asub.add_parser(name, help=f"{name} a pending request")
        p.add_argument("request_id")
        add_operator_arguments(p)
        p.add_argument("--reason", required=not approve, default=None)
        if approve:
            p.add_argument(
                "--skip-ramp",
                action="store_true",
                help="promote without the pipeline's declared ramp (audited as a skip, shown on the page)",
            )
        p.set_defaults(func=lambda a, approve=approve: _decide(a, approve))

    p = sub.add_parser("retrain", help="ask a pipeline for one retrain, as the operator your key names")
    p.add_argument("pipeline")
    p.add_argument("--reason", required=True)
    p.add_argument("--as", dest="actor", default=None, help="optional; only checked against your operator key")
    p.add_argument(
        "--key-file", default=None, help="file holding your operator key (default: $RUNTIME_OPS_OPERATOR_KEY)"
    )
    p.set_defaults(func=cmd_retrain)

    p = sub.add_parser("promote", help="promote the approved candidate (the production_model saga) or --dry-run")
    p.add_argument("--approval", default=None, help="approval request id (default: the current candidate's)")
    p.add_argument("--pipeline", default=None, help="the pipeline (default: the approval's, else the only one)")
    p.add_argument("--dry-run", action="store_true", help="print the transitions; change nothing")
    p.add_argument(
        "--compensate", action="store_true", help="roll back an interrupted promotion instead of finishing it"
    )
    p.add_argument(
        "--skip-ramp",
        action="store_true",
        help="promote without (the rest of) the declared ramp: an operator's explicit decision, audited",
    )
    p.add_argument("--reason", default=None, help="why the ramp is skipped (with --skip-ramp)")
    add_operator_arguments(p)
    p.set_defaults(func=cmd_promote)
