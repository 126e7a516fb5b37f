"""One fenced writer for the serving index: a `retrieval_index` materialization that read `production` before a
promotion, a rollback or a compensated promotion finished never moves the alias back to the old model's index.

Real parts throughout: the state store (SQLite with its own lease lock; PostgreSQL with the Redis lock), the demo
pipeline's embedded LanceDB store, lsa models trained on a seeded synthetic corpus, the promotion saga's own steps
and engine, `run_rollback`, and the `retrieval_index` asset run by Dagster. The interleaving is deterministic: the
materialization's index build (`vector_index.ensure_index`, minutes in production) is where the other change
completes, by calling it right there or, for the compensated promotion, by two threads handing over with events.
Also: rollback_job leaves serving at production's index, the registry refuses unfenced writes, the dev instance's
run queue admits one run of a pipeline's lifecycle pool at a time, and a first promotion's log says `none`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from bench._synth import make_production, seed_corpus
from runtime_ops.components.loading import get_spec
from runtime_ops.locks.base import LockerBase
from runtime_ops.locks.factory import open_locker
from runtime_ops.locks.promotion import promotion_lease
from runtime_ops.models.promotion_saga import StoreJournal, promotion_steps, saga_id
from runtime_ops.saga.engine import SagaFailed, SagaState, run
from runtime_ops.serving import vector_index
from runtime_ops.serving.index_swap import move_retrieval_index
from runtime_ops.serving.vector_store import pipeline_vectors
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, UnfencedWrite, open_store
from runtime_ops.vectors.base import VectorStore
from runtime_ops_tests.support.flow import Flow

CHUNKS = 300
HANDOVER_S = 120.0  # bound on each wait between the two threads (a hang fails the test instead of blocking it)


@dataclass
class World:
    store: StateStore
    vectors: VectorStore
    locker: LockerBase
    flow: Flow
    v1: int
    v2: int

    def index_of(self, version: int) -> int:
        row = self.store.indexes.index_for(version, self.vectors.kind, self.vectors.describe())
        assert row is not None, f"v{version} has no index"
        return int(row["id"])

    def serving_version(self) -> int | None:
        row = self.store.indexes.current_index()
        return None if row is None else int(row["model_version"])

    def promote(self, version: int) -> SagaState:
        """The promotion saga to `version` (its real steps and engine) under the promotion lock."""
        request = {"id": f"apr-to-v{version}", "decided_by": "alice"}
        with promotion_lease(self.locker, "demo") as lease:
            steps = promotion_steps(
                self.store, self.vectors, version=version, request=request, lease=lease, run_id=None
            )
            return run(saga_id(request), steps, {}, StoreJournal(self.store.sagas, "test"))

    def rollback(self, from_version: int, to_version: int, key: str = "alert-q") -> Any:
        from runtime_ops.alerts.rollback import run_rollback

        return run_rollback(
            self.store,
            self.locker,
            self.vectors,
            alert_key=key,
            alert_ref="alert-1",
            from_version=from_version,
            to_version=to_version,
            approval_id=None,
            run_id=None,
        )

    def materialize_retrieval_index(self) -> dg.ExecuteInProcessResult:
        result = self.flow.materialize(["retrieval_index"])
        assert result.success, result.all_events
        return result


@pytest.fixture(params=["sqlite", "postgresql+redis"])
def world(request: pytest.FixtureRequest, env: Any, tmp_path: Path) -> Iterator[World]:
    """v1 serving (production and its index), a trained v2 not promoted yet."""
    if request.param == "sqlite":
        url, extra = f"sqlite:///{tmp_path / 'state.db'}", {}
    else:
        url, extra = request.getfixturevalue("postgres_url"), {"REDIS_URL": request.getfixturevalue("redis_url")}
    env(database_url=url, **extra)
    seed_corpus(url, CHUNKS)
    v1 = make_production(url, seed=1, embed=False)["production_version"]
    v2 = make_production(url, seed=2, embed=False)["production_version"]
    store = open_store(url, get_settings(), pipeline="demo")
    vectors = pipeline_vectors(get_spec("demo"))
    locker = open_locker(get_settings())
    with promotion_lease(locker, "demo") as lease:
        store.registry.set_alias("production", v1, actor="test", fence=lease.fence)
        built = vector_index.ensure_index(store, vectors, v1)
        move_retrieval_index(store.registry, store.indexes, lease, built.index_id, actor="test")
    with dg.DagsterInstance.ephemeral() as instance:
        yield World(store, vectors, locker, Flow(instance), v1, v2)
    locker.close()


def after_the_build(monkeypatch: pytest.MonkeyPatch, then: Callable[[], None]) -> list[int]:
    """Run `then` once, right after the retrieval_index materialization built its index and before it moves the
    alias: the window its minutes of `ensure_index` leave open. Returns the versions it built (to check it ran)."""
    real = vector_index.ensure_index
    built: list[int] = []

    def build_then(*args: Any, **kwargs: Any) -> Any:
        state = real(*args, **kwargs)
        if not built:
            built.append(state.model_version)
            then()
        return state

    monkeypatch.setattr(vector_index, "ensure_index", build_then)
    return built


def stood_down(result: dg.ExecuteInProcessResult) -> str:
    [materialization] = result.asset_materializations_for_node("demo__retrieval_index")
    return str(materialization.metadata["stood_down"].value)


def test_a_promotion_during_a_materialization_keeps_the_new_model_serving(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = world
    promoted: list[str] = []
    built = after_the_build(monkeypatch, lambda: promoted.append(w.promote(w.v2).status))
    result = w.materialize_retrieval_index()
    assert built == [w.v1] and promoted == ["done"]  # it read production v1 and built v1's index, then v2 won
    assert w.store.registry.alias("production") == w.v2
    assert w.serving_version() == w.v2 and w.store.registry.alias("retrieval_index") == w.index_of(w.v2)
    assert stood_down(result) == (
        f"retrieval_index stays at #{w.index_of(w.v2)}: index #{w.index_of(w.v1)} was built for v{w.v1} but "
        f"production is now v{w.v2}"
    )


def test_a_rollback_during_a_materialization_serves_the_rolled_back_production(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = world
    assert w.promote(w.v2).status == "done" and w.serving_version() == w.v2
    rolled: list[str] = []
    built = after_the_build(monkeypatch, lambda: rolled.append(w.rollback(w.v2, w.v1).status))
    result = w.materialize_retrieval_index()
    assert built == [w.v2] and rolled == ["done"]  # it read production v2, then the rollback to v1 completed
    assert w.store.registry.alias("production") == w.v1
    assert w.serving_version() == w.v1 and w.store.registry.alias("retrieval_index") == w.index_of(w.v1)
    assert f"was built for v{w.v2} but production is now v{w.v1}" in stood_down(result)


def test_a_compensated_promotion_during_a_materialization_leaves_production_serving(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The materialization reads production while the promotion's first step has moved it to v2; the index step
    then fails and the saga moves production back to v1; only then does the materialization try its alias."""
    w = world
    import runtime_ops.models.promotion_saga as promotion

    moved, built, compensated = threading.Event(), threading.Event(), threading.Event()
    outcome: list[BaseException] = []
    real = promotion.ensure_index

    def index_step_fails(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)  # v2's index is complete ...
        moved.set()  # ... production is v2 now: the materialization starts and reads it
        assert built.wait(HANDOVER_S), "the materialization never finished its build"
        raise RuntimeError("the vector store went away before the swap")  # ... and the index step fails

    monkeypatch.setattr(promotion, "ensure_index", index_step_fails)

    def promote() -> None:
        try:
            w.promote(w.v2)
        except BaseException as exc:  # SagaFailed expected; anything else fails the test below
            outcome.append(exc)
        finally:
            compensated.set()

    saga = threading.Thread(target=promote, name="promotion-saga")
    saga.start()
    try:
        assert moved.wait(HANDOVER_S), "the promotion never reached its index step"
        assert w.store.registry.alias("production") == w.v2

        def wait_for_compensation() -> None:
            built.set()
            assert compensated.wait(HANDOVER_S), "the promotion never finished compensating"

        reads = after_the_build(monkeypatch, wait_for_compensation)
        result = w.materialize_retrieval_index()
    finally:
        built.set()
        saga.join(HANDOVER_S)
    assert reads == [w.v2]  # it built for the production it read: v2
    assert len(outcome) == 1 and isinstance(outcome[0], SagaFailed), outcome
    assert w.store.sagas.load_saga(saga_id({"id": f"apr-to-v{w.v2}"}))["status"] == "compensated"
    assert w.store.registry.alias("production") == w.v1
    assert w.serving_version() == w.v1 and w.store.registry.alias("retrieval_index") == w.index_of(w.v1)
    assert f"was built for v{w.v2} but production is now v{w.v1}" in stood_down(result)


def test_rollback_job_brings_serving_to_production_and_records_it(world: World) -> None:
    w = world
    assert w.promote(w.v2).status == "done" and w.serving_version() == w.v2
    job = w.flow.repo.get_job("demo__rollback_job")

    def rollback_job(alert_id: int) -> dg.ExecuteInProcessResult:
        config = {"alert_id": alert_id, "alert_key": f"q-{alert_id}", "from_version": w.v2, "to_version": w.v1}
        result = job.execute_in_process(
            instance=w.flow.instance, run_config={"ops": {"demo__rollback_production": {"config": config}}}
        )
        assert result.success
        return result

    def served(result: dg.ExecuteInProcessResult) -> list[int]:
        events = result.asset_materializations_for_node("demo__rollback_production")
        return [
            int(m.metadata["index_id"].value)  # type: ignore[arg-type]
            for m in events
            if m.asset_key == dg.AssetKey(["demo", "retrieval_index"])
        ]

    first = rollback_job(1)
    assert w.store.registry.alias("production") == w.v1 and w.serving_version() == w.v1
    assert served(first) == [w.index_of(w.v1)]  # lineage and the answers downstream follow at once

    # Serving left at the rolled-back model's index (what an unfenced writer did before): a rollback with nothing
    # to roll back still brings serving to production.
    with promotion_lease(w.locker, "demo") as lease:
        w.store.registry.set_alias("retrieval_index", w.index_of(w.v2), actor="operator", fence=lease.fence)
    second = rollback_job(2)
    assert w.store.registry.alias("production") == w.v1 and w.serving_version() == w.v1
    assert served(second) == [w.index_of(w.v1)]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_registry_refuses_unfenced_writes_to_production_and_retrieval_index(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    store = open_store(url, get_settings(), pipeline="demo")
    artifact = store.artifacts.put_artifact("embedder", b"weights", "d1")
    model, _ = store.registry.register_model(
        digest="d1", artifact_id=artifact, params={}, n_documents=1, n_chunks=1, corpus_revision=1, run_id=None
    )
    version = int(model["version"])
    index = store.indexes.create_index(
        model_version=version, backend="lance", location="/v", dim=8, synced_seq=0, run_id=None
    )["id"]
    for name, target in (("production", version), ("retrieval_index", index)):
        with pytest.raises(UnfencedWrite, match=rf"alias '{name}' of pipeline 'demo'.*a fencing token is required"):
            store.registry.set_alias(name, target, actor="test")
        assert store.registry.alias(name) is None
        store.registry.set_alias(name, target, actor="test", fence=1)
        with pytest.raises(UnfencedWrite, match=rf"alias '{name}'.*a fencing token is required"):
            store.registry.remove_alias(name, actor="test")
        assert store.registry.alias(name) == target
    store.registry.set_alias("candidate", version, actor="test")  # other aliases need no token
    assert store.registry.alias("candidate") == version


def test_runs_that_can_move_the_aliases_are_admitted_one_at_a_time(
    env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the dev instance (`runtime-ops dev`'s dagster.yaml, pools at run granularity), as the run queue decides:
    a UI or automation run of retrieval_index (the implicit asset job: no tags) waits while rollback_job runs, and
    rollback_job waits while it runs; a run that moves no alias is not held."""
    import shutil

    from dagster._core.op_concurrency_limits_counter import GlobalOpConcurrencyLimitsCounter
    from dagster._core.storage.dagster_run import IN_PROGRESS_RUN_STATUSES, DagsterRunStatus

    from runtime_ops.cli.dev import DEV_INSTANCE, STORAGE_VARIABLE

    env(database_url=f"sqlite:///{tmp_path / 'state.db'}")
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(DEV_INSTANCE, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv(STORAGE_VARIABLE, str(home))
    rollback_config = {"alert_id": 1, "alert_key": "q", "from_version": 2, "to_version": 1}
    # A run waiting for its turn; NOT_STARTED stands in for QUEUED, which needs a code location's origin to create.
    waiting = DagsterRunStatus.NOT_STARTED
    with dg.DagsterInstance.get() as instance:
        repo = Flow(instance).repo
        index = dg.AssetKey(["demo", "retrieval_index"])

        def create(kind: str, status: DagsterRunStatus) -> Any:
            if kind == "retrieval_index":  # what the UI's Materialize button and the automation sensor launch
                job = repo.get_implicit_global_asset_job_def().get_subset(asset_selection={index})
                return instance.create_run_for_job(job, status=status, asset_selection=frozenset({index}))
            if kind == "rollback_job":
                config = {"ops": {"demo__rollback_production": {"config": rollback_config}}}
                return instance.create_run_for_job(repo.get_job("demo__rollback_job"), status=status, run_config=config)
            return instance.create_run_for_job(repo.get_job(f"demo__{kind}"), status=status)

        def held(queued: Any) -> bool:
            """The run queue's verdict on `queued` (a second pass: the first one creates the pools' limits)."""
            config = instance.get_concurrency_config().pool_config
            running = instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS_RUN_STATUSES))
            blocked = []
            for _ in range(2):
                counter = GlobalOpConcurrencyLimitsCounter(
                    instance,
                    [queued],
                    running,
                    concurrency_keys=instance.event_log_storage.get_concurrency_keys(),
                    pool_limits=instance.event_log_storage.get_pool_limits(),
                    pool_granularity=config.pool_granularity,
                )
                blocked.append(counter.is_blocked(queued))
            return blocked[-1]

        rollback = create("rollback_job", DagsterRunStatus.STARTED)
        assert held(create("retrieval_index", waiting))
        assert held(create("index_job", waiting))
        assert not held(create("regression_job", waiting))
        instance.report_run_canceled(rollback)
        assert not held(create("retrieval_index", waiting))
        create("retrieval_index", DagsterRunStatus.STARTED)
        assert held(create("rollback_job", waiting))
        assert held(create("promotion_job", waiting))


@pytest.mark.parametrize("world", ["sqlite"], indirect=True)
def test_a_pipelines_first_promotion_logs_none_for_what_was_not_there(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the first promotion there is no production and no serving index: the log says `none`, not `vNone` or
    `#None`, when it moves them and when a failed first promotion moves them back."""
    w = world
    with promotion_lease(w.locker, "demo") as lease:
        w.store.registry.remove_alias("retrieval_index", actor="test", fence=lease.fence)
        w.store.registry.remove_alias("production", actor="test", fence=lease.fence)
    request = {"id": "apr-first", "decided_by": "alice"}
    lines: list[str] = []

    def first_promotion() -> SagaState:
        with promotion_lease(w.locker, "demo") as lease:
            steps = promotion_steps(
                w.store, w.vectors, version=w.v1, request=request, lease=lease, run_id=None, log=lines.append
            )
            return run(saga_id(request), steps, {}, StoreJournal(w.store.sagas, "test"), on_event=lines.append)

    monkeypatch.setenv("RUNTIME_OPS_FAILPOINTS", "promotion.announce=raise")
    with pytest.raises(SagaFailed):
        first_promotion()
    assert w.store.registry.alias("production") is None and w.store.registry.alias("retrieval_index") is None
    monkeypatch.delenv("RUNTIME_OPS_FAILPOINTS")
    assert first_promotion().status == "done"
    index = w.index_of(w.v1)
    assert lines.count(f"production: none -> v{w.v1}") == 2
    assert lines.count(f"retrieval_index: none -> #{index} (model v{w.v1})") == 2
    assert "compensated: production back to none" in lines
    assert f"retrieval_index: #{index} -> none (production is unset)" in lines  # serving went back with production
    assert not [line for line in lines if "None" in line]
