"""`runtime-ops rollouts list|show|stop` and `runtime-ops rollback`: an operator sees every rollout with its live
evidence and its candidate's lifecycle, stops one, and rolls production back to a version of their choosing. Stops
and rollbacks are an operator key's decisions, audited, and go through the candidate lifecycle like any other move."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from runtime_ops.cli.approvals import add_operator_arguments, authenticate
from runtime_ops.cli.common import print_table, state_store
from runtime_ops.components.loading import get_spec
from runtime_ops.controls.rollouts import (
    OperatorRefusal,
    list_rollouts,
    manual_rollback,
    show_rollout,
    stop_rollout,
)
from runtime_ops.errors import UserError
from runtime_ops.labels import version_label
from runtime_ops.locks.factory import open_locker
from runtime_ops.settings import get_settings
from runtime_ops.vectors.factory import pipeline_vector_store


def _pct(share: Any) -> str:
    return f"{float(share):.0%}" if share is not None else "-"


def cmd_list(args: argparse.Namespace) -> int:
    store = state_store(get_spec(args.pipeline).name) if args.pipeline else state_store()
    rows = list_rollouts(store, limit=args.limit)
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    for r in rows:
        r["share"] = _pct(r["share"])
        r["stage"] = "-" if r["stage"] is None else f"{int(r['stage']) + 1}"
        r["versions"] = f"{version_label(r['candidate_version'])} vs {version_label(r['production_version'])}"
    cols = ["id", "pipeline", "mode", "share", "stage", "status", "versions", "approval_id", "lifecycle", "started_at"]
    print_table(rows, cols)
    return 0


def _found(rollout_id: int) -> tuple[Any, Any]:
    """The store scoped to the pipeline of rollout `rollout_id`, and that pipeline's declaration."""
    row = state_store().rollouts.get(rollout_id)
    if row is None:
        raise UserError(f"no rollout #{rollout_id}; list them with: runtime-ops rollouts list")
    spec = get_spec(str(row["pipeline"]))
    return state_store(spec.name), spec


def cmd_show(args: argparse.Namespace) -> int:
    store, spec = _found(args.rollout_id)
    shown = show_rollout(store, args.rollout_id, spec.rollout, spec.gate.online)
    if args.json:
        print(json.dumps(shown, default=str, indent=2))
        return 0
    stage = "" if shown["stage"] is None else f", ramp stage {int(shown['stage']) + 1}"
    print(f"rollout #{shown['id']} of {shown['pipeline']}: {shown['mode']} at {_pct(shown['share'])}{stage}")
    print(
        f"  candidate {version_label(shown['candidate_version'])} (index #{shown['candidate_index_id']}) against "
        f"production {version_label(shown['production_version'])}"
    )
    print(f"  {shown['status']} since {shown['started_at']:%Y-%m-%d %H:%M:%S} UTC, until {shown['ends_at']:%H:%M:%S}")
    if shown.get("reason"):
        print(f"  ended: {shown['reason']}")
    if shown.get("approval_id"):
        print(f"  request {shown['approval_id']}: candidate {shown['lifecycle'] or 'no lifecycle'}")
    evidence = shown["evidence"]
    print(
        f"  evidence: {evidence.get('verdict')} over {evidence.get('queries')} queries "
        f"(min {evidence.get('min_queries')}), judged on the {evidence.get('decided_by')}"
    )
    if evidence.get("caveat"):
        print(f"  note: {evidence['caveat']}")
    for s in shown["stages"]:
        why = f": {s['reason']}" if s.get("reason") else ""
        print(f"  stage {int(s['stage']) + 1} (#{s['id']}, {_pct(s['share'])}): {s['status']}{why}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    store, spec = _found(args.rollout_id)
    actor = authenticate(store, args, request_id=None, action="stop_rollout")
    if actor is None:
        return 1
    try:
        stopped = stop_rollout(store, args.rollout_id, spec.rollout, actor=actor, reason=args.reason)
    except OperatorRefusal as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    after = f"; its candidate is {stopped['lifecycle']}" if stopped.get("lifecycle") else ""
    print(f"rollout #{stopped['id']} stopped by {actor}: traffic is back on production{after}")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    spec = get_spec(args.pipeline)
    store = state_store(spec.name)
    actor = authenticate(store, args, request_id=None, action="rollback")
    if actor is None:
        return 1
    vectors = pipeline_vector_store(spec.vector_store)
    try:
        outcome = manual_rollback(
            store,
            open_locker(get_settings()),
            vectors,
            to_version=args.to,
            actor=actor,
            reason=args.reason,
            channel="cli",
        )
    except OperatorRefusal as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{outcome.message}; serving index #{outcome.index_id}")
    return 0


def register(sub: Any) -> None:
    rollouts = sub.add_parser("rollouts", help="list, show and stop rollouts (live comparisons and ramps)")
    rsub = rollouts.add_subparsers(dest="action", required=True)
    p = rsub.add_parser("list", help="rollouts, newest first, with their candidate's lifecycle")
    p.add_argument("--pipeline", default=None, help="only this pipeline's (default: every pipeline)")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)
    p = rsub.add_parser("show", help="one rollout: its live evidence and, for a ramp, every stage")
    p.add_argument("rollout_id", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)
    p = rsub.add_parser("stop", help="stop an active rollout (a ramp stage halts its candidate), as an operator")
    p.add_argument("rollout_id", type=int)
    p.add_argument("--reason", required=True)
    add_operator_arguments(p)
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("rollback", help="roll a pipeline's production back to VERSION, as an operator")
    p.add_argument("pipeline")
    p.add_argument("--to", type=int, required=True, help="the model version production returns to")
    p.add_argument("--reason", required=True)
    add_operator_arguments(p)
    p.set_defaults(func=cmd_rollback)
