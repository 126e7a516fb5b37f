"""What a ramp stage must show before it passes, on the real state store (SQLite and PostgreSQL), driven through the
approvals sensor's ramp step (`advance_ramp` with the evidence it reads) and read back through `approvals show`:

- a clearly worse candidate (positive-feedback rate 0.25 against production's 0.40) whose stage has min_queries but
  too few queries to *show* the loss ("no difference yet": the interval crosses 0) does not pass: the interval does
  not rule out a loss larger than rollout.max_loss, so the stage waits and halts at max_duration, and production
  stays; the stage line every channel shows says what the ramp decided on;
- the last stage serves every session, so it has no production arm of its own: it is compared with production's
  requests in the earlier stages, and a candidate that collapses at 100% rolls back instead of passing on an
  interval of [-1, 1].
"""

from __future__ import annotations

import contextlib
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from runtime_ops import clock
from runtime_ops.approvals.ramp import advance_ramp, stage_evidence
from runtime_ops.approvals.requests import evaluate_gate
from runtime_ops.cli import main as cli
from runtime_ops.components.loading import get_spec
from runtime_ops.decisions.decide import decide
from runtime_ops.pipeline.spec import RolloutSpec
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.tags import PRODUCTION_ALIAS
from runtime_ops_tests.support.approvals_support import make_candidate
from runtime_ops_tests.support.canary_traffic import canary_traffic
from runtime_ops_tests.support.own_corpus import declare_pipeline

ROLLOUT = "  rollout: {mode: canary, share: 0.5, min_queries: 20, max_duration: 1h, ramp: [0.5, 1.0], max_loss: 0.1}\n"


def _approved_candidate(
    backend: str, env: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[StateStore, dict[str, Any], RolloutSpec]:
    """Production v1 serving; candidate v2 approved by alice with its index ready; no stage yet. The pipeline
    declares the ramp, so the channels judge its stages by the same rule as the ramp."""
    url = request.getfixturevalue("postgres_url") if backend == "postgresql" else None
    declare_pipeline(tmp_path / "pipelines", "demo", tmp_path / "landing", ROLLOUT)
    env(RUNTIME_OPS_PIPELINES_DIR=str(tmp_path / "pipelines"), **({"database_url": url} if url else {}))
    settings = get_settings()
    store = open_store(settings.resolved_database_url, settings, pipeline="demo")
    v1 = make_candidate(store, version_seed="v1", production=None)
    store.registry.set_alias(PRODUCTION_ALIAS, int(v1["candidate_version"]), actor="policy", approval_id=None,
                             fence=1)  # fmt: skip
    make_candidate(store, version_seed="v2")
    evaluate_gate(store, requested_by="run:train", policy=RequestPolicy(approvers=("alice",)), now=clock.now())
    [pending] = store.requests.list_requests(status="pending")
    index = store.indexes.create_index(model_version=int(pending["candidate_version"]), backend="lance",
                                       location="rule", dim=8, synced_seq=0, run_id=None)  # fmt: skip
    store.indexes.mark_synced(index["id"], synced_seq=0, n_chunks=1, corpus_revision=1)
    outcome = decide(store, pending["id"], actor="alice", vote="approve", channel="cli", now=clock.now())
    assert outcome.decided, outcome.message
    return store, store.requests.get_request(pending["id"]) or {}, get_spec("demo").rollout


def _tick(store: StateStore, plan: RolloutSpec, request: dict[str, Any], *, later: timedelta = timedelta(0)) -> Any:
    spec = get_spec("demo")
    return advance_ramp(store, plan, request, stage_evidence(store, plan, spec.gate.online), clock.now() + later)


def _shown(rid: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(["approvals", "show", rid, "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.fixture(params=["sqlite", "postgresql"])
def ramping(env: Any, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[StateStore, dict[str, Any], RolloutSpec]:
    """An approved candidate whose ramp's stage 1 (half the sessions) has just started, on each backend."""
    store, approved, plan = _approved_candidate(str(request.param), env, request, tmp_path)
    assert not _tick(store, plan, approved).promote
    return store, approved, plan


def test_a_clearly_worse_candidate_does_not_pass_on_too_few_queries(
    ramping: tuple[StateStore, dict[str, Any], RolloutSpec],
) -> None:
    store, approved, plan = ramping
    rid = approved["id"]
    [stage0] = store.rollouts.stages(rid)
    # 30 requests on each arm at true rates 0.25 and 0.40 (8/30 against 12/30): a loss of 15 points, but its
    # interval still reaches above 0.
    canary_traffic(store, stage0, n=60, candidate_rate=0.25, production_rate=0.4, seed=1)
    evidence = stage_evidence(store, plan)(store.rollouts.stages(rid), 0)
    assert evidence.verdict == "no difference yet" and evidence.queries >= plan.min_queries, evidence
    assert evidence.low is not None and evidence.low < -plan.max_loss, evidence

    move = _tick(store, plan, approved)
    assert not move.promote and move.message == ""  # it waits: no pass on an interval that allows the loss
    assert [s["status"] for s in store.rollouts.stages(rid)] == ["active"]

    move = _tick(store, plan, approved, later=timedelta(hours=2))  # max_duration passes: halted, never promoted
    assert not move.promote and "ramp halted" in move.message
    [halted] = store.rollouts.stages(rid)
    assert halted["status"] == "stopped"
    assert "a loss larger than max_loss 0.1 is not ruled out" in halted["reason"], halted["reason"]
    assert store.registry.alias(PRODUCTION_ALIAS) != approved["candidate_version"]
    assert (store.lifecycle.get(rid) or {})["state"] == "halted"

    # What every channel shows of the stage is what decided it: the same verdict, counts, interval and rule.
    [shown] = _shown(rid)["evidence"]["ramp"]["stages"]
    assert shown["verdict"] == "no difference yet" and shown["max_loss"] == 0.1
    assert shown["feedback_rate"]["low"] == pytest.approx(evidence.low)
    assert shown["queries"] == evidence.queries


def test_the_last_stage_is_compared_with_production_of_the_earlier_stages(
    ramping: tuple[StateStore, dict[str, Any], RolloutSpec],
) -> None:
    store, approved, plan = ramping
    rid = approved["id"]
    [stage0] = store.rollouts.stages(rid)
    canary_traffic(store, stage0, n=800, candidate_rate=0.55, production_rate=0.5, seed=1)
    assert not _tick(store, plan, approved).promote  # stage 1 passed: stage 2, every session, starts
    stage1 = store.rollouts.stages(rid)[-1]
    assert (stage1["stage"], stage1["share"], stage1["status"]) == (1, 1.0, "active")

    # At 100% only the candidate serves; it collapses. Its own stage has no production arm to compare with.
    canary_traffic(store, stage1, n=100, candidate_rate=0.15, production_rate=0.5, seed=2)
    assert store.query_log.online_inputs(int(stage1["id"])).production.requests == 0
    move = _tick(store, plan, approved)
    assert not move.promote and move.rolled_back, move
    last = store.rollouts.stages(rid)[-1]
    assert last["status"] == "rolled_back"
    assert "compared with production's 400 requests in the ramp's earlier stages" in last["reason"], last["reason"]
    assert (store.lifecycle.get(rid) or {})["state"] == "rolled_back"
    shown = _shown(rid)["evidence"]["ramp"]["stages"][-1]
    assert shown["verdict"] == "worse" and shown["feedback_rate"]["production"][1] == 400
    assert "no production arm at 100% of sessions" in shown["caveat"]
