"""Like with like: once the evaluation set grows, every place that shows the gate's numbers shows both models on
the same set (production re-scored on it) and names that set: the history table of evaluation_report, the
meets_policy check's metadata and the approval page agree number for number."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from runtime_ops.approvals import links
from runtime_ops.demo import CORPUS_DIR
from runtime_ops.models.history import DEFAULT_METRICS
from runtime_ops.settings import get_settings
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, serving_v1


def _materialized(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(["demo", asset])]
    return {k: v.value for k, v in event.step_materialization_data.materialization.metadata.items()}


def _row(history: str, version: int) -> list[str]:
    """The cells of version `version`'s row of the history table."""
    for line in history.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].strip("*").split(" ")[0] == f"v{version}":
            return cells
    raise AssertionError(f"no row for v{version} in:\n{history}")


def test_after_the_set_grows_history_check_and_page_agree(env, postgres_url: str, dagster_instance, tmp_path: Path):
    landing = tmp_path / "landing"
    env(database_url=postgres_url, landing=str(landing), RUNTIME_OPS_APPROVERS="alice", **NEEDS_A_HUMAN)
    store, flow = serving_v1(landing, dagster_instance)
    v1_report = store.evaluations.latest_eval_report(candidate_version=1)
    shutil.copytree(CORPUS_DIR / "stdlib" / "text", landing / "stdlib" / "text")
    flow.tick_and_run("landing_sensor")
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success
    report = store.evaluations.latest_eval_report()
    assert report["candidate_version"] == 2 and report["production_version"] == 1
    [pending] = store.requests.list_requests(status="pending")

    # The set grew: v1's own report scored it on fewer questions, and its numbers there differ from production's
    # numbers in v2's report, which re-scored v1 on v2's set. Those are the numbers to show next to v2.
    qset = report["verdict"]["question_set"]
    n = int(report["candidate_metrics"]["questions"])
    assert v1_report["verdict"]["question_set"] != qset and int(v1_report["candidate_metrics"]["questions"]) < n
    assert int(report["production_metrics"]["questions"]) == n
    label = f"{qset[:12]} ({n} q)"
    prod, cand = report["production_metrics"], report["candidate_metrics"]
    own = v1_report["candidate_metrics"]
    assert any(f"{own[m]:.3f}" != f"{prod[m]:.3f}" for m in DEFAULT_METRICS), "the sets must score v1 differently"

    # The history table: v1 and v2 on v2's set, named; v1's row carries the re-scored numbers.
    meta = _materialized(train, "evaluation_report")
    history = str(meta["history"])
    v1_row, v2_row = _row(history, 1), _row(history, 2)
    assert v1_row[1] == v2_row[1] == f"`{label}`"
    for i, metric in enumerate(DEFAULT_METRICS, start=2):
        assert f" {prod[metric]:.3f}" in v1_row[i] and f" {cand[metric]:.3f}" in v2_row[i], (metric, history)
        assert f"({cand[metric] - prod[metric]:+.3f})" in v2_row[i]  # the change is against v1 on the same set
    assert meta["question_set"] == label and meta["question_set_version"] == qset
    # Plots: only quality metrics are numbers; ids and counts are text.
    numeric = {k for k, v in meta.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    assert numeric and all(
        k.split("/")[-1] in cand or k.split("/")[0] in {"delta", "ci_low", "ci_high"} for k in numeric
    ), numeric
    assert not numeric & {"report_id", "candidate_version", "production_version", "questions", "chunks"}
    assert all(round(float(meta[k]), 4) == float(meta[k]) for k in numeric)

    # The check: the same numbers, the same set.
    checks = {e.check_name: e for e in train.get_asset_check_evaluations()}
    check = {k: v.value for k, v in checks["meets_policy"].metadata.items()}
    assert check["question_set"] == label
    for metric in DEFAULT_METRICS:
        assert check[f"candidate/{metric}"] == round(cand[metric], 4)
        assert check[f"production/{metric}"] == round(prod[metric], 4)

    # The approval page: the same numbers, the set named with its question count.
    token = links.issue(
        get_settings().resolved_link_secret(),
        request_id=pending["id"],
        approver="alice",
        digest=pending["candidate_digest"],
        expires_at=datetime.now(UTC) + timedelta(hours=1),
    )
    with ApiServer(get_settings()) as api:
        page = web.get(f"{api.url}/approvals/{token}", timeout=10)
    assert page.status_code == 200, page.text
    assert qset[:12] in page.text and f"{n} questions" in page.text, page.text
    for metric in DEFAULT_METRICS:
        assert f"<td>{cand[metric]:.4f}</td><td>{prod[metric]:.4f}</td>" in page.text, metric
