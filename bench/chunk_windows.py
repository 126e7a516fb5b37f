"""Chunks that fit the model: the character chunking of old against chunks cut with the embedder's tokenizer.

all-MiniLM-L6-v2 reads 256 tokens of a text (its [CLS] and [SEP] included) and silently drops the rest. Two
corpora, each parsed once (the same parser for both sides), then cut two ways:

- **baseline**: `chunk_text` at 1,200 characters with 150 shared, what every embedder got before chunking
  profiles (and what lsa still gets by default);
- **ours**: the chunking profile a `sentence_transformers` pipeline declares by default (`declared_profile`): the
  model's own tokenizer, at most 256 tokens a chunk with 32 shared.

Corpora: the demo corpus (`runtime_ops/demo/corpus`, 57 documents in six formats), and one that is not the demo:
the Markdown long descriptions (their READMEs) of the Python packages installed from the test lock, read from
their `*.dist-info/METADATA` (BENCH_CHUNK_PACKAGES of them, default 60, in name order: a fixed set wherever the
lock is installed).

Per corpus two rows:
- `<corpus>.over_window`: the share of chunks longer than the window, counted with the model's tokenizer (ours
  must be 0); the details give the share of all chunk tokens the model never reads.
- `<corpus>.ndcg10`: retrieval nDCG@10 of all-MiniLM-L6-v2 (documents ranked by their best chunk, as the
  evaluation ranks them) over the same questions for both sides, with the paired bootstrap interval of ours -
  baseline. Relevance is document-level, so the questions do not depend on either chunking: the demo's reviewed
  golden set (45 questions, its own row), and for both corpora questions the project's own generator
  (`generate_questions`: inverse cloze and headings) makes from a third, neutral cut of each document: its
  Markdown sections (a heading and what follows it up to the next heading), seed 0.

Embedding both sides with MiniLM on 2 shared cores takes minutes: run it on its own (`python -m bench -k
chunking`).
"""

from __future__ import annotations

import email
import importlib.metadata
import itertools
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.common import BenchResult, Target, benchmark

PACKAGES = int(os.environ.get("BENCH_CHUNK_PACKAGES", "60"))
QUESTIONS = int(os.environ.get("BENCH_CHUNK_QUESTIONS", "150"))
MODEL = "all-MiniLM-L6-v2"
_HEADING = re.compile(r"^#{1,6} ", re.MULTILINE)

Corpus = list[tuple[str, str]]  # (document key, parsed text)


def demo_corpus() -> Corpus:
    from runtime_ops.demo import CORPUS_DIR, corpus_keys
    from runtime_ops.documents.parsing import parse_document

    return [
        (key, parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=10 * 1024 * 1024).text)
        for key in corpus_keys()
    ]


def package_readmes(limit: int = PACKAGES) -> dict[str, str]:
    """name -> Markdown README (the METADATA long description) of the first `limit` installed packages that have
    one of more than 2,000 characters, in name order."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        raw = dist.read_text("METADATA")
        if not raw:
            continue
        message = email.message_from_string(raw)
        if "markdown" not in str(message.get("Description-Content-Type", "")).lower():
            continue
        body = message.get_payload()
        name = str(message.get("Name", "")).lower()
        if isinstance(body, str) and len(body) > 2000 and name:
            found.setdefault(name, body)
    return {name: found[name] for name in sorted(found)[:limit]}


def package_corpus(limit: int = PACKAGES) -> Corpus:
    """The Markdown READMEs of installed packages, parsed as Markdown."""
    from runtime_ops.documents.parsing import parse_document

    return [
        (f"{name}.md", parse_document(f"{name}.md", body.encode(), max_bytes=1 << 24).text)
        for name, body in package_readmes(limit).items()
    ]


def sections(corpus: Corpus) -> list[tuple[int, str, str]]:
    """A neutral cut for question generation: each document's Markdown sections (heading + body)."""
    units: list[tuple[int, str, str]] = []
    for key, text in corpus:
        starts = [0, *(m.start() for m in _HEADING.finditer(text) if m.start() > 0), len(text)]
        for start, end in itertools.pairwise(starts):
            if text[start:end].strip():
                units.append((len(units), key, text[start:end].strip()))
    return units


def _cut(corpus: Corpus, chunker: Callable[[str], list[str]]) -> tuple[list[str], list[str]]:
    texts: list[str] = []
    keys: list[str] = []
    for key, text in corpus:
        for chunk in chunker(text):
            texts.append(chunk)
            keys.append(key)
    return texts, keys


def _window_stats(texts: Sequence[str], count: Callable[[str], int], window: int) -> dict[str, Any]:
    lengths = [count(t) for t in texts]
    over = [n for n in lengths if n > window]
    total = sum(lengths)
    lost = sum(n - window for n in over)
    return {
        "chunks": len(texts),
        "over_window": len(over),
        "over_window_share": len(over) / len(texts),
        "tokens_never_read_share": lost / total if total else 0.0,
        "median_tokens": sorted(lengths)[len(lengths) // 2],
        "max_tokens": max(lengths),
    }


class _Side:
    """One chunking of a corpus, embedded once, scored on any question set."""

    def __init__(self, embedder: Any, texts: list[str], keys: list[str]) -> None:
        started = time.monotonic()
        self.embedder, self.keys = embedder, keys
        self.vectors = embedder.embed(texts)
        self.embed_seconds = round(time.monotonic() - started, 1)

    def ndcg10(self, questions: Sequence[Any]) -> Any:
        from runtime_ops.models.metrics import per_question_metrics, rank_documents

        query_vecs = self.embedder.embed([q.question for q in questions])
        ranked = rank_documents(query_vecs, self.vectors, self.keys, top_k=10)
        return per_question_metrics(ranked, [q.relevant for q in questions], (10,))["ndcg@10"]


def _compare(name: str, before: _Side, after: _Side, questions: Sequence[Any]) -> BenchResult:
    from runtime_ops.models.golden import evaluable
    from runtime_ops.policies.bootstrap import paired_bootstrap

    selected = evaluable(questions, set(before.keys))
    base, ours = before.ndcg10(selected), after.ndcg10(selected)
    interval = paired_bootstrap(ours, base, resamples=2000, confidence=0.95, seed=0)
    return BenchResult(
        name,
        float(ours.mean()),
        float(base.mean()),
        "nDCG@10",
        Target("ratio", ">=", 1.0),
        {
            "questions": len(selected),
            "delta": round(interval.mean_delta, 4),
            "delta_95ci": [round(interval.low, 4), round(interval.high, 4)],
            "embed_seconds": {"baseline": before.embed_seconds, "ours": after.embed_seconds},
        },
    )


@benchmark("chunking", "chunks over all-MiniLM-L6-v2's window and its nDCG@10: 1,200 characters vs its tokenizer")
def run() -> list[BenchResult]:
    from runtime_ops.demo import CORPUS_DIR
    from runtime_ops.documents.chunk_profiles import chunker
    from runtime_ops.documents.chunking import chunk_text
    from runtime_ops.embedders.sentence import SentenceTransformerEmbedder
    from runtime_ops.embedders.token_counts import counter_for, declared_profile
    from runtime_ops.models.golden import load_golden_set
    from runtime_ops.models.questions import generate_questions
    from runtime_ops.pipeline.spec import ChunkingSpec, EmbedderSpec, SentenceTransformerSpec

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = EmbedderSpec(kind="sentence_transformers", sentence_transformers=SentenceTransformerSpec(model=MODEL))
    profile = declared_profile(spec, ChunkingSpec())
    assert profile.window is not None
    count = counter_for(profile)
    embedder = SentenceTransformerEmbedder(MODEL, batch_size=32)  # reads 256 tokens, as a pipeline's does
    results: list[BenchResult] = []
    for corpus_name, corpus in (("demo", demo_corpus()), ("packages", package_corpus())):
        before = _cut(corpus, chunk_text)
        after = _cut(corpus, chunker(profile))
        stats_b = _window_stats(before[0], count, profile.window)
        stats_a = _window_stats(after[0], count, profile.window)
        results.append(
            BenchResult(
                f"chunking.{corpus_name}.over_window",
                100 * stats_a["over_window_share"],
                100 * stats_b["over_window_share"],
                "% of chunks",
                Target("ours", "<=", 0.0),
                {"documents": len(corpus), "ours": stats_a, "baseline": stats_b, "profile": profile.describe()},
            )
        )
        sides = _Side(embedder, *before), _Side(embedder, *after)
        generated = generate_questions(sections(corpus), n=QUESTIONS, seed=0)
        results.append(_compare(f"chunking.{corpus_name}.ndcg10", *sides, generated))
        if corpus_name == "demo":
            golden = load_golden_set(CORPUS_DIR.parent / "golden.jsonl")
            results.append(_compare("chunking.demo_golden.ndcg10", *sides, golden))
    return results
