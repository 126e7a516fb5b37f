"""Blue/green on the query path: while a promotion fills v2's shadow index and swaps the alias, and while a rollback
swaps it back, `/api/search` keeps answering under concurrent load; every response comes from exactly one index
version (its results are that version's results, never a mix), and the rollback serves v1's index again without
embedding anything (on the embedded default and on PostgreSQL + pgvector)."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer, operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate
from runtime_ops_tests.support.served import served_from

QUERY = "json dumps indent sort_keys"
CLIENTS = 4
# The load's clients share one key and search as fast as they can: over the default per-key limit, not tested here.
UNLIMITED = {"RUNTIME_OPS_KEY_SEARCHES_PER_S": "0"}


class Load:
    """CLIENTS threads sending the same search until stopped; every response is kept."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self.stop = threading.Event()
        self.responses: list[tuple[int, Any]] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._client, daemon=True) for _ in range(CLIENTS)]

    def _client(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                try:
                    resp = client.post(f"{self.url}/api/search", json={"query": QUERY, "k": 5}, headers=self.headers)
                    got: tuple[int, Any] = (resp.status_code, resp.json() if resp.status_code == 200 else resp.text)
                except httpx.HTTPError as exc:
                    got = (0, repr(exc))
                with self._lock:
                    self.responses.append(got)

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(timeout=60)


def _answer(store: StateStore, body: dict[str, Any]) -> tuple[int, int, tuple[int, ...]]:
    """(model version, index id, the chunk ids found, in order): what the query log says served a response."""
    return (*served_from(store, body["request_id"]), tuple(r["chunk_id"] for r in body["results"]))


def _one(api: ApiServer, store: StateStore, headers: dict[str, str]) -> tuple[int, int, tuple[int, ...]]:
    resp = web.post(f"{api.url}/api/search", json={"query": QUERY, "k": 5}, headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    return _answer(store, resp.json())


@pytest.mark.parametrize("backend", ["lance", "pgvector"])
def test_promotion_and_rollback_swap_under_search_load(
    backend: str, env: Any, dagster_instance: Any, tmp_path: Path, request: pytest.FixtureRequest, capsys: Any
) -> None:
    from runtime_ops.alerts.rollback import run_rollback
    from runtime_ops.components.loading import get_spec
    from runtime_ops.locks.factory import open_locker
    from runtime_ops.serving.vector_store import pipeline_vectors

    landing = tmp_path / "landing"
    if backend == "pgvector":
        url = request.getfixturevalue("pgvector_url")
        env(database_url=url, landing=str(landing), RUNTIME_OPS_VECTOR_STORE=url, **NEEDS_A_HUMAN, **UNLIMITED)
    else:
        env(landing=str(landing), **NEEDS_A_HUMAN, **UNLIMITED)
    store, pending, flow = pending_candidate(landing, dagster_instance)
    # v1 serves the whole corpus (the second half too), as automation keeps it while v2 waits.
    assert flow.materialize(["document_embeddings", "retrieval_index"]).success
    headers = {"Authorization": f"Bearer {store.api_keys.create('swap-test', ['search']).key}"}

    with ApiServer(get_settings()) as api:
        v1 = _one(api, store, headers)
        assert v1[0] == 1
        with Load(api.url, headers) as promoting:
            assert operator_cli(["approvals", "approve", pending["id"], "--as", "alice"]) == 0
            [promotion] = flow.tick_and_run("approvals_sensor")  # fills v2's shadow index, swaps the alias
            assert promotion.success
            v2 = _one(api, store, headers)
        assert v2[0] == 2 and v2[1] != v1[1]
        embedded_v1 = store.embeddings.embedding_counts(1)["embedded"]

        with Load(api.url, headers) as rolling_back:
            outcome = run_rollback(
                store.scoped("demo"),
                open_locker(get_settings()),
                pipeline_vectors(get_spec("demo")),
                alert_key="test-rollback",
                alert_ref="test",
                from_version=2,
                to_version=1,
                approval_id=None,
                run_id=None,
            )
            assert outcome.status == "done", outcome
            back = _one(api, store, headers)
        assert back == v1, "the rollback serves v1's own index again: same index, same results"
        assert store.embeddings.embedding_counts(1)["embedded"] == embedded_v1, "nothing was re-embedded"

    for name, load, allowed in (("promotion", promoting, {v1, v2}), ("rollback", rolling_back, {v2, v1})):
        failed = [r for r in load.responses if r[0] != 200]
        assert not failed, f"{len(failed)} failed queries during the {name}: {failed[:3]}"
        served = Counter(_answer(store, body) for _, body in load.responses)
        assert set(served) <= allowed, f"a response mixed versions during the {name}: {set(served) - allowed}"
        with capsys.disabled():
            print(f"\n{backend} {name}: {len(load.responses)} queries, served by " + ", ".join(
                f"v{k[0]} index #{k[1]}: {n}" for k, n in sorted(served.items())
            ))  # fmt: skip
        assert len(load.responses) >= CLIENTS
