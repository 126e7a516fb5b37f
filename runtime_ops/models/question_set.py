"""The evaluation question sets of a pipeline: reviewed questions, topped up with ones generated from the corpus; and
beside them the production queries (logged queries with positive feedback, `models/production_queries.py`).

Glue over the store (no Dagster): the set is built in one streaming pass over the current chunks, stored as a
content-addressed JSONL artifact (its sha256 is the set's version) and pointed at by the `question_set` alias,
so every evaluation report names the exact set it scored and a changed set is a new version. The production
queries are stored the same way under their own alias, `production_queries`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from runtime_ops.documents.chunk_profiles import declared, ensure_chunks
from runtime_ops.http import EndpointError
from runtime_ops.models.golden import GoldenQuestion, evaluable, load_golden_set
from runtime_ops.models.production_queries import METHOD, Judgement, production_questions
from runtime_ops.models.questions import GeneratedQuestion, generate_questions, split_holdout
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.serving.endpoint import ChatEndpoint
from runtime_ops.store import StateStore
from runtime_ops.store.corpus.documents import Documents
from runtime_ops.store.operations.effects import Effects
from runtime_ops.store.registry.artifacts import ArtifactCollected, Artifacts
from runtime_ops.store.registry.registry import Registry
from runtime_ops.tags import PRODUCTION_ALIAS, PRODUCTION_QUERIES_ALIAS

ALIAS = "question_set"
_KIND = "question_set"


@dataclass(frozen=True)
class SetQuestion:
    question: GoldenQuestion
    provenance: dict[str, str | int]
    gating: bool  # held out for the gate (reviewed questions always are)


@dataclass
class QuestionSet:
    questions: list[SetQuestion]
    version: str = ""
    artifact_id: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def gating(self) -> list[GoldenQuestion]:
        return [q.question for q in self.questions if q.gating]

    @property
    def mix(self) -> dict[str, int]:
        """How many gating questions each method contributed ("reviewed", "inverse_cloze", "heading", ...)."""
        counts: dict[str, int] = {}
        for q in self.questions:
            if q.gating:
                method = str(q.provenance.get("method", "unknown"))
                counts[method] = counts.get(method, 0) + 1
        return dict(sorted(counts.items()))

    def to_bytes(self) -> bytes:
        lines = [
            json.dumps(
                {
                    "id": q.question.id,
                    "question": q.question.question,
                    "relevant": list(q.question.relevant),
                    "provenance": q.provenance,
                    "gating": q.gating,
                },
                sort_keys=True,
                ensure_ascii=False,
                separators=(",", ":"),
            )
            for q in sorted(self.questions, key=lambda q: q.question.id)
        ]
        return ("\n".join(lines) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, artifact_id: int | None = None) -> QuestionSet:
        questions = []
        for line in data.decode("utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                questions.append(
                    SetQuestion(
                        GoldenQuestion(r["id"], r["question"], tuple(r["relevant"])), r["provenance"], r["gating"]
                    )
                )
        return cls(questions, hashlib.sha256(data).hexdigest(), artifact_id)


def question_profile(store: StateStore, spec: PipelineSpec) -> int:
    """The chunking profile questions are generated from: production's (so a candidate that cuts differently is
    scored on the same questions as before), else the declared one; its chunks are cut first where missing."""
    production = store.registry.alias(PRODUCTION_ALIAS)
    profile = store.profiles.of_model(production) if production is not None else declared(store.profiles, spec)[0]
    ensure_chunks(store.documents, store.profiles, profile)
    return profile


def corpus_keys(documents: Documents, profile: int) -> set[str]:
    """The keys of the documents whose current chunks (of `profile`) evaluation can find."""
    keys: set[str] = set()
    for page in documents.iter_current_chunks(profile=profile):
        keys.update(key for _, key, _ in page)
    return keys


def _chunks(documents: Documents, profile: int) -> Iterator[tuple[int, str, str]]:
    for page in documents.iter_current_chunks(profile=profile):
        yield from page


def _reviewed(spec: PipelineSpec, keys: set[str], notes: list[str]) -> list[GoldenQuestion]:
    path = Path(spec.golden_set) if spec.golden_set else None
    if path is None or not path.exists():
        if path is not None:
            notes.append(f"no reviewed golden set at {path}")
        return []
    questions = evaluable(load_golden_set(path), keys)
    notes.append(f"{len(questions)} reviewed question(s) of {path} apply to this corpus")
    return questions


QUESTION_PROMPT = (
    "Write one question that a user of this document collection might ask and that the passage below answers. "
    "Use your own words rather than copying a sentence. Reply with the question only."
)
# Consecutive endpoint failures after which the rest of the set keeps its offline questions (each failure has
# already been retried under the endpoint's backoff policy).
_GIVE_UP_AFTER = 3


def endpoint_questions(
    documents: Documents,
    effects: Effects,
    spec: PipelineSpec,
    generated: list[GeneratedQuestion],
    notes: list[str],
    run_id: str | None,
) -> list[GeneratedQuestion]:
    """Have the pipeline's chat endpoint (answers.endpoint) write the inverse-cloze questions in its own words.

    Each question is an effect keyed by (model, chunk digest): a re-run, a retry or a later set reuses it instead
    of asking again. Where the endpoint fails (after its retries), the offline question stays and the note says
    how many; the set is still deterministic given the cached answers.
    """
    import os

    answers = spec.answers
    assert answers.endpoint is not None
    key = os.environ.get(answers.api_key_env) if answers.api_key_env else None
    ids = [int(q.provenance["chunk_id"]) for q in generated if q.provenance.get("method") == "inverse_cloze"]
    texts = documents.chunk_texts(ids)
    out: list[GeneratedQuestion] = []
    asked = reused = failed = streak = 0
    with ChatEndpoint(answers.endpoint, api_key=key or None, model=answers.model) as llm:
        for q in generated:
            chunk = texts.get(int(q.provenance.get("chunk_id", -1)))
            if q.provenance.get("method") != "inverse_cloze" or chunk is None or streak >= _GIVE_UP_AFTER:
                out.append(q)
                continue
            digest = str(q.provenance["chunk_sha256"])
            effect = f"question:{answers.model}:{digest}"
            claim = effects.claim_effect(effect, "question", run_id or "golden_questions")
            text = None
            if claim.action == "skip" and claim.result:
                text, reused = str(claim.result["question"]), reused + 1
            elif claim.action in ("run", "takeover"):
                try:
                    reply = llm.complete(
                        [{"role": "system", "content": QUESTION_PROMPT}, {"role": "user", "content": chunk[2]}],
                        max_tokens=80,
                    )
                    text = " ".join(reply.split())[:500] or None
                    asked, streak = asked + 1, 0
                except EndpointError as exc:
                    effects.fail_effect(effect, str(exc))
                    failed, streak = failed + 1, streak + 1
                if text:
                    effects.finish_effect(effect, {"question": text})
            if not text:
                out.append(q)
                continue
            provenance = {**q.provenance, "method": "endpoint", "model": answers.model}
            out.append(GeneratedQuestion(f"gen-endpoint-{digest}", text, q.relevant, provenance))
    notes.append(
        f"endpoint {answers.model} wrote {asked} question(s), {reused} reused from earlier runs, {failed} failed "
        "(those keep their offline question)"
    )
    return out


def build_question_set(store: StateStore, spec: PipelineSpec, run_id: str | None = None) -> QuestionSet:
    """Reviewed questions that apply to the corpus, then generated ones (held out for gating by a stable split)
    until `evaluation.min_questions` gate. Deterministic for a corpus, golden set and seed."""
    ev = spec.evaluation
    profile = question_profile(store, spec)
    keys = corpus_keys(store.documents, profile)
    notes: list[str] = []
    reviewed = _reviewed(spec, keys, notes)
    out = [SetQuestion(q, {"method": "reviewed"}, True) for q in reviewed]
    missing = ev.min_questions - len(reviewed)
    if missing > 0:
        # Generate with room to spare so the held-out share alone tops the gating set up (the split is a hash,
        # so its share is only about `holdout_fraction`); generation keeps a prefix property, so extra questions
        # never change which ones come first.
        wanted = int(missing / ev.holdout_fraction * 1.5) + 20
        generated = generate_questions(_chunks(store.documents, profile), n=wanted, seed=ev.seed)
        if ev.endpoint_questions and spec.answers.endpoint:
            generated = endpoint_questions(store.documents, store.effects, spec, generated, notes, run_id)
        train, holdout = split_holdout(generated, fraction=ev.holdout_fraction, seed=ev.seed)
        held = {q.id for q in holdout[:missing]}
        spare = {q.id for q in holdout[missing:]}
        for q in generated:
            if q.id not in spare:
                gq = GoldenQuestion(q.id, q.question, tuple(q.relevant))
                out.append(SetQuestion(gq, dict(q.provenance), q.id in held))
        notes.append(
            f"generated {len(generated)} question(s) from the corpus: {len(held)} held out for gating, "
            f"{len(train)} for training"
        )
    qs = QuestionSet(out, notes=notes)
    qs.version = hashlib.sha256(qs.to_bytes()).hexdigest()
    return qs


def save_question_set(
    registry: Registry,
    artifacts: Artifacts,
    qs: QuestionSet,
    run_id: str | None,
    *,
    alias: str = ALIAS,
    kind: str = _KIND,
) -> QuestionSet:
    data = qs.to_bytes()
    digest = hashlib.sha256(data).hexdigest()
    artifact_id = artifacts.put_artifact(kind, data, digest)
    if registry.alias(alias) != artifact_id:
        registry.set_alias(alias, artifact_id, actor=f"run:{run_id}" if run_id else "runtime_ops", run_id=run_id)
    qs.version, qs.artifact_id = digest, artifact_id
    return qs


def current_question_set(store: StateStore, spec: PipelineSpec, run_id: str | None = None) -> QuestionSet:
    """The set `golden_questions` last stored; built (and stored) now when there is none yet."""
    artifact_id = store.registry.alias(ALIAS)
    if artifact_id is not None:
        return QuestionSet.from_bytes(store.artifacts.get_artifact(artifact_id), artifact_id)
    return save_question_set(store.registry, store.artifacts, build_question_set(store, spec, run_id), run_id)


def build_production_queries(store: StateStore, spec: PipelineSpec) -> tuple[QuestionSet | None, str]:
    """The production queries of the pipeline's query log as a set (never gating), or None when there are none to
    use; and a note saying which. Only `queries: {log: text}` keeps text to evaluate: under `hash` or `off` there is
    no set, whatever the log holds. Relevant documents are narrowed to the corpus, as the reviewed set's are."""
    if not spec.queries.keeps_text:
        return None, (
            f"production queries: none, queries.log is {spec.queries.log!r}: no query text is kept to evaluate "
            "(declare queries: {log: text} to collect them)"
        )
    judgements = (Judgement(*row) for row in store.query_log.feedback_with_text())
    found = production_questions(judgements)
    questions = evaluable(found, corpus_keys(store.documents, question_profile(store, spec)))
    needed = spec.evaluation.min_production_queries
    counted = f"{len(questions)} logged query(ies) with positive feedback on documents in the corpus"
    if len(questions) < needed:
        return None, f"production queries: {counted}, fewer than evaluation.min_production_queries ({needed}): not used"
    qs = QuestionSet([SetQuestion(q, {"method": METHOD}, False) for q in questions])
    qs.version = hashlib.sha256(qs.to_bytes()).hexdigest()
    return qs, f"production queries: {counted}, reported beside the gating set (not gating)"


def save_production_queries(store: StateStore, qs: QuestionSet | None, run_id: str | None) -> QuestionSet | None:
    """Point `production_queries` at `qs`; with None, remove the alias, so a set that retention shrank below its
    minimum, or a pipeline that stopped keeping text, is not scored from an older version.

    The version it replaces is released (its row and digest stay, so old reports still name it; its text goes):
    query text outlives the log's retention by at most one `golden_questions` run, not for as long as artifacts are
    kept. Unless another pipeline's set is the same content (artifacts are shared by digest)."""
    old = store.registry.alias(PRODUCTION_QUERIES_ALIAS)
    if qs is not None:
        qs = save_question_set(
            store.registry, store.artifacts, qs, run_id, alias=PRODUCTION_QUERIES_ALIAS, kind=PRODUCTION_QUERIES_ALIAS
        )
    elif old is not None:
        store.registry.remove_alias(
            PRODUCTION_QUERIES_ALIAS, actor=f"run:{run_id}" if run_id else "runtime_ops", run_id=run_id
        )
    if old is not None and (qs is None or qs.artifact_id != old):
        in_use = {row["target"] for row in store.scoped(None).registry.aliases(PRODUCTION_QUERIES_ALIAS)}
        if old not in in_use:
            store.artifacts.release([old])
    return qs


def current_production_queries(store: StateStore) -> QuestionSet | None:
    """The production queries `golden_questions` last stored (None: none in use)."""
    for _ in range(2):  # a version replaced (and released) between reading the alias and its text: read again
        artifact_id = store.registry.alias(PRODUCTION_QUERIES_ALIAS)
        if artifact_id is None:
            return None
        with contextlib.suppress(ArtifactCollected):
            return QuestionSet.from_bytes(store.artifacts.get_artifact(artifact_id), artifact_id)
    return None
