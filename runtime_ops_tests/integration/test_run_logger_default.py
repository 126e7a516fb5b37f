"""Runs whose run config names no logger (declarative automation, the implicit asset job, a UI
materialization) still log JSON lines once the code location is loaded."""

import json

import dagster as dg


@dg.asset
def tiny_asset(context: dg.AssetExecutionContext) -> int:
    context.log.info("tiny asset says hello")
    return 1


def test_unconfigured_runs_get_the_json_run_logger(env, tmp_path, capfd) -> None:  # type: ignore[no-untyped-def]
    from runtime_ops.definitions import build_definitions

    env(RUNTIME_OPS_LOG_FORMAT="json")
    build_definitions()  # loading the code location installs the fallback, as in a run worker
    capfd.readouterr()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = dg.materialize([tiny_asset], instance=instance)  # no `loggers` in the run config
    assert result.success
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if result.run_id in ln]
    assert lines, "the run logged nothing on stderr"
    records = [json.loads(ln) for ln in lines]  # every line of the run is one JSON object
    hello = [r for r in records if r["message"] == "tiny asset says hello"]
    assert hello and hello[0]["run_id"] == result.run_id and hello[0]["step"] == "tiny_asset"
    success = [r for r in records if r.get("event") == "STEP_SUCCESS"]
    # What the run did log, should this fail again (it did once in CI, after the whole suite, never alone).
    seen = [(r.get("level"), r.get("event"), r["message"][:80]) for r in records]
    others = [ln[:300] for ln in err.splitlines() if result.run_id not in ln]  # a logging error would be here
    assert success, f"no STEP_SUCCESS line; the run's lines: {seen}; other stderr lines: {others[:20]}"
    assert success[0]["status"] == "succeeded" and success[0]["duration_ms"] > 0, success[0]


def test_the_fallback_hook_still_exists_in_this_dagster() -> None:
    from dagster._core.execution import context_creation_job

    from runtime_ops.observability.steps import default_for_unconfigured_runs

    assert default_for_unconfigured_runs() is True
    assert getattr(context_creation_job.default_system_loggers, "runtime_ops", False)  # pyright: ignore[reportPrivateImportUsage]  # dagster internals on purpose
