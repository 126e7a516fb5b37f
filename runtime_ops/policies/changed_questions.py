"""The evaluation questions whose top results changed most between the candidate and production (pure).

Stored with the gate's verdict as evidence for the person who decides; how it reads: `policies/gate_text.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ChangedQuestion", "changed_questions"]


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


@dataclass(frozen=True)
class ChangedQuestion:
    """One question whose top results differ between the candidate and production rankings."""

    id: str
    change: float  # 1 - Jaccard similarity of the two top-k document sets, in (0, 1]
    candidate_top: tuple[str, ...]
    production_top: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "change": float(self.change),
            "candidate_top": list(self.candidate_top),
            "production_top": list(self.production_top),
        }


def changed_questions(
    cand_ranked: Sequence[Sequence[str]],
    prod_ranked: Sequence[Sequence[str]],
    questions: Sequence[_HasId],
    limit: int = 5,
    *,
    top_k: int = 5,
) -> list[ChangedQuestion]:
    """The questions whose top results changed most between the two models, most changed first.

    Change is 1 - Jaccard(top-k of candidate, top-k of production) as document sets, so a mere
    reordering inside the top k does not count; ties are ordered by question id. Questions whose
    top-k sets are equal are left out, so fewer than `limit` may be returned.
    """
    if not len(cand_ranked) == len(prod_ranked) == len(questions):
        raise ValueError(
            f"{len(cand_ranked)} candidate rankings, {len(prod_ranked)} production rankings "
            f"for {len(questions)} questions"
        )
    for name, value in (("limit", limit), ("top_k", top_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    changed: list[ChangedQuestion] = []
    for cand, prod, question in zip(cand_ranked, prod_ranked, questions, strict=True):
        cand_top = tuple(dict.fromkeys(cand))[:top_k]
        prod_top = tuple(dict.fromkeys(prod))[:top_k]
        union = set(cand_top) | set(prod_top)
        if not union:
            continue
        change = 1.0 - len(set(cand_top) & set(prod_top)) / len(union)
        if change > 0:
            changed.append(ChangedQuestion(question.id, change, cand_top, prod_top))
    changed.sort(key=lambda c: (-c.change, c.id))
    return changed[:limit]
