"""Finding the Dagster run a sensor requested, by the tag it put on it."""

import dagster as dg


def run_tagged(instance: dg.DagsterInstance, tag: str, value: str) -> dg.DagsterRun | None:
    """The newest run carrying `tag=value`, or None: how a sensor learns that its request became a run (and
    re-requests it under the same run key when it did not)."""
    records = instance.get_run_records(dg.RunsFilter(tags={tag: value}), limit=1)
    return records[0].dagster_run if records else None
