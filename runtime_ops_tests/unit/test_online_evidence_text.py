"""The online evidence in words (page, Slack, a policy decision's reason): every state an approver can meet."""

from __future__ import annotations

from runtime_ops.online.evidence import ArmRequests, InterleavedQuery, OnlineInputs, ShadowSums, online_evidence
from runtime_ops.online.evidence_text import evidence_lines, summary

ROLLOUT = "rollout #3: interleave at 5% of traffic, active"


def test_no_rollout_a_first_model_and_an_error_say_so() -> None:
    assert evidence_lines(None, first_model=True) == [
        "no online comparison: a first model has no production to compare with"
    ]
    assert evidence_lines(None) == ["no rollout: no live traffic has compared the candidate with production"]
    failed = evidence_lines(None, rollout=ROLLOUT, error="OperationalError: gone")
    assert failed[0].startswith("online evidence unavailable (OperationalError: gone)") and failed[1] == ROLLOUT


def test_interleaving_reads_with_counts_interval_and_how_many_more_queries() -> None:
    queries = (InterleavedQuery(("production", "candidate"), (2,)),) * 7 + (InterleavedQuery(("production",)),)
    evidence = online_evidence(OnlineInputs(rollout_id=3, interleaved=queries), mode="interleave", min_queries=10)
    lines = evidence_lines(evidence, rollout=ROLLOUT)
    assert lines[0].startswith(
        "interleave, 7 queries with a click: candidate wins 7, ties 0, losses 0; preference +1.000"
    )
    assert "[95% CI +" in lines[0] and lines[0].endswith("waiting for 3 more (min_queries 10)")
    assert lines[-1] == f"{ROLLOUT}; 8 requests logged"


def test_canary_shows_the_rate_it_decides_by_and_click_mrr_beside_it() -> None:
    inputs = OnlineInputs(
        candidate=ArmRequests((1, None, None, None)), production=ArmRequests((1, 2, None, None)), shadow=ShadowSums()
    )
    evidence = online_evidence(inputs, mode="canary", min_queries=4)
    assert summary(evidence).startswith(
        "canary, 4 candidate requests: positive-feedback rate 0.250 (1 of 4) vs production 0.500 (2 of 4)"
    )
    assert summary(evidence).endswith(": no difference yet")
    [mrr] = [line for line in evidence_lines(evidence, rollout=ROLLOUT) if line.startswith("click MRR")]
    assert "0.250 (4 candidate requests) vs 0.375 (4 production)" in mrr


def test_shadow_says_it_never_decides() -> None:
    sums = ShadowSums(queries=3, overlap_sum=1.5, overlap_sq_sum=0.75, k=5)
    evidence = online_evidence(OnlineInputs(shadow=sums), mode="shadow", min_queries=2)
    lines = evidence_lines(evidence, rollout=ROLLOUT)
    assert lines[0] == "shadow, 3 queries: informs only, never decides (no difference yet)"
    assert lines[1].startswith("shadow, 3 queries: overlap@5 0.500; latency candidate/production x1.00")
