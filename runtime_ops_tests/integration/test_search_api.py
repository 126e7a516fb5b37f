"""From landing to `/api/search` on both vector stores: the embedded default (SQLite state store + LanceDB folder)
and PostgreSQL + pgvector (state store and vectors in one real PostgreSQL 16 with the extension). A new document
becomes searchable, an overwrite replaces it, a delete removes it, and a crash in the middle of applying a batch
of changes leaves the index consistent for the retry to finish."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime_ops.settings import get_settings
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.flow import Flow, serving_v1
from runtime_ops_tests.support.served import served_from

pytestmark = pytest.mark.slow(seconds=118)  # alone on 2 cores (Dec 2026): started first, see conftest.py

HOOK = "search-test-webhook-secret"
KEY = "news/probe.md"
PROBE = "The sqlite3 cursor executemany call commits each transaction."


def _setup(backend: str, env: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    landing = tmp_path / "landing"
    if backend == "pgvector":
        url = request.getfixturevalue("pgvector_url")
        env(database_url=url, landing=str(landing), RUNTIME_OPS_VECTOR_STORE=url, RUNTIME_OPS_WEBHOOK_SECRET=HOOK)
    else:  # the embedded default: SQLite state store, LanceDB under RUNTIME_OPS_HOME/vectors
        env(landing=str(landing), RUNTIME_OPS_WEBHOOK_SECRET=HOOK)
    return landing


def _serve(flow: Flow) -> set[str]:
    """Run declarative automation until it asks for nothing more; the serving assets it ran."""
    ran: set[str] = set()
    for _ in range(4):
        keys, run = flow.automate()
        if run is not None:
            assert run.success, [e.message for e in run.all_events if e.is_failure]
        ran |= keys
        if not keys:
            break
    return ran


def search_headers(store: Any) -> dict[str, str]:
    """A fresh API key with the search scope, as the header an application sends."""
    return {"Authorization": f"Bearer {store.api_keys.create('search-test', ['search']).key}"}


def _search(api: ApiServer, headers: dict[str, str], query: str, k: int = 5) -> dict[str, Any]:
    resp = web.post(f"{api.url}/api/search", json={"query": query, "k": k}, headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _keys(result: dict[str, Any]) -> list[str]:
    return [r["document_key"] for r in result["results"]]


@pytest.fixture(params=["lance", "pgvector"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_new_overwritten_and_deleted_documents_reach_search(
    backend: str, env: Any, dagster_instance: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    landing = _setup(backend, env, tmp_path, request)
    store, flow = serving_v1(landing, dagster_instance)
    assert flow.automate() == (set(), None)  # the automation sensor's first tick only takes a baseline
    index = store.indexes.current_index()
    assert index is not None and index["backend"] == backend and index["model_version"] == 1
    with ApiServer(get_settings()) as api:
        api_headers = search_headers(store)
        # No key, no answer; a key without the search scope is refused.
        anonymous = web.post(f"{api.url}/api/search", json={"query": "dataclass"}, timeout=30)
        assert anonymous.status_code == 401
        reader = {"Authorization": f"Bearer {store.api_keys.create('reader', ['read']).key}"}
        assert web.post(f"{api.url}/api/search", json={"query": "x"}, headers=reader, timeout=30).status_code == 403
        before = _search(api, api_headers, "dataclass fields default factory")
        assert served_from(store, before["request_id"]) == (1, index["id"]) and before["results"]

        # 1. A new document lands: after its ingestion and one serving pass it is the best hit for its words.
        (landing / KEY).parent.mkdir(parents=True)
        # Model v1 knows only the demo corpus's words: these come from four different documents of it.
        (landing / KEY).write_text("# Notes\n\nA uuid4 value is pickled, then deepcopy clones it for executemany.\n")
        assert all(r.success for r in flow.tick_and_run("landing_sensor"))
        assert {"document_embeddings", "retrieval_index"} <= _serve(flow)
        assert _keys(_search(api, api_headers, "uuid4 pickled deepcopy executemany"))[0] == KEY

        # 2. Overwritten: the new text is found, the old one is gone from the index (not just outranked).
        (landing / KEY).write_text("# Notes\n\nThe csv sniffer guesses a dialect; json sort_keys and indent.\n")
        assert all(r.success for r in flow.tick_and_run("landing_sensor"))
        _serve(flow)
        hits = _search(api, api_headers, "csv sniffer dialect json sort_keys indent")["results"]
        assert hits[0]["document_key"] == KEY and "sniffer" in hits[0]["text"]
        assert all(
            "uuid4 value is pickled" not in h["text"]
            for h in _search(api, api_headers, "uuid4 pickled deepcopy executemany", 20)["results"]
        )

        # 3. Deleted through the landing webhook: the document leaves the corpus and the index.
        resp = web.post(
            f"{api.url}/webhooks/landing", json={"deleted": [KEY]}, headers={"X-Runtime-Ops-Token": HOOK}, timeout=30
        )
        assert resp.status_code == 202, resp.text
        assert resp.json()["deleted"] == [{"key": KEY, "object_deleted": True, "document_removed": True}]
        assert _serve(flow) == set(), "a deletion materializes nothing automation could follow"
        [sync] = flow.tick_and_run("corpus_sensor")  # the index holds a document that left the corpus
        assert sync.success and sync.dagster_run.job_name == "demo__index_job"
        assert flow.tick("corpus_sensor") == [], "one run per feed position"
        assert KEY not in _keys(_search(api, api_headers, "csv sniffer dialect json sort_keys indent", 20))
    row = store.indexes.current_index()
    assert row is not None and row["synced_seq"] == store.changes.head()
    assert row["n_chunks"] == store.documents.current_chunk_count()


def test_a_crash_while_applying_changes_is_finished_by_the_retry(
    backend: str, env: Any, dagster_instance: Any, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: Any
) -> None:
    landing = _setup(backend, env, tmp_path, request)
    store, flow = serving_v1(landing, dagster_instance)
    for i in range(30):
        path = landing / "bulk" / f"doc-{i:02d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        # Model v1 knows only the demo corpus's words: doc-17 is told apart by words from it (sqlite3.md).
        body = PROBE if i == 17 else f"Widget number {i} is described here with plenty of words about widgets."
        path.write_text(f"# Bulk {i}\n\n{body}\n")
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    served = store.indexes.current_index()
    assert served is not None
    monkeypatch.setenv("RUNTIME_OPS_FAILPOINTS", "index.sync=raise")  # after the upsert, before the position
    failed = flow.materialize(["document_embeddings"])
    assert not failed.success
    row = store.indexes.current_index()
    assert row is not None and row["synced_seq"] == served["synced_seq"], "the position did not move"
    monkeypatch.delenv("RUNTIME_OPS_FAILPOINTS")
    retried = flow.materialize(["document_embeddings", "retrieval_index"])
    assert retried.success
    row = store.indexes.current_index()
    assert row is not None and row["synced_seq"] == store.changes.head()
    # Every current chunk once: the replayed upserts replaced rows instead of adding them.
    assert row["n_chunks"] == store.documents.current_chunk_count()
    with ApiServer(get_settings()) as api:
        api_headers = search_headers(store)
        assert _keys(_search(api, api_headers, PROBE))[0] == "bulk/doc-17.md"
