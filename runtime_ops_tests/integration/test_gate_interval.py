"""The gate judges the paired bootstrap interval of candidate - production on the same held-out questions:
noise never auto-promotes and never fails, a clearly better model auto-promotes, a clearly worse one fails, and
the interval reaches the check metadata and the Slack message (real PostgreSQL and Dagster instance)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from runtime_ops.approvals.announce import Announcer
from runtime_ops.approvals.slack.blocks import request_blocks
from runtime_ops.definitions import build_definitions
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.flow import Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline, write_own_corpus


def _train(flow: Flow, **config: Any) -> dg.ExecuteInProcessResult:
    job = flow.repo.get_job("acme__train_job")
    return job.execute_in_process(
        instance=flow.instance,
        run_config={"ops": {"acme__embedding_model": {"config": config}}},
        raise_on_error=False,
    )


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_noise_waits_for_a_human_better_promotes_worse_fails(
    env, postgres_url, dagster_instance, tmp_path: Path
) -> None:
    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    # Margins as shipped: auto-approve above +0.02, fail below -0.05 (of the interval's bounds).
    declare_pipeline(
        pipelines,
        "acme",
        landing,
        "  evaluation: {min_questions: 120}\n  gate: {auto_approve_margin: 0.02, max_regression: 0.05}\n"
        "  embedder: {dim: 64, train_sample: 300}\n",
    )
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    write_own_corpus(landing, 240)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="acme")

    # A deliberately poor production model: 2 dimensions.
    assert _train(flow, dim=2).success
    poor = store.registry.alias("production")

    # Clearly better: the whole interval clears the margin -> promoted without a human.
    better = _train(flow)
    assert better.success
    checks = _checks(better)
    assert checks["meets_policy"].passed and checks["human_approval"].passed
    meta: dict[str, Any] = {k: v.value for k, v in checks["meets_policy"].metadata.items()}
    assert meta["ci_low"] >= 0.02 and meta["ci_low"] <= meta["mean_delta"] <= meta["ci_high"]
    assert meta["reason"].startswith("better by at least the auto-approve margin +0.020: ndcg@5 ")
    good = store.registry.alias("production")
    assert good != poor

    # Noise: the same method on a resampled training set (another seed picks another sample).
    for seed in (1, 2, 3):
        noisy = _train(flow, seed=seed)
        checks = _checks(noisy)
        assert checks["meets_policy"].passed, f"seed {seed}: noise must never fail meets_policy"
        assert not checks["human_approval"].passed, f"seed {seed}: noise must never auto-promote"
        meta = {k: v.value for k, v in checks["meets_policy"].metadata.items()}
        assert meta["ci_low"] < 0.02 and meta["ci_high"] > -0.05
        # Noise reads as one of the three cases a person decides, never as "inconclusive".
        assert meta["reason"].startswith(("better, but below", "no detectable difference", "worse, but not beyond"))
        assert meta["reason"].endswith("; needs human approval")
        assert store.registry.alias("production") == good

    # The pending request's Slack message shows the interval and the questions whose results changed most.
    [pending, *_] = store.requests.list_requests(status="pending")
    view = Announcer(store, "x" * 32, "http://127.0.0.1:1", "http://127.0.0.1:2").view(pending)
    text = str(request_blocks(view))
    assert "Candidate minus production:" in text and "% CI" in text
    assert view.changed, "two models of different seeds rank some question differently"
    assert "Changed most" in text
    # Each changed question says better/worse/same and where its relevant document ranks, not a list of keys.
    report = store.evaluations.get_eval_report(pending["eval_report_id"])
    assert report is not None
    for item in report["verdict"]["changed_questions"]:
        assert item["direction"] in ("better", "worse", "same") and item["question"] and item["depth"] == 10
        assert item["relevant"] and {"document", "production", "candidate"} == set(item["relevant"][0])
        assert "candidate_top" not in item
    assert "Verdict: " in report["markdown"] and "production → candidate" in report["markdown"]

    # Clearly worse: the interval lies below -max_regression -> meets_policy fails, nothing is promoted.
    worse = _train(flow, dim=3)
    checks = _checks(worse)
    assert not checks["meets_policy"].passed
    meta = {k: v.value for k, v in checks["meets_policy"].metadata.items()}
    assert meta["ci_high"] < -0.05
    assert meta["reason"].startswith("worse beyond the allowed regression -0.050: ndcg@5 ")
    assert store.registry.alias("production") == good
