"""The ops API loads each pipeline's serving embedder and index before `/readyz` says ready, and the index a
promotion moves the alias to before a request asks for it (embedded defaults: SQLite state store, LanceDB). Told by
state: which embedders were loaded (each load is counted, the first one held until the test lets it go), which index
each pipeline's searcher has warmed, and what the probe answers meanwhile; never by how long anything took."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from runtime_ops.api.app import create_app
from runtime_ops.components.loading import get_spec
from runtime_ops.serving import search as search_module
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops.store.registry.artifacts import Artifacts
from runtime_ops.store.registry.registry import Registry
from runtime_ops.vectors.factory import pipeline_vector_store
from runtime_ops_tests.support.own_corpus import declare_pipeline
from runtime_ops_tests.support.served import served_from
from runtime_ops_tests.support.serving_index import serve_new_model


def _until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> None:
    """Wait for `condition` (a state, not a duration: the deadline only stops a test that would hang)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_serving_indexes_are_loaded_before_ready_and_after_a_promotion_before_any_request(
    env: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    pipelines = tmp_path / "pipelines"
    names = ("alpha", "beta", "gamma")
    for name in names:
        declare_pipeline(pipelines, name, tmp_path / "landing" / name)
    env(RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    alpha = open_store(get_settings().resolved_database_url, get_settings(), pipeline="alpha")
    beta, gamma = alpha.scoped("beta"), alpha.scoped("gamma")
    vectors = {name: pipeline_vector_store(get_spec(name).vector_store) for name in names}
    first = serve_new_model(alpha, vectors["alpha"], seed=1)  # alpha serves v1; beta has no index yet
    # gamma's index cannot be loaded: its model's weights are gone. No reason to stay unready either.
    serve_new_model(gamma, vectors["gamma"], seed=4)
    gamma.artifacts.release([gamma.registry.get_model(1)["artifact_id"]])

    loaded: list[tuple[str | None, int]] = []
    release = threading.Event()
    load_embedder = search_module.load_embedder

    def counted(registry: Registry, artifacts: Artifacts, version: int, spec: Any = None) -> Any:
        loaded.append((registry.pipeline, version))
        assert release.wait(60), "the test never let the first load go"
        return load_embedder(registry, artifacts, version, spec)

    def loads() -> list[tuple[str | None, int]]:
        return [load for load in loaded if load[0] != "gamma"]  # gamma's load is tried again and again

    monkeypatch.setattr(search_module, "load_embedder", counted)
    headers = {"Authorization": f"Bearer {alpha.api_keys.create('app', ['search']).key}"}
    app = create_app(get_settings())
    with TestClient(app) as client:
        _until(loads, "alpha's embedder to be loaded before any request")
        probe = client.get("/readyz")
        assert probe.status_code == 503 and probe.json()["status"].startswith("warming up: "), probe.text
        assert "alpha" in probe.json()["status"]
        _, searcher = app.state.searchers.get("alpha")
        assert searcher.warmed is None

        release.set()
        _until(lambda: client.get("/readyz").status_code == 200, "/readyz to say ready")
        # Ready: alpha's model v1 is loaded and its index open and queried; beta has no index, which is no reason
        # to wait, and the probe says so.
        assert client.get("/readyz").json() == {
            "status": "ready",
            "note": "no serving index yet: beta; not loaded (retrying): gamma",
        }
        assert loads() == [("alpha", 1)] and searcher.warmed == first
        assert ("gamma", 1) in loaded
        found = client.post("/api/search", json={"query": "quokka tracker", "pipeline": "alpha"}, headers=headers)
        assert found.status_code == 200 and served_from(alpha, found.json()["request_id"])[1] == first, found.text
        assert loads() == [("alpha", 1)]  # the request loaded nothing

        # A promotion moves alpha's alias: the loop loads v2 and its index before a request asks.
        second = serve_new_model(alpha, vectors["alpha"], seed=2)
        _until(lambda: searcher.warmed == second, "alpha's new serving index to be loaded")
        assert loads() == [("alpha", 1), ("alpha", 2)]
        found = client.post("/api/search", json={"query": "quokka tracker", "pipeline": "alpha"}, headers=headers)
        assert served_from(alpha, found.json()["request_id"]) == (2, second)
        assert loads() == [("alpha", 1), ("alpha", 2)]

        # beta's first index (its own v1) is loaded as soon as it exists, and the probe's note about it goes.
        third = serve_new_model(beta, vectors["beta"], seed=3)
        ready = {"status": "ready", "note": "not loaded (retrying): gamma"}
        _until(lambda: client.get("/readyz").json() == ready, "beta's serving index to be loaded")
        assert loads()[-1] == ("beta", 1) and app.state.searchers.get("beta")[1].warmed == third
