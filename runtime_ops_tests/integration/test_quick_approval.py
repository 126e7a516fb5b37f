"""A person approving within a second of the request opening, while the training run still fills the candidate's
index, does not promote around the declared ramp: the training run leaves production alone, the approvals sensor
starts the ramp once the index is ready, and production moves only after the last stage passes (SQLite and
PostgreSQL). Before the lifecycle, the training run's own production_model promoted such a candidate at once."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from runtime_ops import clock
from runtime_ops.decisions.decide import decide
from runtime_ops.demo import CORPUS_DIR
from runtime_ops.store import StateStore
from runtime_ops.tags import APPROVAL_TAG
from runtime_ops_tests.support.approvals_support import operator_cli
from runtime_ops_tests.support.canary_traffic import canary_traffic
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow, serving_v1
from runtime_ops_tests.support.own_corpus import declare_pipeline

ROLLOUT = (
    "  rollout: {mode: interleave, share: 0.5, min_queries: 20, max_duration: 2d, ramp: [0.5, 1.0]}\n"
    "  approvals: {approvers: [alice]}\n"
)


class QuickApprover(threading.Thread):
    """Approves the first pending request the moment it appears (polling every 20 ms), as alice."""

    def __init__(self, store: StateStore) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.stop = threading.Event()
        self.after_s: float | None = None
        self.request_id: str | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            pending = self.store.requests.list_requests(status="pending")
            if pending:
                request = pending[0]
                outcome = decide(
                    self.store, request["id"], actor="alice", vote="approve", channel="cli", now=clock.now()
                )
                assert outcome.decided, outcome.message
                self.after_s = (clock.now() - request["created_at"]).total_seconds()
                self.request_id = request["id"]
                return
            time.sleep(0.02)


@pytest.mark.slow(seconds=30)  # alone on 2 cores (Dec 2026), each backend
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_approval_within_a_second_waits_for_the_ramp(
    backend: str, env: Any, dagster_instance: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    landing, pipelines = tmp_path / "landing", tmp_path / "pipelines"
    declare_pipeline(pipelines, "demo", landing, ROLLOUT)
    url = request.getfixturevalue("postgres_url") if backend == "postgresql" else None
    env(landing=str(landing), RUNTIME_OPS_PIPELINES_DIR=str(pipelines), **NEEDS_A_HUMAN,
        **({"database_url": url} if url else {}))  # fmt: skip
    store, _ = serving_v1(landing, dagster_instance)
    store = store.scoped("demo")
    flow = Flow(dagster_instance)
    shutil.copytree(CORPUS_DIR / "stdlib" / "text", landing / "stdlib" / "text")
    flow.tick_and_run("landing_sensor")

    approver = QuickApprover(store)
    approver.start()
    [train] = flow.tick_and_run("corpus_sensor")  # the training run: its check opens the request, then fills the index
    approver.stop.set()
    approver.join(5)
    assert approver.request_id is not None and approver.after_s is not None and approver.after_s < 1.0
    rid = approver.request_id

    # The training run succeeded and left production alone: a person's approval is the approvals sensor's to launch.
    assert train.success
    assert store.registry.alias("production") == 1
    assert not [m for m in train.get_asset_materialization_events() if m.asset_key.path[-1] == "production_model"]
    lifecycle = store.lifecycle.get(rid)
    assert lifecycle is not None and lifecycle["state"] == "approved"

    # The sensor starts the ramp on the index the training run filled; production stays until its last stage.
    assert flow.tick("approvals_sensor") == []
    [stage0] = store.rollouts.stages(rid)
    assert (stage0["stage"], stage0["share"], stage0["status"]) == (0, 0.5, "active")
    assert (store.lifecycle.get(rid) or {})["state"] == "ramping"
    assert flow.tick("approvals_sensor") == [] and store.registry.alias("production") == 1  # no evidence: it waits

    canary_traffic(store, stage0, n=200, candidate_rate=0.7, production_rate=0.5, seed=1)
    assert flow.tick("approvals_sensor") == []  # stage 1 passed: stage 2 starts
    stage1 = store.rollouts.stages(rid)[-1]
    assert (stage1["stage"], stage1["status"]) == (1, "active") and store.registry.alias("production") == 1
    assert (store.lifecycle.get(rid) or {})["stage"] == 1

    canary_traffic(store, stage1, n=100, candidate_rate=0.7, production_rate=0.5, seed=2)
    [launch] = flow.tick("approvals_sensor")  # the last stage passed: the promotion launches, once
    assert launch.run_key == rid and launch.tags[APPROVAL_TAG] == rid
    assert (store.lifecycle.get(rid) or {})["state"] == "promoting"
    assert flow.run("approvals_sensor", launch).success
    assert store.registry.alias("production") == 2
    assert (store.lifecycle.get(rid) or {})["state"] == "promoted"
    runs = dagster_instance.get_runs(filters=dg.RunsFilter(tags={APPROVAL_TAG: rid}))
    assert len(runs) == 1

    # The request's audit chain tells the candidate's whole path, intact.
    moves = [r["detail"]["move"] for r in store.audit_log.records(rid) if r["event"] == "lifecycle"]
    assert moves == ["open", "approve", "ramp_start", "ramp_advance", "ramp_pass", "promoted"]
    assert store.audit_log.verify().ok


@pytest.mark.slow(seconds=25)  # alone on 2 cores (Dec 2026)
def test_a_policy_approval_ramps_too(env: Any, dagster_instance: Any, tmp_path: Path) -> None:
    """A candidate the offline policy approves at once is not promoted by its training run either when the pipeline
    declares a ramp: the check readies its index and the approvals sensor starts stage 1 on it."""
    landing, pipelines = tmp_path / "landing", tmp_path / "pipelines"
    declare_pipeline(pipelines, "demo", landing, ROLLOUT)
    env(landing=str(landing), RUNTIME_OPS_PIPELINES_DIR=str(pipelines), RUNTIME_OPS_AUTO_APPROVE_MARGIN="0.0",
        RUNTIME_OPS_MAX_REGRESSION="1.0")  # fmt: skip
    store, _ = serving_v1(landing, dagster_instance)
    store = store.scoped("demo")
    flow = Flow(dagster_instance)
    shutil.copytree(CORPUS_DIR / "stdlib" / "text", landing / "stdlib" / "text")
    flow.tick_and_run("landing_sensor")
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success and store.registry.alias("production") == 1
    [request] = [r for r in store.requests.list_requests() if r["candidate_version"] == 2]
    assert request["kind"] == "policy" and request["status"] == "approved"
    assert (store.lifecycle.get(request["id"]) or {})["state"] == "approved"
    [check] = [e for e in train.get_asset_check_evaluations() if e.check_name == "human_approval"]
    assert "is ready for its ramp" in str(check.metadata["rollout"].value)

    assert flow.tick("approvals_sensor") == []
    [stage0] = store.rollouts.stages(request["id"])
    assert (stage0["stage"], stage0["status"]) == (0, "active") and store.registry.alias("production") == 1
    assert (store.lifecycle.get(request["id"]) or {})["state"] == "ramping"

    # An operator stops the stage (on SQLite, where a read inside the stop's write transaction would wait on it): the
    # candidate halts, traffic goes back to production, and the ramp does not go on by itself.
    assert operator_cli(["rollouts", "stop", str(stage0["id"]), "--reason", "looks off", "--as", "carol"]) == 0
    assert (store.rollouts.get(stage0["id"]) or {})["status"] == "stopped"
    assert (store.lifecycle.get(request["id"]) or {})["state"] == "halted"
    assert flow.tick("approvals_sensor") == [] and store.rollouts.active() is None
