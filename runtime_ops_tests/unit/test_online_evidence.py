"""A rollout's online evidence: which signal decides per mode, the query counts, and the four verdicts."""

from __future__ import annotations

import math
import random

import pytest

from runtime_ops.online.click_models import PositionBased, grades
from runtime_ops.online.credit import common_prefix
from runtime_ops.online.evidence import (
    ArmRequests,
    InterleavedQuery,
    OnlineInputs,
    ShadowSums,
    online_evidence,
)
from runtime_ops.online.interleaving import team_draft
from runtime_ops.online.statistics import shadow, shadow_from_sums

P, C = "production", "candidate"


def _interleaved(wins: int, losses: int, ties: int = 0, unclicked: int = 0) -> tuple[InterleavedQuery, ...]:
    teams = (P, C, P, C)
    return (
        *(InterleavedQuery(teams, (2,)) for _ in range(wins)),
        *(InterleavedQuery(teams, (1,)) for _ in range(losses)),
        *(InterleavedQuery(teams, (1, 2)) for _ in range(ties)),
        *(InterleavedQuery(teams) for _ in range(unclicked)),
    )


def test_interleave_decides_by_the_preference_over_clicked_queries_only() -> None:
    inputs = OnlineInputs(rollout_id=7, interleaved=_interleaved(40, 10, ties=5, unclicked=30))
    evidence = online_evidence(inputs, mode="interleave", min_queries=50)
    assert evidence.preference is not None
    assert (evidence.preference.wins, evidence.preference.losses, evidence.preference.ties) == (40, 10, 5)
    # The 30 queries without a click are requests, not evidence.
    assert (evidence.queries, evidence.requests, evidence.verdict) == (55, 85, "better")
    assert evidence.confident_win and not evidence.confident_loss and evidence.rollout_id == 7
    assert evidence.feedback_rate is None and evidence.shadow is None


def test_too_few_queries_is_not_a_verdict_either_way() -> None:
    losing = OnlineInputs(interleaved=_interleaved(0, 30))
    early = online_evidence(losing, mode="interleave", min_queries=31)
    assert (early.verdict, early.missing) == ("not enough queries", 1)
    assert not early.confident_loss  # a loss "with confidence" needs the count as well as the interval
    assert online_evidence(losing, mode="interleave", min_queries=30).verdict == "worse"
    even = online_evidence(OnlineInputs(interleaved=_interleaved(20, 20)), mode="interleave", min_queries=10)
    assert even.verdict == "no difference yet"
    nothing = online_evidence(OnlineInputs(), mode="interleave", min_queries=1)
    assert (nothing.queries, nothing.verdict, nothing.preference) == (0, "not enough queries", None)


def test_a_click_on_the_shared_prefix_credits_neither_team() -> None:
    # Both rankings start with the same item: team draft shows it first whichever team the coin credits.
    shared_clicks = tuple(InterleavedQuery((C, P, C, P), (1,), shared=1) for _ in range(40))
    evidence = online_evidence(OnlineInputs(interleaved=shared_clicks), mode="interleave", min_queries=10)
    assert evidence.preference is not None and evidence.preference.ties == 40
    assert evidence.verdict == "no difference yet"
    counted = tuple(InterleavedQuery((C, P, C, P), (1,)) for _ in range(40))
    assert online_evidence(OnlineInputs(interleaved=counted), mode="interleave", min_queries=10).verdict == "better"


def test_canary_decides_by_the_positive_feedback_rate_of_its_own_requests() -> None:
    candidate = ArmRequests((1,) * 30 + (None,) * 70)  # 30 % positive, all at rank 1
    production = ArmRequests((2,) * 600 + (None,) * 400)  # 60 %, at rank 2
    evidence = online_evidence(OnlineInputs(candidate=candidate, production=production), mode="canary", min_queries=100)
    assert evidence.queries == 100 and evidence.requests == 1100
    assert evidence.feedback_rate is not None and math.isclose(evidence.feedback_rate.difference, -0.3)
    assert evidence.verdict == "worse" and evidence.confident_loss
    # Click MRR is shown beside it: 0.3 · 1 against 0.6 · 1/2, no difference, and it does not decide.
    assert evidence.click_mrr is not None and math.isclose(evidence.click_mrr.difference, 0.0, abs_tol=1e-12)
    fewer = online_evidence(OnlineInputs(candidate=candidate, production=production), mode="canary", min_queries=101)
    assert fewer.verdict == "not enough queries" and fewer.missing == 1
    assert online_evidence(OnlineInputs(production=production), mode="canary", min_queries=1).feedback_rate is None


def test_shadow_informs_and_never_decides() -> None:
    sums = ShadowSums(queries=200, overlap_sum=40.0, overlap_sq_sum=8.0, log_latency_ratio_sum=200 * math.log(3),
                      log_latency_ratio_sq_sum=200 * math.log(3) ** 2, k=5)  # fmt: skip
    evidence = online_evidence(OnlineInputs(shadow=sums), mode="shadow", min_queries=100)
    assert evidence.verdict == "no difference yet" and not evidence.decides and not evidence.confident_loss
    assert evidence.shadow is not None and math.isclose(evidence.shadow.overlap.mean, 0.2)
    assert math.isclose(evidence.shadow.latency_ratio, 3.0) and evidence.queries == 200
    assert online_evidence(OnlineInputs(shadow=sums), mode="shadow", min_queries=201).verdict == "not enough queries"
    assert evidence.to_dict()["shadow"]["k"] == 5


def test_shadow_from_sums_agrees_with_the_per_query_form() -> None:
    rng = random.Random(3)
    overlaps = [rng.choice((0.0, 0.2, 0.4, 0.6, 0.8, 1.0)) for _ in range(50)]
    production = [rng.uniform(0.01, 0.05) for _ in range(50)]
    candidate = [p * rng.uniform(0.5, 3.0) for p in production]
    listed = shadow(overlaps, candidate, production, k=5)
    logs = [math.log(c / p) for c, p in zip(candidate, production, strict=True)]
    summed = shadow_from_sums(50, sum(overlaps), sum(o * o for o in overlaps), sum(logs), sum(x * x for x in logs), k=5)
    assert summed.queries == listed.queries == 50
    assert math.isclose(summed.overlap.mean, listed.overlap.mean)
    assert math.isclose(summed.overlap.interval.low, listed.overlap.interval.low, rel_tol=1e-9)
    assert math.isclose(summed.latency_ratio, listed.latency_ratio)
    assert math.isclose(summed.latency_interval.high, listed.latency_interval.high, rel_tol=1e-9)
    with pytest.raises(ValueError, match="overlap"):
        shadow_from_sums(2, 3.0, 5.0, 0.0, 0.0, k=5)


def test_a_simulated_better_candidate_wins_and_a_worse_one_loses() -> None:
    # Users click by a position-based model on the relevant document; the candidate ranks it 1st, production 3rd.
    rng = random.Random(11)
    users = PositionBased()

    def run(candidate_first: bool) -> OnlineInputs:
        queries = []
        for i in range(400):
            relevant = {f"r{i}"}
            good = [f"r{i}", f"a{i}", f"b{i}", f"c{i}"]
            weak = [f"a{i}", f"b{i}", f"r{i}", f"c{i}"]
            prod, cand = (weak, good) if candidate_first else (good, weak)
            drafted = team_draft(prod, cand, 4, random.Random(f"q{i}"))
            shown = [d.item for d in drafted]
            clicked = users.clicks(grades(shown, relevant), rng)
            queries.append(InterleavedQuery(tuple(d.team for d in drafted), tuple(clicked), common_prefix(prod, cand)))
        return OnlineInputs(interleaved=tuple(queries))

    assert online_evidence(run(True), mode="interleave", min_queries=50).verdict == "better"
    assert online_evidence(run(False), mode="interleave", min_queries=50).verdict == "worse"


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="rollout mode 'off'"):
        online_evidence(OnlineInputs(), mode="off", min_queries=10)
    with pytest.raises(ValueError, match="min_queries"):
        online_evidence(OnlineInputs(), mode="canary", min_queries=0)
