"""A rollout's state in the store, on SQLite and PostgreSQL: the database keeps one active rollout per pipeline (a
second one is refused even when written around the repository), every start and stop is audited on its request's
chain, and the rollout ends where its reason happens: production moving, its request ending without approval (the
remove_canary compensation), its max_duration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from runtime_ops.approvals.deadlines import run_deadlines
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import RolloutConflict, StateStore, open_store
from runtime_ops.store import schema as t
from runtime_ops_tests.support.approvals_support import open_pending
from runtime_ops_tests.support.fencing import set_fenced


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    url = f"sqlite:///{tmp_path / 'state.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    return open_store(str(url), get_settings())


def _pending(store: StateStore, seed: str, expire_after: timedelta | None = None) -> tuple[dict[str, Any], int]:
    """A pending request for a candidate beside production v1, and the candidate's (complete) index id."""
    policy = RequestPolicy(approvers=("alice",), expire_after=expire_after)
    request = open_pending(store, policy, seed=seed, production_model=store.registry.alias("production") is None)
    if store.registry.alias("production") is None:
        set_fenced(store, "production", 1)
    index = store.indexes.create_index(
        model_version=request["candidate_version"], backend="lance", location="/x", dim=4, synced_seq=0, run_id=None
    )
    return request, int(index["id"])


def _start(store: StateStore, request: dict[str, Any], index_id: int, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"mode": "interleave", "share": 0.1, "max_duration": timedelta(days=7)} | kw
    return store.rollouts.start(
        approval_id=request["id"],
        candidate_version=request["candidate_version"],
        candidate_index_id=index_id,
        production_version=int(store.registry.alias("production") or 0),
        actor="gate",
        **args,
    )


def _events(store: StateStore, request_id: str) -> list[tuple[str, str | None]]:
    return [(r["event"], r["outcome"]) for r in store.audit_log.records(request_id) if r["event"].startswith("rollout")]


def test_one_active_rollout_per_pipeline_enforced_by_the_database(store: StateStore) -> None:
    request, index_id = _pending(store, "a")
    first = _start(store, request, index_id)
    assert store.rollouts.active() == first and first["status"] == "active" and first["production_version"] == 1
    with pytest.raises(RolloutConflict, match=f"already has an active rollout \\(#{first['id']}"):
        _start(store, request, index_id, mode="canary")
    # Around the repository (two starters racing past any check in code): the unique index refuses it.
    row = {k: v for k, v in first.items() if k != "id"}
    with pytest.raises(IntegrityError), store.tx() as conn:
        conn.execute(insert(t.rollouts).values(**row))
    # Another pipeline has its own.
    other = store.scoped("other")
    assert other.rollouts.active() is None
    assert _events(store, request["id"]) == [("rollout_started", "interleave")]
    assert len(store.rollouts.history()) == 1, "nothing half-written by the refused starts"


def test_production_moving_stops_the_rollout_in_the_same_write(store: StateStore) -> None:
    request, index_id = _pending(store, "a")
    started = _start(store, request, index_id)
    set_fenced(store, "production", request["candidate_version"], actor="alice")
    assert store.rollouts.active() is None
    ended = store.rollouts.get(started["id"])
    assert ended is not None
    assert (ended["status"], ended["reason"]) == (
        "stopped",
        f"production moved from v1 to v{request['candidate_version']}",
    )
    assert ended["ended_at"] is not None
    assert _events(store, request["id"]) == [("rollout_started", "interleave"), ("rollout_stopped", "stopped")]
    assert store.audit_log.verify().ok


def test_a_request_ending_without_approval_stops_its_rollout(store: StateStore) -> None:
    request, index_id = _pending(store, "a", expire_after=timedelta(hours=1))
    started = _start(store, request, index_id, mode="canary")
    later = datetime.now(UTC) + timedelta(hours=2)
    done = run_deadlines(store.deadlines, store.rollouts, later)
    assert done["expired"] == [request["id"]] and done["compensated"] == [request["id"]]
    ended = store.rollouts.get(started["id"])
    assert ended is not None and ended["status"] == "stopped"
    assert ended["reason"] == f"approval request {request['id']} was expired"
    [compensated] = [r for r in store.audit_log.records(request["id"]) if r["event"] == "compensated"]
    assert compensated["detail"]["rollout"]["rollout_id"] == started["id"]
    assert compensated["detail"]["removed"] is True, "the canary alias went with it"
    assert store.audit_log.verify().ok


def test_a_rollout_ends_after_its_max_duration(store: StateStore) -> None:
    request, index_id = _pending(store, "a")
    started = _start(store, request, index_id, max_duration=timedelta(hours=1))
    assert run_deadlines(store.deadlines, store.rollouts, datetime.now(UTC))["rollouts_ended"] == []
    assert run_deadlines(store.deadlines, store.rollouts, datetime.now(UTC) + timedelta(hours=2))["rollouts_ended"] == [
        f"rollout #{started['id']}"
    ]
    ended = store.rollouts.get(started["id"])
    assert ended is not None and ended["status"] == "completed" and ended["reason"].startswith("max_duration reached")
    assert _events(store, request["id"])[-1] == ("rollout_stopped", "completed")
    # Ended: a new one may start.
    assert _start(store, request, index_id)["status"] == "active"


def test_shadow_comparisons_add_up_on_the_row(store: StateStore) -> None:
    request, index_id = _pending(store, "a")
    started = _start(store, request, index_id, mode="shadow")
    store.rollouts.record_shadow(started["id"], overlap=0.6, production_s=0.010, candidate_s=0.020)
    store.rollouts.record_shadow(started["id"], overlap=1.0, production_s=0.010, candidate_s=0.010)
    row = store.rollouts.get(started["id"])
    assert row is not None and row["shadow_queries"] == 2
    assert row["shadow_overlap_sum"] == pytest.approx(1.6) and row["shadow_overlap_sq_sum"] == pytest.approx(1.36)
    assert row["shadow_log_latency_ratio_sum"] == pytest.approx(0.6931, abs=1e-3)


def test_rollouts_table_matches_its_migration(store: StateStore) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    assert [d for d in diffs if "rollouts" in repr(d)] == []


def test_a_request_gets_one_rollout_however_often_its_check_runs(store: StateStore, tmp_path: Path) -> None:
    from dataclasses import replace

    from runtime_ops.pipeline.spec import LandingSpec, PipelineSpec, RolloutSpec, VectorStoreSpec
    from runtime_ops.serving.rollout_start import start_rollout
    from runtime_ops.vectors.factory import pipeline_vector_store

    request, index_id = _pending(store, "a")
    started = _start(store, request, index_id, max_duration=timedelta(hours=1))
    spec = PipelineSpec(
        name="demo",
        landing=LandingSpec(uri=str(tmp_path)),
        golden_set=tmp_path,
        alert_rules=tmp_path,
        rollout=RolloutSpec(mode="canary"),
    )
    vectors = pipeline_vector_store(VectorStoreSpec(url=f"lance://{tmp_path / 'vectors'}"))
    assert start_rollout(store, spec, vectors, request) == f"rollout #{started['id']}: interleave at 0.1, active"
    run_deadlines(store.deadlines, store.rollouts, datetime.now(UTC) + timedelta(hours=2))  # it ran its course
    said = start_rollout(store, spec, vectors, request)
    assert said.startswith(f"rollout #{started['id']}: interleave at 0.1, completed: max_duration reached")
    assert store.rollouts.active() is None and len(store.rollouts.history()) == 1
    off = replace(spec, rollout=RolloutSpec())
    assert start_rollout(store, off, vectors, request) == "rollout: off (rollout.mode)"


def test_a_ramp_stage_at_its_deadline_without_enough_queries_halts_and_promotes_nothing(store: StateStore) -> None:
    from runtime_ops.approvals.ramp import advance_ramp, ramp_refusal, ramp_text
    from runtime_ops.online.rollout_plan import StageEvidence
    from runtime_ops.pipeline.spec import RolloutSpec

    scoped = store
    request, index_id = _pending(scoped, "r")
    _start(scoped, request, index_id, mode="canary", share=0.05)
    assert scoped.votes.cast_vote(request["id"], actor="alice", approve=True, channel="cli").outcome == "accepted"
    approved = scoped.requests.get_request(request["id"])
    assert approved is not None and approved["status"] == "approved"
    plan = RolloutSpec(mode="canary", min_queries=50, max_duration=timedelta(hours=1), ramp=(0.2, 1.0))
    seen: list[int] = []

    def few(stages: list[dict[str, Any]], index: int) -> StageEvidence:
        seen.append(int(stages[index]["id"]))
        return StageEvidence("not enough queries", 7, 50)

    now = datetime(2026, 12, 5, 9, tzinfo=UTC)
    started = advance_ramp(scoped, plan, approved, few, now)
    [stage] = scoped.rollouts.stages(request["id"])
    assert not started.promote and (stage["stage"], stage["share"], stage["mode"]) == (0, 0.2, "canary")
    # Before its deadline it waits; the plain rollout deadline leaves a ramp stage to the ramp.
    assert advance_ramp(scoped, plan, approved, few, now + timedelta(minutes=59)) == type(started)(False)
    assert scoped.rollouts.end_overdue(now + timedelta(hours=2)) == []
    halted = advance_ramp(scoped, plan, approved, few, now + timedelta(hours=1, seconds=1))
    assert not halted.promote and not halted.rolled_back and seen == [stage["id"], stage["id"]]
    [stage] = scoped.rollouts.stages(request["id"])
    assert stage["status"] == "stopped" and stage["reason"].startswith("ramp halted: stage 1/2 (20% of sessions)")
    assert "max_duration with not enough queries (7 queries, min_queries 50)" in stage["reason"]
    assert scoped.rollouts.active() is None
    # Held, not refused: nothing more happens by itself, and a person may still promote by hand.
    assert advance_ramp(scoped, plan, approved, few, now + timedelta(days=1)) == type(started)(False)
    assert ramp_refusal(scoped.rollouts.stages(request["id"])) is None
    text = ramp_text(approved, scoped.rollouts.stages(request["id"]))
    assert "Nothing was promoted" in text and f"promote --approval {request['id']}" in text
    assert _events(scoped, request["id"])[-2:] == [("rollout_started", "canary"), ("rollout_stopped", "stopped")]
    assert scoped.audit_log.verify().ok


def test_a_ramp_waits_while_another_rollout_holds_the_pipeline(store: StateStore) -> None:
    from runtime_ops.approvals.ramp import advance_ramp
    from runtime_ops.online.rollout_plan import StageEvidence
    from runtime_ops.pipeline.spec import RolloutSpec

    approved, index_id = _pending(store, "a")
    _start(store, approved, index_id, mode="canary")
    store.rollouts.stop(reason="test", actor="test")
    # Another rollout holds the pipeline's one active slot (here one beside no request).
    _start(store, {**approved, "id": None}, index_id)
    assert store.votes.cast_vote(approved["id"], actor="alice", approve=True, channel="cli").outcome == "accepted"
    plan, now = RolloutSpec(mode="canary", ramp=(0.5, 1.0)), datetime(2026, 12, 5, 9, tzinfo=UTC)

    def unused(stages: list[dict[str, Any]], index: int) -> StageEvidence:
        raise AssertionError("no stage runs yet")

    waiting = advance_ramp(store, plan, approved, unused, now)
    assert (
        not waiting.promote
        and "the ramp waits" in waiting.message
        and "already has an active rollout" in waiting.message
    )
    assert store.rollouts.stages(approved["id"]) == []
    store.rollouts.stop(reason="test", actor="test")
    assert "ramp stage 1/2 started" in advance_ramp(store, plan, approved, unused, now).message
