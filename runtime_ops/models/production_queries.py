"""The "production queries" evaluation set: questions people asked, with the documents they said helped as relevant
(pure: no Dagster, no I/O; the glue that reads the query log and stores the set is `models/question_set.py`).

Which feedback counts: `helpful` and `click` both make a shown item's document relevant to the query. `helpful` is
the explicit judgement; a click is the implicit one every search application can send (it is how click logs have
been read as relevance since Joachims, KDD 2002), and many applications send nothing else. A `not_helpful` on the
same shown item (same request, same chunk) takes that item's positive signal away: a person who clicked, read and
said it did not help has judged it. Another request of the same query may still make the document relevant.

A query is its normalised text (`online/hashing.normalise_query`: NFKC, case-folded, whitespace collapsed), so
"How do I  Export?" and "how do i export?" are one question whose relevant documents are the union of both. The
question's text is that normalised form and its id comes from its hash: both are stable whichever of its requests
retention has already deleted, so the set changes only when what it holds changes.

The set is biased towards the model that served the queries (people click what they were shown, near the top),
which is one reason it is reported beside the reviewed and generated questions and never gates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from runtime_ops.models.golden import GoldenQuestion
from runtime_ops.online.hashing import normalise_query, query_hash

__all__ = ["POSITIVE", "SET_NAME", "Judgement", "production_questions", "question_id"]

SET_NAME = "production queries"  # how reports name the set
POSITIVE = frozenset({"helpful", "click"})
NEGATIVE = "not_helpful"
METHOD = "production_query"  # the provenance of every question of the set


@dataclass(frozen=True)
class Judgement:
    """One piece of feedback on an item shown for a query whose text the log kept."""

    request_id: str
    query_text: str
    chunk_id: int
    document_key: str
    signal: str  # "click" | "helpful" | "not_helpful"


def question_id(normalised: str) -> str:
    return f"production-{query_hash(normalised)[:16]}"


def production_questions(judgements: Iterable[Judgement]) -> list[GoldenQuestion]:
    """One question per distinct normalised query that has at least one relevant document left once `not_helpful`
    took its items away; relevant documents deduplicated and sorted, questions sorted by id (the order, like the
    content, does not depend on the order feedback arrived in)."""
    positive: dict[tuple[str, int], tuple[str, str]] = {}  # (request, chunk) -> (query, document)
    vetoed: set[tuple[str, int]] = set()
    for j in judgements:
        item = (j.request_id, j.chunk_id)
        if j.signal == NEGATIVE:
            vetoed.add(item)
        elif j.signal in POSITIVE:
            text = normalise_query(j.query_text)
            if text:
                positive[item] = (text, j.document_key)
    relevant: dict[str, set[str]] = {}
    for item, (text, key) in positive.items():
        if item not in vetoed:
            relevant.setdefault(text, set()).add(key)
    questions = [GoldenQuestion(question_id(text), text, tuple(sorted(keys))) for text, keys in relevant.items()]
    return sorted(questions, key=lambda q: q.id)
