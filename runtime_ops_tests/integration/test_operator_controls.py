"""The operator's levers, from the CLI and through the ops API, on a real deployment's state (production v2 promoted by
a person over v1, real vector indexes): rollouts listed, shown with their evidence and stopped; production rolled
back by hand; each an operator's authenticated, audited decision that goes through the candidate lifecycle, and each
refusal saying why and what to do."""

from __future__ import annotations

import contextlib
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from runtime_ops.cli import main as cli
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer, operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, serving_v2


def _json(args: list[str]) -> Any:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(args) == 0
    return json.loads(out.getvalue())


def _rollout_beside(store: StateStore, request_id: str) -> dict[str, Any]:
    """A canary of candidate v1's index against production v2, beside `request_id` (as the gate starts one)."""
    index = next(i for i in store.indexes.list_indexes() if i["model_version"] == 1)
    return store.rollouts.start(approval_id=request_id, candidate_version=1, candidate_index_id=int(index["id"]),
                                production_version=2, mode="canary", share=0.2, max_duration=timedelta(hours=1),
                                actor="gate")  # fmt: skip


@pytest.mark.slow(seconds=45)  # alone on 2 cores (Dec 2026)
def test_an_operator_lists_stops_and_rolls_back_from_the_cli_and_the_api(
    env: Any, dagster_instance: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    landing = tmp_path / "landing"
    env(landing=str(landing), **NEEDS_A_HUMAN)
    store, _ = serving_v2(landing, dagster_instance)
    store = store.scoped("demo")
    [promoted] = [r for r in store.requests.list_requests() if r["candidate_version"] == 2]
    assert (store.lifecycle.get(promoted["id"]) or {})["state"] == "promoted"

    # A rollout to look at: listed with its candidate's lifecycle, shown with its (empty) evidence.
    rollout = _rollout_beside(store, promoted["id"])
    listed = _json(["rollouts", "list", "--json"])
    assert [(r["id"], r["status"], r["lifecycle"]) for r in listed][:1] == [(rollout["id"], "active", "promoted")]
    shown = _json(["rollouts", "show", str(rollout["id"]), "--json"])
    assert shown["evidence"]["verdict"] == "not enough queries" and shown["stages"] == []
    capsys.readouterr()

    # Stopping needs an operator's key; the stop is audited as that operator.
    assert cli(["rollouts", "stop", str(rollout["id"]), "--reason", "no key"]) == 1
    assert "operator" in capsys.readouterr().err
    assert operator_cli(["rollouts", "stop", str(rollout["id"]), "--reason", "looks off", "--as", "carol"]) == 0
    assert f"rollout #{rollout['id']} stopped by carol" in capsys.readouterr().out
    assert (store.rollouts.get(rollout["id"]) or {})["status"] == "stopped"
    stops = [r for r in store.audit_log.records(promoted["id"]) if r["event"] == "rollout_stopped"]
    assert stops[-1]["actor"] == "carol" and "looks off" in json.dumps(stops[-1]["detail"])
    assert operator_cli(["rollouts", "stop", str(rollout["id"]), "--reason", "again", "--as", "carol"]) == 1
    assert "is already stopped" in capsys.readouterr().err

    # A manual rollback: refused for a version that never served, then done to v1 as carol, audited, through the
    # lifecycle (v2's candidate ends rolled back) and the promotion saga (serving follows production).
    assert operator_cli(["rollback", "demo", "--to", "9", "--reason", "x", "--as", "carol"]) == 1
    assert "no model v9" in capsys.readouterr().err
    assert operator_cli(["rollback", "demo", "--to", "1", "--reason", "answers got worse", "--as", "carol"]) == 0
    assert "production rolled back from v2 to v1" in capsys.readouterr().out
    assert store.registry.alias("production") == 1
    serving = store.indexes.current_index()
    assert serving is not None and serving["model_version"] == 1
    assert (store.lifecycle.get(promoted["id"]) or {})["state"] == "rolled_back"
    decided = [r for r in store.audit_log.records() if r["event"] == "rollback_requested"]
    assert decided[-1]["actor"] == "carol" and decided[-1]["detail"]["reason"] == "answers got worse"
    moves = [r["detail"]["move"] for r in store.audit_log.records(promoted["id"]) if r["event"] == "lifecycle"]
    assert moves[-1] == "rollback"

    # The same levers through the ops API: read keys read, decide keys mapped to a person act, others are refused.
    read = {"Authorization": f"Bearer {store.api_keys.create('ops-read', ['read']).key}"}
    unmapped = {"Authorization": f"Bearer {store.api_keys.create('ops-decide', ['decide']).key}"}
    dave = {"Authorization": f"Bearer {store.api_keys.create('dave', ['decide'], approver='dave').key}"}
    again = _rollout_beside(store, promoted["id"])
    with ApiServer(get_settings()) as api:
        assert web.get(f"{api.url}/api/rollouts", timeout=10).status_code == 401
        listed = web.get(f"{api.url}/api/rollouts?pipeline=demo", headers=read, timeout=10).json()
        assert listed[0]["id"] == again["id"] and listed[0]["lifecycle"] == "rolled back"
        one = web.get(f"{api.url}/api/rollouts/{again['id']}", headers=read, timeout=10)
        assert one.status_code == 200 and one.json()["evidence"]["queries"] == 0
        assert web.get(f"{api.url}/api/rollouts/999999", headers=read, timeout=10).status_code == 404

        stop = f"{api.url}/api/rollouts/{again['id']}/stop"
        assert web.post(stop, json={"reason": "x"}, headers=read, timeout=10).status_code == 403
        assert web.post(stop, json={"reason": "x"}, headers=unmapped, timeout=10).status_code == 403
        assert web.post(stop, json={"reason": " "}, headers=dave, timeout=10).status_code == 422
        done = web.post(stop, json={"reason": "traffic spike"}, headers=dave, timeout=10)
        assert done.status_code == 200 and done.json()["rollout"]["status"] == "stopped", done.text
        assert web.post(stop, json={"reason": "again"}, headers=dave, timeout=10).status_code == 409

        back = f"{api.url}/api/rollback"
        never = web.post(back, json={"pipeline": "demo", "to_version": 1, "reason": "x"}, headers=dave, timeout=10)
        assert never.status_code == 409 and "already v1" in never.json()["error"]
        moved = web.post(back, json={"pipeline": "demo", "to_version": 2, "reason": "v2 was fine"}, headers=dave,
                         timeout=60)  # fmt: skip
        assert moved.status_code == 200, moved.text
        assert moved.json()["actor"] == "dave" and store.registry.alias("production") == 2
    decided = [r for r in store.audit_log.records() if r["event"] == "rollback_requested"]
    assert (decided[-1]["actor"], decided[-1]["channel"]) == ("dave", "api")
    assert store.audit_log.verify().ok
