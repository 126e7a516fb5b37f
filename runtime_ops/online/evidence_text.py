"""A rollout's online evidence in words, for the approval page, the Slack message and a policy decision's reason
(pure; plain text: each caller escapes it for its own markup).

One line per signal, each with its query count, the deciding one first with its interval and verdict; "waiting
for N more queries" while the count is short, "no rollout" when none ran beside the request; who the decisive
queries came from (the largest key's and session's shares), and why any were left out or nothing is decided
("evidence dominated by one key (83% of decisive queries)", "sample ratio mismatch: 412 vs 190 for a 50/50 split").
"""

from __future__ import annotations

import math

from runtime_ops.online.evidence import OnlineEvidence
from runtime_ops.online.statistics import Interval

__all__ = ["evidence_lines", "sources_line", "summary"]


def _signed(value: float) -> str:
    return f"{value:+.3f}" if math.isfinite(value) else ("+inf" if value > 0 else "-inf")


def _ci(interval: Interval, confidence: float) -> str:
    return f"[{confidence:.0%} CI {_signed(interval.low)}, {_signed(interval.high)}]"


def _rate(positive: int, n: int) -> str:
    return f"{positive / n:.3f} ({positive} of {n})" if n else "n/a (0 requests)"


def _verdict(evidence: OnlineEvidence) -> str:
    if evidence.verdict == "not enough queries":
        return f"not enough queries: waiting for {evidence.missing} more (min_queries {evidence.min_queries})"
    if evidence.verdict == "not decisive":
        return f"not decisive: {evidence.caveat}"
    return evidence.verdict


def sources_line(evidence: OnlineEvidence) -> str | None:
    """Who the decisive queries came from, and what was left out (None: no decisive query yet)."""
    spread = evidence.concentration
    if spread is None or not spread.observations:
        return None
    line = (
        f"{spread.observations} decisive queries from {spread.keys} API key{'s' if spread.keys != 1 else ''} and "
        f"{spread.sessions} session{'s' if spread.sessions != 1 else ''}: the largest key sent "
        f"{spread.top_key_share:.0%}, the largest session {spread.top_session_share:.0%}"
    )
    if evidence.caveat and evidence.verdict != "not decisive":
        line += f"; {evidence.caveat}"
    return line


def summary(evidence: OnlineEvidence) -> str:
    """The deciding signal in one line: mode, queries, the interval and the verdict."""
    mode, n = evidence.mode, evidence.queries
    if mode == "interleave" and evidence.preference is not None:
        p = evidence.preference
        return (
            f"interleave, {n} queries with a click: candidate wins {p.wins}, ties {p.ties}, losses {p.losses}; "
            f"preference {_signed(p.delta)} {_ci(p.interval, p.confidence)}: {_verdict(evidence)}"
        )
    if mode == "canary" and evidence.feedback_rate is not None:
        r = evidence.feedback_rate
        return (
            f"canary, {n} candidate requests: positive-feedback rate {_rate(r.candidate_positive, r.candidate_n)} "
            f"vs production {_rate(r.production_positive, r.production_n)}, difference {_signed(r.difference)} "
            f"{_ci(r.interval, r.confidence)}: {_verdict(evidence)}"
        )
    if mode == "shadow":
        return f"shadow, {n} queries: informs only, never decides ({_verdict(evidence)})"
    return f"{mode}, {n} queries: {_verdict(evidence)}"


def evidence_lines(
    evidence: OnlineEvidence | None, *, first_model: bool = False, rollout: str | None = None, error: str | None = None
) -> list[str]:
    """What an approver reads of the online half: the deciding signal, then the others, then the rollout's state.

    `rollout` describes the rollout beside the request (None: there is none), `error` an evidence that could not be
    computed."""
    if first_model:
        return ["no online comparison: a first model has no production to compare with"]
    if rollout is None:
        return ["no rollout: no live traffic has compared the candidate with production"]
    if error is not None:
        return [f"online evidence unavailable ({error}); nothing is decided on it", rollout]
    if evidence is None:
        return [rollout]
    lines = [summary(evidence)]
    if (who := sources_line(evidence)) is not None:
        lines.append(who)
    if evidence.click_mrr is not None:
        m = evidence.click_mrr
        lines.append(
            f"click MRR {m.candidate.mean:.3f} ({m.candidate.queries} candidate requests) vs "
            f"{m.production.mean:.3f} ({m.production.queries} production), difference {_signed(m.difference)} "
            f"{_ci(m.interval, m.confidence)}"
        )
    if evidence.shadow is not None:
        s = evidence.shadow
        lines.append(
            f"shadow, {s.queries} queries: overlap@{s.k} {s.overlap.mean:.3f}; latency candidate/production "
            f"x{s.latency_ratio:.2f} [{s.confidence:.0%} CI x{s.latency_interval.low:.2f}, "
            f"x{s.latency_interval.high:.2f}]"
        )
    lines.append(f"{rollout}; {evidence.requests} requests logged")
    return lines
