"""`runtime-ops status`: what the state store holds, pipeline by pipeline."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from runtime_ops.cli.common import shown_database_url, state_store
from runtime_ops.cli.request_evidence import ramp_lines
from runtime_ops.components.loading import load_specs
from runtime_ops.lifecycle.machine import IN_FLIGHT, describe
from runtime_ops.settings import get_settings
from runtime_ops.store.approvals.lifecycle import position_of
from runtime_ops.tags import CANDIDATE_ALIAS, PRODUCTION_ALIAS


def cmd_status(args: argparse.Namespace) -> int:
    settings = get_settings()
    specs = load_specs(settings)
    state_store()  # reachable and whole, before anything is printed
    if args.pipeline:
        specs = {args.pipeline: specs[args.pipeline]} if args.pipeline in specs else {}
        if not specs:
            print(f"error: no pipeline named {args.pipeline!r}", file=sys.stderr)
            return 2
    print(f"state store : {shown_database_url()}")
    for name, spec in specs.items():
        store = state_store(name)
        print(f"\npipeline {name} ({spec.source})")
        print(f"  landing     : {spec.landing.uri}")
        print(f"  batches     : {len(store.ledger.batches())} (corpus revision {store.ledger.corpus_revision()})")
        print(f"  documents   : {store.documents.document_counts()}")
        print(f"  models      : {[m['version'] for m in store.registry.models()]}")
        candidate, production = store.registry.alias(CANDIDATE_ALIAS), store.registry.alias(PRODUCTION_ALIAS)
        print(f"  candidate   : {candidate}   production: {production}")
        index = store.indexes.current_index()
        if index:
            behind = store.changes.pending(int(index["synced_seq"]))
            print(
                f"  index       : #{index['id']} model v{index['model_version']} in {index['backend']} "
                f"{index['location']} ({index['n_chunks']} chunks, {behind} changes behind)"
            )
        print(f"  vector store: {spec.vector_store.url or '$' + str(spec.vector_store.url_env)}")
        pending = store.requests.list_requests(status="pending")
        print(f"  pending approvals: {[r['id'] for r in pending]}")
        for row in store.lifecycle.in_states(IN_FLIGHT):  # approved candidates on their way to production
            where = describe(position_of(row))
            print(f"  on the way  : {row['approval_id']} candidate v{row['candidate_version']} {where}")
        ramped = next((r["approval_id"] for r in store.rollouts.history() if r["stage"] is not None), None)
        request = store.requests.get_request(ramped) if ramped else None
        if request is not None:  # the newest ramp, decided or not, with each stage's results
            print(f"  last ramp   : {request['id']} (candidate v{request['candidate_version']}, {request['status']})")
            for line in ramp_lines(store, request):
                print(f"    {line}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="summarise the state store, pipeline by pipeline")
    p.add_argument("--pipeline", default=None, help="only this pipeline (default: every declared one)")
    p.set_defaults(func=cmd_status)
