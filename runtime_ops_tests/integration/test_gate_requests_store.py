"""Approval requests for any gated asset, on SQLite and PostgreSQL: migration 0022 adds `target`/`evidence` and
frees `candidate_version`/`eval_report_id` (and goes back while only model promotions exist); a target's request
opens once per digest and supersedes only the same target's pending request, never a model promotion's nor
another partition's."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops.store import schema as t
from runtime_ops.store.migrate import current_revision, downgrade, head_revision, upgrade
from runtime_ops_tests.support.approvals_support import open_pending


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("postgres_url"))


def _open(store, target: str, digest: str):  # type: ignore[no-untyped-def]
    return store.requests.open_request(
        candidate_digest=digest * 64,
        requested_by="runtime_ops",
        target=target,
        evidence={"accuracy": 0.9, "labelled": 120},
        policy=RequestPolicy(approvers=("U1",)),
    )


def test_migration_0022_frees_the_model_columns_and_goes_back_while_only_models_are_gated(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import inspect

    store = open_store(db_url, get_settings(), pipeline="demo")
    promotion = open_pending(store, RequestPolicy(approvers=("U1",)))
    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), t.metadata)
    assert [d for d in diffs if "approval_requests" in repr(d)] == []

    downgrade(store.engine, get_settings(), "0021")  # only a model promotion: nothing to lose
    assert current_revision(store.engine) == "0021"
    columns = {c["name"]: c for c in inspect(store.engine).get_columns("approval_requests")}
    assert "target" not in columns and "evidence" not in columns
    assert not columns["candidate_version"]["nullable"] and not columns["eval_report_id"]["nullable"]
    upgrade(store.engine, get_settings())
    assert current_revision(store.engine) == head_revision()
    kept = store.requests.get_request(promotion["id"])
    assert kept is not None and kept["target"] is None and kept["candidate_version"] == promotion["candidate_version"]

    gated = store.scoped("scoring__ticket_labels")
    request, created = _open(gated, "scoring/ticket_labels", "a")
    assert created and request["candidate_version"] is None and request["eval_report_id"] is None
    assert gated.requests.get_request(request["id"])["evidence"] == {"accuracy": 0.9, "labelled": 120}
    with pytest.raises(RuntimeError, match=f"approval request {request['id']} gates an asset"):
        downgrade(store.engine, get_settings(), "0021")
    assert current_revision(store.engine) == head_revision()
    store.engine.dispose()


def test_a_target_opens_once_per_digest_and_supersedes_only_its_own_pending_request(db_url: str) -> None:
    store = open_store(db_url, get_settings(), pipeline="scores")
    promotion = open_pending(store, RequestPolicy(approvers=("U1",)))  # the same scope's model promotion
    first, created = _open(store, "scoring/ticket_labels[2026-12-01]", "a")
    assert created
    again, created = _open(store, "scoring/ticket_labels[2026-12-01]", "a")
    assert not created and again["id"] == first["id"]  # once per digest
    other_day, _ = _open(store, "scoring/ticket_labels[2026-12-02]", "b")
    newer, _ = _open(store, "scoring/ticket_labels[2026-12-01]", "c")  # re-materialized: supersedes the first

    status = {r["id"]: r for r in store.requests.list_requests()}
    assert status[first["id"]]["status"] == "superseded"
    assert status[first["id"]]["superseded_by"] == newer["id"]
    assert "scoring/ticket_labels[2026-12-01] was materialized again" in status[first["id"]]["decision_reason"]
    assert (status[other_day["id"]]["status"], status[promotion["id"]]["status"]) == ("pending", "pending")
    assert store.requests.request_for_digest("c" * 64)["id"] == newer["id"]
    store.engine.dispose()
