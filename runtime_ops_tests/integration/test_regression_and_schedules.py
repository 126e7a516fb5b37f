"""A promotion triggers a regression evaluation through declarative automation; the schedules target the jobs."""

from __future__ import annotations

import shutil

import dagster as dg

from runtime_ops.demo import CORPUS_DIR
from runtime_ops_tests.support.flow import Flow


def test_promotion_triggers_regression_evaluation(env, postgres_url, dagster_instance, tmp_path) -> None:
    landing = tmp_path / "landing"
    shutil.copytree(CORPUS_DIR / "stdlib" / "data", landing / "stdlib" / "data")
    env(database_url=postgres_url, landing=str(landing))
    flow = Flow(dagster_instance)
    assert flow.automate() == (set(), None)
    flow.tick_and_run("landing_sensor")
    [train] = flow.tick_and_run("corpus_sensor")
    assert train.success
    requested, run = flow.automate()
    assert requested == {"production_evaluation"} and run is not None and run.success
    meta = run.asset_materializations_for_node("demo__production_evaluation")[0].metadata
    assert meta["model_version"].value == 1 and meta["drift/ndcg@5"].value == 0.0  # same corpus as at promotion
    [check] = run.get_asset_check_evaluations()
    assert check.check_name == "no_regression" and check.passed
    assert flow.automate() == (set(), None)


def test_schedules_target_the_jobs(env, tmp_path) -> None:
    env()
    from runtime_ops.definitions import build_definitions
    from runtime_ops.settings import load_settings

    r = build_definitions(load_settings()).get_repository_def()
    schedules = {s.name: (s.job_name, s.cron_schedule, s.default_status) for s in r.schedule_defs}
    assert schedules == {
        "demo__retrain_schedule": ("demo__train_job", "0 3 * * *", dg.DefaultScheduleStatus.RUNNING),
        "demo__regression_schedule": ("demo__regression_job", "0 */6 * * *", dg.DefaultScheduleStatus.RUNNING),
        "demo__query_log_retention_schedule": (
            "demo__query_log_retention_job",
            "30 4 * * *",
            dg.DefaultScheduleStatus.RUNNING,
        ),
        # The example inference pipeline (defs/tickets): the day's landed tickets labelled once a day.
        "tickets__label_schedule": ("tickets__label_job", "0 6 * * *", dg.DefaultScheduleStatus.RUNNING),
    }
