"""A sixteen-document corpus with one golden question per document, and a pipeline serving one lsa model while a
candidate waits beside its rollout: the online gate's tests (test_online_gate.py, test_forged_evidence.py) set up
production and candidate through the store and the gate, without a Dagster run."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from runtime_ops.approvals.requests import evaluate_gate, request_policy
from runtime_ops.embedders.lsa import EmbedderParams, digest, train_embedder
from runtime_ops.locks.factory import locker_for
from runtime_ops.models.promotion_saga import lock_name
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.policies.gate_rule import judge
from runtime_ops.serving.rollout_start import start_rollout
from runtime_ops.serving.vector_index import ensure_index
from runtime_ops.settings import get_settings
from runtime_ops.store import NewObject, StateStore
from runtime_ops.vectors.factory import pipeline_vector_store

WORDS = ("amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "jasper", "kestrel",
         "lagoon", "marble", "nectar", "onyx", "prairie")  # fmt: skip
VERBS = ("export", "import", "rotate", "compress", "archive", "sync", "index", "merge", "audit", "render", "deploy",
         "restore", "encrypt", "schedule", "trace", "cache")  # fmt: skip
# The golden set: one question per document, that document relevant.
GOLDEN = {f"how do I {VERBS[i]} in {WORDS[i]}": f"docs/{WORDS[i]}.md" for i in range(len(WORDS))}
WEAK, GOOD = EmbedderParams(dim=2, seed=1), EmbedderParams(dim=12, seed=1)


def text(i: int) -> str:
    w, v = WORDS[i], VERBS[i]
    return (
        f"The {w} service can {v} records. To {v} with {w}, open the {w} console and choose {v}. Notes for every team."
    )


def ndcg5(embedder: Any) -> np.ndarray:
    """Per golden question, nDCG@5 of its one relevant document under `embedder` (the offline half's metric)."""
    docs = embedder.embed([text(i) for i in range(len(WORDS))])
    scores = embedder.embed(list(GOLDEN)) @ docs.T
    ranks = [int((scores[i] > scores[i, i]).sum()) + 1 for i in range(len(WORDS))]
    return np.array([1 / np.log2(r + 1) if r <= 5 else 0.0 for r in ranks])


def serve_pair(
    store: StateStore, spec: PipelineSpec, production: EmbedderParams, candidate: EmbedderParams
) -> tuple[dict[str, Any], str]:
    """Land the corpus, register production (v1) and the candidate (v2), both indexed, production serving; record
    the candidate's evaluation report, open its request through the gate and start its rollout. Returns the pending
    request and the gate's message."""
    vectors = pipeline_vector_store(spec.vector_store)
    keys = sorted(GOLDEN.values())
    batch = store.ledger.record_batch("test://", [NewObject(k, "v1", 10, None) for k in keys])
    assert batch is not None
    by_key = {d["key"]: d for d in store.documents.batch_documents(batch["id"])}
    for i, w in enumerate(WORDS):
        store.documents.store_chunks(by_key[f"docs/{w}.md"]["id"], [text(i)])
    texts = [t for _, _, t in store.documents.current_chunks()]
    models = []
    for params in (production, candidate):
        embedder = train_embedder(texts, params)
        data = embedder.to_bytes()
        model, _ = store.registry.register_model(
            digest=digest(data), artifact_id=store.artifacts.put_artifact("embedder", data, digest(data)),
            params={"kind": "lsa", **params.to_dict()}, n_documents=len(keys), n_chunks=len(keys),
            corpus_revision=store.ledger.corpus_revision(), run_id=None,
        )  # fmt: skip
        version = int(model["version"])
        models.append((version, embedder, ensure_index(store, vectors, version, embedder=embedder)))
    (prod_v, prod_e, prod_index), (cand_v, cand_e, _) = models
    with locker_for(None, get_settings().resolved_database_url, get_settings()).hold(lock_name(spec.name)) as lease:
        store.registry.set_alias("production", prod_v, actor="test", fence=lease.fence)
        store.registry.set_alias("retrieval_index", prod_index.index_id, actor="test", fence=lease.fence)
    cand, prod = ndcg5(cand_e), ndcg5(prod_e)
    verdict = judge({"ndcg@5": cand}, {"ndcg@5": prod}, spec.gate)
    bounds = verdict.interval_dict()
    interval = {**bounds, "metric": "ndcg@5"} if bounds is not None else None
    store.evaluations.record_eval_report(
        candidate_version=cand_v, production_version=prod_v,
        candidate_metrics={"ndcg@5": float(cand.mean()), "questions": len(cand)},
        production_metrics={"ndcg@5": float(prod.mean()), "questions": len(prod)},
        verdict={**verdict.to_dict(), "primary_metric": "ndcg@5", "interval": interval, "changed_questions": []},
        markdown="", report_digest=hashlib.sha256(spec.name.encode()).hexdigest(),
        candidate_digest=hashlib.sha256(f"{spec.name}:{cand_v}".encode()).hexdigest(),
    )  # fmt: skip
    gate = evaluate_gate(store, requested_by="test", policy=request_policy(spec), online=spec.gate.online)
    assert gate.status == "pending" and gate.request is not None, gate.message
    assert "rollout #" in start_rollout(store, spec, vectors, gate.request)
    return gate.request, gate.message
