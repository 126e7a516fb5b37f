"""A model-based test of the candidate lifecycle on the real state store (SQLite and PostgreSQL): hypothesis drives
every actor that may move a candidate — new candidates from training runs (supersession), the candidate's index
becoming ready, people approving (also within the training run, also with an explicit skip of the ramp) and
rejecting, the training run's own production_model, the approvals sensor's real tick body, the promotion runs it
launches, canary evidence better / worse / too little, the deadline, the operator's stop and rollback, and a restart
of the store between any two steps — in any order. After every step:

- production moved only through a candidate whose ramp passed (the pipeline declares one), a person's audited skip,
  a first model, or an audited rollback;
- every ramp stage that passed ruled out a loss larger than rollout.max_loss on the evidence it was judged by;
- no candidate ended twice, and nothing moved it after it ended;
- what `runtime-ops approvals show --json` and the rollouts list (CLI and API) say of a candidate equals the store;
  a ramp stage runs only for a ramping candidate.

Each example runs in a pipeline of its own, so the examples share one database per backend.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import dagster as dg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from runtime_ops import clock
from runtime_ops.approvals.announce import Announcer
from runtime_ops.approvals.lifecycle_gate import ready_to_promote, skip_ramp
from runtime_ops.approvals.requests import evaluate_gate, verify_promotion
from runtime_ops.approvals.sensors import approvals_tick
from runtime_ops.approvals.stage_evidence import StageRule, plan_evidence, stage_online_evidence
from runtime_ops.cli import main as cli
from runtime_ops.components.loading import get_spec
from runtime_ops.controls.rollouts import OperatorRefusal, list_rollouts, stop_rollout
from runtime_ops.decisions.decide import decide
from runtime_ops.lifecycle.machine import ENDED, TransitionRefused, describe
from runtime_ops.pipeline.spec import RolloutSpec
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store import schema as t
from runtime_ops.store.approvals.lifecycle import position_of
from runtime_ops.tags import APPROVAL_TAG, PRODUCTION_ALIAS
from runtime_ops_tests.support.approvals_support import FakeClock, make_candidate
from runtime_ops_tests.support.canary_traffic import canary_traffic

RAMP = RolloutSpec(mode="canary", share=0.5, min_queries=20, max_duration=timedelta(hours=1), ramp=(0.5, 1.0))
POLICY = RequestPolicy(approvers=("alice", "bob"), expire_after=timedelta(days=1))
EVIDENCE = {"better": (0.8, 0.3), "worse": (0.1, 0.8), "equal": (0.5, 0.5)}
EXAMPLES = {"sqlite": 25, "postgresql": 12}
_pipelines = itertools.count(1)
explored = {"examples": 0, "steps": 0, "passed stages": 0}


def _cli_json(args: list[str]) -> Any:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(args) == 0
    return json.loads(out.getvalue())


class Lifecycle(RuleBasedStateMachine):
    url: str = ""
    instance: dg.DagsterInstance  # one for every example: the sensor's run lookups find nothing in it

    def __init__(self) -> None:
        super().__init__()
        explored["examples"] += 1
        self.pipeline = f"mbt{next(_pipelines)}"
        self.store = self._open()
        self.spec = replace(get_spec("demo"), name=self.pipeline, rollout=RAMP)
        self.clock = FakeClock()
        self.launched: set[str] = set()
        self.fence = 0
        self.seed = 0

    def _open(self) -> StateStore:
        return open_store(self.url, get_settings(), pipeline=self.pipeline, migrate=False)

    def _alias(self, version: int, *, actor: str, approval_id: str | None) -> None:
        self.fence += 1
        self.store.registry.set_alias(PRODUCTION_ALIAS, version, actor=actor, approval_id=approval_id,
                                      fence=self.fence)  # fmt: skip

    def _requests(self, status: str | None = None) -> list[dict[str, Any]]:
        return self.store.requests.list_requests(status=status)

    @initialize(ramp=st.booleans())
    def production_v1(self, ramp: bool) -> None:
        """v1 serving (promoted before any lifecycle); with or without a declared ramp."""
        self.spec = replace(self.spec, rollout=RAMP if ramp else replace(RAMP, ramp=()))
        report = make_candidate(self.store, version_seed=f"{self.pipeline}-v1", production=None)
        self._alias(int(report["candidate_version"]), actor="policy", approval_id=None)

    # ------------------------------------------------------------------ the training run
    @rule(auto=st.booleans(), ready=st.booleans())
    def train(self, auto: bool, ready: bool) -> None:
        """A training run's evaluation and human_approval check: a new candidate, its request opened (a policy
        approval when `auto`), older undecided candidates superseded; its index filled within the run (`ready`)."""
        self.seed += 1
        report = make_candidate(self.store, version_seed=f"{self.pipeline}-{self.seed}")
        if auto:
            with self.store.tx() as conn:
                conn.execute(
                    t.eval_reports.update()
                    .where(t.eval_reports.c.id == report["id"])
                    .values(verdict={**report["verdict"], "auto_approve": True, "reason": "clearly better"})
                )
        evaluate_gate(self.store, requested_by="run:train", policy=POLICY, now=clock.now())
        if ready:
            self.index_ready()

    @rule()
    def index_ready(self) -> None:
        """The check's rollout starter filled the newest candidate's index (minutes, in the real run)."""
        report = self.store.evaluations.latest_eval_report()
        if report is None:
            return
        version = int(report["candidate_version"])
        if any(i["model_version"] == version for i in self.store.indexes.list_indexes()):
            return
        index = self.store.indexes.create_index(model_version=version, backend="lance", location="mbt", dim=8,
                                                synced_seq=0, run_id=None)  # fmt: skip
        self.store.indexes.mark_synced(index["id"], synced_seq=0, n_chunks=1, corpus_revision=1)

    @rule()
    def training_run_promotes(self) -> None:
        """The training run's production_model: the decision re-verified, then the lifecycle asked to launch."""
        try:
            version, request = verify_promotion(self.store.evaluations, self.store.requests, self.store.rollouts)
        except Exception:
            return
        if ready_to_promote(self.store, self.spec.rollout, request, actor="run:train", by_training_run=True) is None:
            self._alias(version, actor=str(request["decided_by"] or "policy"), approval_id=request["id"])

    # ------------------------------------------------------------------ people
    @rule(data=st.data(), approve=st.booleans(), skip=st.booleans())
    def person_decides(self, data: st.DataObject, approve: bool, skip: bool) -> None:
        pending = self._requests("pending")
        if not pending:
            return
        request = data.draw(st.sampled_from(pending))
        vote = "approve" if approve else "reject"
        outcome = decide(self.store, request["id"], actor="alice", vote=vote, channel="cli", now=clock.now(),
                         reason=None if approve else "worse")  # fmt: skip
        if approve and skip and outcome.decided:
            with contextlib.suppress(TransitionRefused):
                skip_ramp(self.store, self.spec.rollout, outcome.request or request, actor="alice", reason="urgent")

    @rule(kind=st.sampled_from(sorted(EVIDENCE)))
    def approved_and_ramping(self, kind: str) -> None:
        """The common path, as one step: a person approves the newest pending candidate once its index is ready, the
        sensor starts its ramp, and a stage's worth of traffic flows while it ticks."""
        pending = self._requests("pending")[:1]
        if not pending:
            return
        self.index_ready()
        decide(self.store, pending[0]["id"], actor="alice", vote="approve", channel="cli", now=clock.now())
        self.sensor_tick()
        self.traffic(kind, 60, tick=True)

    @rule()
    def deadline_passes(self) -> None:
        self.store.deadlines.expire_due(clock.now() + timedelta(days=2))

    # ------------------------------------------------------------------ the approvals sensor and its runs
    @rule()
    def sensor_tick(self) -> None:
        announcer = Announcer(store=self.store, link_secret="s" * 32, public_url="http://127.0.0.1:9",
                              dagster_url="http://127.0.0.1:9", emit=lambda _: None)  # fmt: skip
        context = dg.build_sensor_context(instance=self.instance)
        result = approvals_tick(context, self.store, announcer, self.spec)
        for run in getattr(result, "run_requests", None) or []:
            assert run.tags[APPROVAL_TAG] == run.run_key
            self.launched.add(str(run.run_key))

    @precondition(lambda self: bool(self.launched))
    @rule(data=st.data())
    def promotion_run(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.launched)))
        self.launched.discard(rid)
        self.store.notifications.mark_request_launched(rid, f"run-{rid}")
        try:
            version, request = verify_promotion(self.store.evaluations, self.store.requests, self.store.rollouts,
                                                approval_id=rid)  # fmt: skip
        except Exception:
            return
        if ready_to_promote(self.store, self.spec.rollout, request, actor=f"run-{rid}", by_training_run=False) is None:
            self._alias(version, actor=str(request["decided_by"]), approval_id=rid)

    # ------------------------------------------------------------------ live traffic, time, operators
    @rule(kind=st.sampled_from(sorted(EVIDENCE)), n=st.sampled_from([6, 60]), tick=st.booleans())
    def traffic(self, kind: str, n: int, tick: bool) -> None:
        """Live traffic on the active rollout, and (`tick`) the approvals sensor's tick while it flows."""
        active = self.store.rollouts.active()
        if active is None:
            return
        candidate, production = EVIDENCE[kind]
        self.seed += 1
        canary_traffic(self.store, active, n=n, candidate_rate=candidate, production_rate=production, seed=self.seed)
        if tick:
            self.sensor_tick()

    @rule()
    def operator_stops(self) -> None:
        active = self.store.rollouts.active()
        if active is not None:
            with contextlib.suppress(OperatorRefusal):
                stop_rollout(self.store, int(active["id"]), self.spec.rollout, actor="carol", reason="looks off")

    @rule()
    def operator_rolls_back(self) -> None:
        """An audited rollback to v1: what the rollback saga's alias step writes."""
        if self.store.registry.alias(PRODUCTION_ALIAS) in (None, 1):
            return
        self.store.audit_log.append(event="rollback_requested", actor="carol", channel="cli", outcome="accepted",
                                    detail={"pipeline": self.pipeline, "to_version": 1})  # fmt: skip
        self._alias(1, actor="rollback:carol", approval_id="manual-mbt")

    @rule()
    def restart(self) -> None:
        """The process dies between two steps: everything is read again from the database."""
        self.store.engine.dispose()
        self.store = self._open()

    # ------------------------------------------------------------------ invariants
    @invariant()
    def production_moved_only_through_the_gate(self) -> None:
        explored["steps"] += 1
        ramp_declared = self.spec.rollout.ramps
        for move in self.store.registry.alias_history(PRODUCTION_ALIAS):
            actor, rid = str(move.get("actor") or ""), move.get("approval_id")
            if move.get("old_target") is None or actor.startswith(("rollback:", "compensation")):
                continue
            row = self.store.lifecycle.get(str(rid)) if rid else None
            assert row is not None, f"production moved outside the lifecycle: {move}"
            moves = [r["detail"]["move"] for r in self.store.audit_log.records(str(rid)) if r["event"] == "lifecycle"]
            assert "promoted" in moves, moves
            if ramp_declared:
                assert "ramp_pass" in moves or "skip_ramp" in moves, f"{rid} skipped the declared ramp: {moves}"

    @invariant()
    def a_passed_stage_ruled_out_a_loss(self) -> None:
        """Every stage that passed had, on the evidence it was judged by, a win or an interval whose lower bound
        rules out a loss larger than max_loss (the last stage, at 100%, against production's earlier requests)."""
        rule = StageRule.of(self.spec.rollout, self.spec.gate.online)
        for request in self._requests()[:3]:
            stages = self.store.rollouts.stages(request["id"])
            for index, stage in enumerate(stages):
                if stage["status"] != "completed":
                    continue
                found = plan_evidence(stage_online_evidence(self.store, stages, index, rule))
                explored["passed stages"] += 1
                passed = found.verdict == "better" or (found.low is not None and found.low >= -rule.max_loss)
                assert passed and found.queries >= rule.min_queries, (stage, found)

    @invariant()
    def nothing_ends_twice(self) -> None:
        for request in self._requests():
            records = [r for r in self.store.audit_log.records(request["id"]) if r["event"] == "lifecycle"]
            ends = [i for i, r in enumerate(records) if r["outcome"] in ENDED]
            assert len(ends) <= 1, [r["detail"] for r in records]
            if ends:
                assert ends[0] == len(records) - 1, [r["detail"] for r in records]

    @invariant()
    def channels_show_the_store(self) -> None:
        newest = self._requests()[:1]
        if not newest:
            return
        row = self.store.lifecycle.get(newest[0]["id"])
        shown = _cli_json(["approvals", "show", newest[0]["id"], "--json"])["lifecycle"]
        assert shown == (describe(position_of(row)) if row is not None else None)
        for rollout in list_rollouts(self.store, limit=5):  # what `rollouts list` and GET /api/rollouts show
            row = self.store.lifecycle.get(str(rollout["approval_id"]))
            assert rollout["lifecycle"] == (describe(position_of(row)) if row is not None else None)
        active = self.store.rollouts.active()
        if active is not None and active.get("approval_id"):
            lifecycle = self.store.lifecycle.get(str(active["approval_id"]))
            if active.get("stage") is not None:  # a ramp stage runs only for a ramping candidate
                assert lifecycle is not None and lifecycle["state"] == "ramping", lifecycle


@pytest.mark.slow(seconds=60)
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_lifecycle_holds_under_any_interleaving(
    backend: str, env: Any, tmp_path: Any, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    url = request.getfixturevalue("postgres_url") if backend == "postgresql" else None
    env(**({"database_url": url} if url else {}))
    settings_ = get_settings()
    open_store(settings_.resolved_database_url, settings_).engine.dispose()  # migrated once
    Lifecycle.url = settings_.resolved_database_url
    Lifecycle.instance = dg.DagsterInstance.ephemeral()
    explored.update({"examples": 0, "steps": 0, "passed stages": 0})
    started = time.monotonic()
    run_state_machine_as_test(
        Lifecycle,
        settings=settings(
            max_examples=EXAMPLES[backend],
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            database=None,
        ),
    )
    with capsys.disabled():
        print(f"\nlifecycle model ({backend}): {explored['examples']} examples, {explored['steps']} checked steps, "
              f"{explored['passed stages']} passed stages checked, "
              f"{time.monotonic() - started:.0f} s")  # fmt: skip
    assert explored["examples"] >= EXAMPLES[backend]
