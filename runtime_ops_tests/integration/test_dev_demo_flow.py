"""A newcomer following the README on `make dev` (in process, on the SQLite state store `make dev` uses): the first
model promotes itself; the rest of the corpus makes a candidate that waits for a person under the margin
`runtime-ops dev` runs with; the "Decide with" command the pending check prints, run exactly as printed with only
the local operator's key `runtime-ops dev` keeps, approves it; the promotion follows."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from runtime_ops.cli.dev import DEV_AUTO_APPROVE_MARGIN
from runtime_ops.cli.dev_operator import KEY_FILE, ensure_local_operator, operator_key
from runtime_ops.demo import land_corpus
from runtime_ops.landing import open_landing
from runtime_ops.policies.gate_text import changed_lines
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.flow import Flow

pytestmark = pytest.mark.slow(seconds=60)


def _human_approval(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    [check] = [e for e in result.get_asset_check_evaluations() if e.check_name == "human_approval"]
    return check


def test_the_demos_second_candidate_waits_and_the_printed_command_decides_it(
    env: Any, dagster_instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    home = env(landing=str(landing), RUNTIME_OPS_AUTO_APPROVE_MARGIN=DEV_AUTO_APPROVE_MARGIN)
    store = open_store(get_settings().resolved_database_url, get_settings())
    assert ensure_local_operator(store.api_keys, get_settings()) is not None
    flow = Flow(dagster_instance)

    land_corpus(open_landing(str(landing)), subset=0.7)  # what `make dev` seeds
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [first] = flow.tick_and_run("corpus_sensor")
    assert _human_approval(first).passed, "the first model has nothing to beat: it promotes itself"
    assert store.registry.alias("production") == 1

    land_corpus(open_landing(str(landing)), only_missing=True)  # `runtime-ops demo seed`
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [second] = flow.tick_and_run("corpus_sensor")
    check = _human_approval(second)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    [pending] = store.requests.list_requests(status="pending")
    assert pending["candidate_version"] == 2
    report = store.evaluations.latest_eval_report(2)
    assert report is not None
    verdict = report["verdict"]
    # Better than production, but not by the margin `runtime-ops dev` runs with: a person decides.
    assert verdict["meets_policy"] and not verdict["auto_approve"] and verdict["delta"] > 0, verdict["reason"]
    # The questions whose results changed most: the reviewed golden set's first, labelled; no keyword bag.
    changed = verdict["changed_questions"]
    assert changed and changed[0]["source"] == "reviewed", changed
    assert {c["source"] for c in changed} <= {"reviewed", "heading"}, changed
    assert changed_lines(changed)[0].startswith(("better (reviewed): “", "worse (reviewed): “"))
    assert store.registry.alias("production") == 1

    # The command as the check prints it, run by a shell-less newcomer with no key of their own in the environment.
    printed = str(check.metadata["decide"].value)
    assert pending["id"] in printed
    argv = shlex.split(printed.split("  (or:")[0])
    environ = {k: v for k, v in os.environ.items() if k != "RUNTIME_OPS_OPERATOR_KEY"}
    done = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    decided = store.requests.get_request(pending["id"])
    assert decided is not None and decided["status"] == "approved" and decided["decided_by"] == "local"

    [promotion] = flow.tick_and_run("approvals_sensor")
    assert promotion.success and store.registry.alias("production") == 2
    assert (home / KEY_FILE).exists()


def test_the_local_operator_key_is_private_kept_and_renewed_when_revoked(env: Any) -> None:
    home = env()
    settings = get_settings()
    store = open_store(settings.resolved_database_url, settings)
    assert operator_key(settings) is None, "no key before `runtime-ops dev` made one"
    told = ensure_local_operator(store.api_keys, settings)
    assert told is not None and str(home / KEY_FILE) in told
    path = home / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = operator_key(settings)
    assert key is not None and key not in told, "the key itself is never printed"
    found = store.api_keys.verify(key)
    assert found is not None and found.allows("decide") and found.approver == "local"

    assert ensure_local_operator(store.api_keys, settings) is None, "a usable key is kept"
    assert operator_key(settings) == key

    store.api_keys.revoke(found.key_id, by="test")
    assert ensure_local_operator(store.api_keys, settings) is not None
    renewed = operator_key(settings)
    assert renewed is not None and renewed != key and store.api_keys.verify(renewed) is not None


def test_an_operator_key_in_the_environment_wins_and_no_local_one_is_made(env: Any) -> None:
    home = env(RUNTIME_OPS_OPERATOR_KEY="rok_00000000_mine")
    settings = get_settings()
    store = open_store(settings.resolved_database_url, settings)
    assert ensure_local_operator(store.api_keys, settings) is None
    assert not (home / KEY_FILE).exists()
    assert operator_key(settings) == "rok_00000000_mine"
