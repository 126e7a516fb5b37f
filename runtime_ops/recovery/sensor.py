"""`run_recovery_sensor`: finishes what a dead or hung run worker left, with no person acting (orphans.py,
stalls.py)."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from runtime_ops.recovery.orphans import sweep
from runtime_ops.recovery.stalls import sweep_stalled


def build_recovery_sensor(
    minimum_interval_seconds: int = 30, stall_after: timedelta | None = None
) -> dg.SensorDefinition:
    @dg.sensor(
        name="run_recovery_sensor",
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Finds runs still shown as started whose worker process is gone (the default launcher cannot "
        "tell run monitoring), or alive but silent past RUNTIME_OPS_RUN_STALL_TIMEOUT (then killed, after printing "
        "its stacks), and marks them failed with the reason, so that run retries relaunch them and the sensors "
        "waiting on them go on.",
    )
    def run_recovery_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        found = sweep(context.instance, log=context.log.warning)
        found += sweep_stalled(context.instance, stall_after, log=context.log.warning)
        if not found:
            return dg.SkipReason("no orphaned or stalled runs")
        return dg.SkipReason(
            f"marked {len(found)} orphaned or stalled runs failed (retried by run retries): "
            + ", ".join(f"{o.job_name} {o.run_id}" for o in found)
        )

    return run_recovery_sensor
