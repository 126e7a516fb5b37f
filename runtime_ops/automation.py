"""Declarative automation conditions shared by the assets."""

from __future__ import annotations

import dagster as dg


# Run when an upstream asset updated, but not while it (or the target) is still running, and never past a
# failed blocking check. Unlike `eager()`, a missing partition upstream (a landing batch whose ingestion
# failed) does not hold the whole corpus back; a missing unpartitioned dependency (no production model yet)
# still does.
def follow_upstream(partitioned_chunks: dg.AssetKey) -> dg.AutomationCondition:
    return (
        (dg.AutomationCondition.newly_missing() | dg.AutomationCondition.any_deps_updated()).since_last_handled()
        & ~dg.AutomationCondition.any_deps_missing().ignore(dg.AssetSelection.assets(partitioned_chunks))
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
        & dg.AutomationCondition.all_deps_blocking_checks_passed()
    ).with_label("follow upstream (blocking checks respected)")


def build_automation_sensor(minimum_interval_seconds: int = 30) -> dg.AutomationConditionSensorDefinition:
    """Dagster's implicit automation sensor starts STOPPED; this one is on from the first `make dev`."""
    return dg.AutomationConditionSensorDefinition(
        "automation_sensor",
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=minimum_interval_seconds,
        description="Evaluates the assets' automation conditions of every pipeline: the serving assets follow new "
        "documents and promotions; production_evaluation follows each promotion.",
    )
