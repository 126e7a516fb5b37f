"""Drive the code location the way the daemon does: evaluate sensor ticks, launch their run requests."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from runtime_ops.definitions import build_definitions
from runtime_ops.settings import load_settings

PROCESS_WIDE = {"automation_sensor", "run_recovery_sensor"}


@dataclass
class Flow:
    instance: dg.DagsterInstance
    defs: dg.Definitions = field(default_factory=lambda: build_definitions(load_settings()))
    cursors: dict[str, str | None] = field(default_factory=dict)
    automation_cursor: Any = None
    launched_keys: set[tuple[str, str]] = field(default_factory=set)
    # Short names (`landing_sensor`, `train_job`, `production_model`) mean this pipeline's.
    pipeline: str = "demo"

    def name(self, short: str) -> str:
        """`landing_sensor` -> `demo__landing_sensor` (a qualified or process-wide name is kept)."""
        return short if "__" in short or short in PROCESS_WIDE else f"{self.pipeline}__{short}"

    def key(self, short: str | dg.AssetKey) -> dg.AssetKey:
        """`production_model` -> AssetKey(["demo", "production_model"])."""
        if isinstance(short, dg.AssetKey):
            return short
        return dg.AssetKey.from_user_string(short) if "/" in short else dg.AssetKey([self.pipeline, short])

    def tick(self, sensor_name: str) -> list[dg.RunRequest]:
        """One sensor evaluation, with its cursor, partitions and run-key dedupe applied as the daemon does."""
        sensor_name = self.name(sensor_name)
        sensor = self.repo.get_sensor_def(sensor_name)
        with dg.build_sensor_context(
            instance=self.instance,
            instance_ref=self.instance.get_ref(),
            definitions=self.defs,
            resources=self.defs.resources,
            cursor=self.cursors.get(sensor_name),
        ) as ctx:
            result = sensor.evaluate_tick(ctx)
        if result.cursor is not None:
            self.cursors[sensor_name] = result.cursor
        for request in result.dynamic_partitions_requests or []:
            self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        for event in result.asset_events or []:
            if isinstance(event, dg.AssetCheckEvaluation):
                self.instance.report_runless_asset_event(event)
        fresh = []
        for request in result.run_requests or []:
            key = (sensor_name, request.run_key or "")
            if request.run_key and key in self.launched_keys:
                continue  # the daemon skips a run key it launched before
            self.launched_keys.add(key)
            fresh.append(request)
        return fresh

    @property
    def repo(self) -> dg.RepositoryDefinition:
        return self.defs.get_repository_def()

    def job_for(self, sensor_name: str, request: dg.RunRequest) -> dg.JobDefinition:
        name = request.job_name or self.repo.get_sensor_def(self.name(sensor_name)).job_name
        assert name is not None, f"{sensor_name}: neither the run request nor the sensor names a job"
        return self.repo.get_job(name)

    def run(self, sensor_name: str, request: dg.RunRequest, **kwargs: Any) -> dg.ExecuteInProcessResult:
        job = self.job_for(sensor_name, request)
        run_config = request.run_config if request.run_config else None
        return job.execute_in_process(
            instance=self.instance,
            partition_key=request.partition_key,
            tags=request.tags,
            run_config=run_config,
            raise_on_error=kwargs.pop("raise_on_error", False),
            **kwargs,
        )

    def tick_and_run(self, sensor_name: str) -> list[dg.ExecuteInProcessResult]:
        return [self.run(sensor_name, r) for r in self.tick(sensor_name)]

    def materialize(self, selection: list[Any], **kwargs: Any) -> dg.ExecuteInProcessResult:
        job = self.repo.get_implicit_global_asset_job_def()
        return job.execute_in_process(
            instance=self.instance,
            asset_selection=[self.key(a) for a in selection],
            raise_on_error=False,
            **kwargs,
        )

    def automate(self) -> tuple[set[str], dg.ExecuteInProcessResult | None]:
        """One declarative-automation tick: what it requests is materialized in one run, as the daemon would."""
        result = dg.evaluate_automation_conditions(
            defs=self.defs, instance=self.instance, cursor=self.automation_cursor
        )
        self.automation_cursor = result.cursor
        keys = {r.key for r in result.results if r.true_subset.size and isinstance(r.key, dg.AssetKey)}
        if not keys:
            return set(), None
        run = self.materialize(sorted(keys, key=lambda k: k.to_user_string()))
        return {k.path[-1] if k.path[0] == self.pipeline else k.to_user_string() for k in keys}, run


def land_files(files: list[Path], landing: Path) -> None:
    """Copy demo-corpus files into a landing folder under their corpus-relative keys (what the golden set names)."""
    from runtime_ops.demo import CORPUS_DIR

    for src in files:
        dest = landing / src.relative_to(CORPUS_DIR)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)


# Settings under which every candidate after the first needs a human: no margin can be met, no regression
# limit fails the policy check. `env(..., **NEEDS_A_HUMAN)`.
NEEDS_A_HUMAN = {"RUNTIME_OPS_AUTO_APPROVE_MARGIN": "1.0", "RUNTIME_OPS_MAX_REGRESSION": "1.0"}


def serving_v1(landing: Path, instance: Any) -> tuple[Any, Flow]:
    """Half the demo corpus landed, model v1 trained, auto-approved (nothing to beat) and serving; in this
    process, on `instance`. Set the test's settings (env) first."""
    from runtime_ops.demo import CORPUS_DIR
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store

    shutil.copytree(CORPUS_DIR / "stdlib" / "data", landing / "stdlib" / "data")
    flow = Flow(instance)
    store = open_store(get_settings().resolved_database_url, get_settings())
    flow.tick_and_run("landing_sensor")
    flow.tick_and_run("corpus_sensor")
    assert store.registry.alias("production") == 1
    return store, flow


def pending_candidate(landing: Path, instance: Any) -> tuple[Any, dict[str, Any], Flow]:
    """`serving_v1`, then the other half landed and a candidate v2 waiting for a human decision (under
    NEEDS_A_HUMAN)."""
    from runtime_ops.demo import CORPUS_DIR

    store, flow = serving_v1(landing, instance)
    shutil.copytree(CORPUS_DIR / "stdlib" / "text", landing / "stdlib" / "text")
    flow.tick_and_run("landing_sensor")
    flow.tick_and_run("corpus_sensor")
    [pending] = store.requests.list_requests(status="pending")
    assert store.registry.alias("production") == 1 and pending["candidate_version"] == 2
    return store, pending, flow


def serving_v2(landing: Path, instance: Any) -> tuple[Any, Flow]:
    """`pending_candidate`, approved by a person (alice) and promoted: production v2 over v1 (alias history:
    -> v1 -> v2), the serving index v2's. Set the test's settings (env, with NEEDS_A_HUMAN) first."""
    from runtime_ops_tests.support.approvals_support import operator_cli

    store, pending, flow = pending_candidate(landing, instance)
    assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice"]) == 0
    [request] = flow.tick("approvals_sensor")
    assert flow.run("approvals_sensor", request).success
    flow.tick("approvals_sensor")  # records the promotion run on the request
    assert store.registry.alias("production") == 2
    return store, flow
