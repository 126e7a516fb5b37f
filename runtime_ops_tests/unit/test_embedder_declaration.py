"""What an embedder's declaration decides of a model: every field that makes other vectors is a change, how a model
is called is not, and a field an older version did not record is no change."""

from __future__ import annotations

from dataclasses import replace

from runtime_ops.embedders.declaration import (
    declaration_change,
    declaration_digest,
    declared_fields,
    recorded_fields,
)
from runtime_ops.pipeline.spec import EmbedderSpec, OpenAIEmbedderSpec, SentenceTransformerSpec

LSA = EmbedderSpec()
# As `_fit_lsa` records an lsa version (ngram_max is not declared: fixed).
LSA_RECORDED = {"kind": "lsa", "dim": 128, "max_features": 50_000, "ngram_max": 2, "seed": 0, "train_sample": 50_000}
OPENAI = EmbedderSpec(
    kind="openai",
    openai=OpenAIEmbedderSpec(endpoint="https://user:pw@emb.example/v1?x=1", model="text-3", dimensions=256),
)
# As `_reference` records an endpoint's version: its identity and how it is called.
OPENAI_RECORDED = {
    "kind": "openai",
    "endpoint": "https://emb.example/v1/embeddings",
    "model": "text-3",
    "dimensions": 256,
    "endpoint_url": "https://user:pw@emb.example/v1?x=1",
    "batch_size": 64,
    "timeout_s": 30.0,
}


def change(spec: EmbedderSpec, params: dict) -> str | None:
    return declaration_change(declared_fields(spec), recorded_fields(params))


def test_the_declaration_a_version_was_made_with_is_no_change() -> None:
    assert change(LSA, LSA_RECORDED) is None
    assert change(OPENAI, OPENAI_RECORDED) is None
    st = EmbedderSpec(kind="sentence_transformers", sentence_transformers=SentenceTransformerSpec(model="/m/mini"))
    assert (
        change(st, {"kind": "sentence_transformers", "model": "/m/mini", "weights_digest": "ab", "batch_size": 8})
        is None
    )
    assert change(st, {"kind": "sentence_transformers", "model": "/m/other", "weights_digest": "ab"})


def test_every_lsa_field_that_makes_other_vectors_is_a_change() -> None:
    assert change(replace(LSA, dim=64), LSA_RECORDED) == "the lsa embedder's declaration changed: dim 128 -> 64"
    assert change(replace(LSA, seed=3), LSA_RECORDED) == "the lsa embedder's declaration changed: seed 0 -> 3"
    both = change(replace(LSA, max_features=900, train_sample=500), LSA_RECORDED)
    assert both == "the lsa embedder's declaration changed: max_features 50000 -> 900, train_sample 50000 -> 500"


def test_an_endpoints_url_model_or_dimensions_is_a_change_how_it_is_called_is_not() -> None:
    o = OPENAI.openai
    assert o is not None
    for edited in (replace(o, model="text-4"), replace(o, dimensions=512), replace(o, endpoint="https://b.example/v1")):
        assert change(replace(OPENAI, openai=edited), OPENAI_RECORDED), edited
    calls = replace(o, batch_size=8, concurrency=1, timeout_s=5.0, api_key_env="OTHER_KEY", max_batch_chars=2000)
    assert change(replace(OPENAI, openai=calls), OPENAI_RECORDED) is None


def test_a_switch_of_kind_names_both_kinds() -> None:
    assert change(LSA, OPENAI_RECORDED) == "the embedder changed from openai to lsa"
    assert change(OPENAI, LSA_RECORDED) == "the embedder changed from lsa to openai"


def test_a_field_an_older_version_did_not_record_is_no_change() -> None:
    older = {k: v for k, v in LSA_RECORDED.items() if k != "train_sample"}
    assert change(replace(LSA, train_sample=500), older) is None
    assert change(replace(LSA, dim=64), older) == "the lsa embedder's declaration changed: dim 128 -> 64"
    assert change(LSA, {}) is None, "a version that recorded nothing is taken as lsa with unknown settings"


def test_the_digest_is_canonical() -> None:
    fields = declared_fields(LSA)
    assert declaration_digest(fields) == declaration_digest(dict(reversed(list(fields.items()))))
    assert declaration_digest(fields) != declaration_digest(declared_fields(replace(LSA, seed=1)))
    assert declaration_digest(declared_fields(LSA)) == declaration_digest(recorded_fields(LSA_RECORDED))
