"""The evaluation questions whose results changed most between the candidate and production (pure).

Stored with the gate's verdict as evidence for the person who decides: for each, whether the candidate did better,
worse or the same on it (by the gate's primary metric for that one question), where its relevant documents rank
under each model, and where the question comes from. How it reads: `policies/gate_text.py`.

Questions people wrote (the reviewed golden set) or asked (production queries) come first: a person judges a result
by a question they recognise. Generated questions follow only when they read as a person's (a section heading; a
question the answers model wrote). Inverse-cloze questions are a sentence's content words with some dropped ("print
stats self sort 1 file create_stats runctx"): they compare models fairly, but nobody asks them, so they are never
shown.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["ChangedQuestion", "RelevantRank", "changed_questions"]

Direction = Literal["better", "worse", "same"]
# By provenance method (`models/questions.py`, `models/production_queries.py`): shown first, shown after, never.
ASKED_BY_PEOPLE = frozenset({"reviewed", "production_query"})
READS_AS_ASKED = frozenset({"heading", "endpoint"})
# Per-question metric values are means of a few ranks' gains: differences below this are float noise.
_EPSILON = 1e-9


class _Question(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def relevant(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class RelevantRank:
    """Where one relevant document ranks (1-based) under each model; None: not in that ranking's top `depth`."""

    document: str
    production: int | None
    candidate: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"document": self.document, "production": self.production, "candidate": self.candidate}


@dataclass(frozen=True)
class ChangedQuestion:
    """One question whose results differ between the candidate and production."""

    id: str
    question: str
    direction: Direction  # by the primary metric on this question: candidate vs production
    delta: float  # candidate - production on the primary metric for this question
    change: float  # 1 - Jaccard similarity of the two top-k document sets, in [0, 1]
    depth: int  # how deep the rankings go: a relevant document absent from them is "not in top <depth>"
    relevant: tuple[RelevantRank, ...]  # best ranked (under either model) first
    source: str = ""  # the question's provenance method ("reviewed", "production_query", "heading", ...)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "direction": self.direction,
            "delta": float(self.delta),
            "change": float(self.change),
            "depth": self.depth,
            "relevant": [r.to_dict() for r in self.relevant],
            **({"source": self.source} if self.source else {}),
        }


def changed_questions(
    cand_ranked: Sequence[Sequence[str]],
    prod_ranked: Sequence[Sequence[str]],
    questions: Sequence[_Question],
    cand_scores: Sequence[float],
    prod_scores: Sequence[float],
    limit: int = 5,
    *,
    top_k: int = 5,
    depth: int = 10,
    sources: Sequence[str] | None = None,
) -> list[ChangedQuestion]:
    """Up to `limit` questions whose results changed most, the biggest gains and losses taking turns.

    A question changed when its primary metric (`cand_scores[i]` vs `prod_scores[i]`) moved or its top-`top_k`
    document set did (a reordering alone moves the metric, not the set). Better and worse questions are each
    ordered by how much the metric moved (then by how much the top-k set changed, then by id) and interleaved,
    best gain first, so an approver sees what the candidate breaks beside what it fixes; questions whose set
    changed while the metric did not ("same") follow, most changed set first. Ranks are read from the first
    `depth` documents of each ranking.

    `sources` (each question's provenance method) orders what is shown: questions people wrote or asked first,
    then generated ones that read as asked; other generated questions are left out. Without it, all are shown.
    """
    sources = list(sources) if sources is not None else [""] * len(questions)
    if (
        not len(cand_ranked)
        == len(prod_ranked)
        == len(questions)
        == len(cand_scores)
        == len(prod_scores)
        == len(sources)
    ):
        raise ValueError(
            f"{len(cand_ranked)} candidate rankings, {len(prod_ranked)} production rankings, {len(cand_scores)} "
            f"candidate and {len(prod_scores)} production scores, {len(sources)} sources for {len(questions)} "
            "questions"
        )
    for name, value in (("limit", limit), ("top_k", top_k), ("depth", depth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    tiers: list[dict[Direction, list[ChangedQuestion]]] = [{"better": [], "worse": [], "same": []} for _ in range(2)]
    for cand, prod, question, c_score, p_score, source in zip(
        cand_ranked, prod_ranked, questions, cand_scores, prod_scores, sources, strict=True
    ):
        tier = _tier(source)
        if tier is None:
            continue
        cand_docs, prod_docs = tuple(dict.fromkeys(cand))[:depth], tuple(dict.fromkeys(prod))[:depth]
        cand_top, prod_top = set(cand_docs[:top_k]), set(prod_docs[:top_k])
        union = cand_top | prod_top
        change = 1.0 - len(cand_top & prod_top) / len(union) if union else 0.0
        delta = float(c_score) - float(p_score)
        direction: Direction = "better" if delta > _EPSILON else "worse" if delta < -_EPSILON else "same"
        if direction == "same" and change == 0:
            continue
        relevant = tuple(
            sorted(
                (RelevantRank(doc, _rank(prod_docs, doc), _rank(cand_docs, doc)) for doc in question.relevant),
                key=lambda r: (min(_or_last(r.production), _or_last(r.candidate)), r.document),
            )
        )
        tiers[tier][direction].append(
            ChangedQuestion(question.id, question.question, direction, delta, change, depth, relevant, source)
        )
    return [c for by_direction in tiers for c in _most_changed_first(by_direction)][:limit]


def _tier(source: str) -> int | None:
    """0: shown first (people's questions; an unknown source, as before sources were known); 1: shown after;
    None: not shown."""
    if not source or source in ASKED_BY_PEOPLE:
        return 0
    return 1 if source in READS_AS_ASKED else None


def _most_changed_first(by_direction: dict[Direction, list[ChangedQuestion]]) -> list[ChangedQuestion]:
    for items in by_direction.values():
        items.sort(key=lambda c: (-abs(c.delta), -c.change, c.id))
    alternating = [
        c
        for pair in itertools.zip_longest(by_direction["better"], by_direction["worse"])
        for c in sorted((c for c in pair if c is not None), key=lambda c: -abs(c.delta))
    ]
    return alternating + by_direction["same"]


def _rank(ranking: tuple[str, ...], document: str) -> int | None:
    return ranking.index(document) + 1 if document in ranking else None


def _or_last(rank: int | None) -> float:
    return float("inf") if rank is None else rank
