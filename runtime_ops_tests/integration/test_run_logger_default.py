"""Runs whose run config names no logger (declarative automation, the implicit asset job, a UI
materialization) still log JSON lines once the code location is loaded."""

import json
import os
import subprocess
import sys
from pathlib import Path

# The run happens in a fresh interpreter, as in a run worker. Its instance captures no compute logs: Dagster's
# local capture sends a step's stderr through a file and a `tail -F` process that it kills when the step ends, so
# under load the step's last lines (STEP_SUCCESS) went missing from the process's stderr (three times in full runs;
# dagster-io/dagster#23336). What this test pins is the logger, not that capture.
RUN = """
import sys
import dagster as dg
from runtime_ops.definitions import build_definitions

@dg.asset
def tiny_asset(context: dg.AssetExecutionContext) -> int:
    context.log.info("tiny asset says hello")
    return 1

build_definitions()  # loading the code location installs the fallback, as in a run worker
print("loaded", file=sys.stderr, flush=True)
no_capture = {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}
with dg.instance_for_test(temp_dir=sys.argv[1], overrides={"compute_logs": no_capture}) as instance:
    result = dg.materialize([tiny_asset], instance=instance)  # no `loggers` in the run config
print(f"RUN_ID={result.run_id} SUCCESS={result.success}", flush=True)
"""


def test_unconfigured_runs_get_the_json_run_logger(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env(RUNTIME_OPS_LOG_FORMAT="json")
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    [summary] = [ln for ln in done.stdout.splitlines() if ln.startswith("RUN_ID=")]
    run_id, ok = (part.split("=", 1)[1] for part in summary.split())
    assert ok == "True"
    err = done.stderr.split("loaded\n", 1)[1]
    lines = [ln for ln in err.splitlines() if run_id in ln]
    assert lines, f"the run logged nothing on stderr: {err[-2000:]}"
    records = [json.loads(ln) for ln in lines]  # every line of the run is one JSON object
    hello = [r for r in records if r["message"] == "tiny asset says hello"]
    assert hello and hello[0]["run_id"] == run_id and hello[0]["step"] == "tiny_asset"
    success = [r for r in records if r.get("event") == "STEP_SUCCESS"]
    seen = [(r.get("level"), r.get("event"), r["message"][:80]) for r in records]
    assert success, f"no STEP_SUCCESS line; the run's lines: {seen}"
    assert success[0]["status"] == "succeeded" and success[0]["duration_ms"] > 0, success[0]


def test_the_fallback_hook_still_exists_in_this_dagster() -> None:
    from dagster._core.execution import context_creation_job

    from runtime_ops.observability.steps import default_for_unconfigured_runs

    assert default_for_unconfigured_runs() is True
    assert getattr(context_creation_job.default_system_loggers, "runtime_ops", False)  # pyright: ignore[reportPrivateImportUsage]  # dagster internals on purpose
