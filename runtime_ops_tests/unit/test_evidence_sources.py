"""Who the online evidence comes from: a session's repeats of a query count once, the largest key's and session's
shares are reported, dominant ones are left out of the verdict, and a split that does not match its declared share
makes the evidence not decisive (the sample-ratio-mismatch check)."""

from __future__ import annotations

import math

import pytest

from runtime_ops.online.concentration import Source, concentration, dedupe, dominant
from runtime_ops.online.evidence import (
    ArmRequests,
    EvidenceLimits,
    InterleavedQuery,
    OnlineInputs,
    online_evidence,
)
from runtime_ops.online.evidence_text import evidence_lines
from runtime_ops.online.feedback_binding import binding_refusal
from runtime_ops.online.sample_ratio import sample_ratio
from runtime_ops.policies.gate_policy import OnlinePolicy
from runtime_ops.policies.gate_rule import judge_online

P, C = "production", "candidate"
TEAMS = (P, C, P, C)
WIN, LOSS = (2,), (1,)  # a click on the candidate's item, on production's
LIMITS = EvidenceLimits(max_key_share=0.5, max_session_share=0.1)


def _queries(n: int, clicked: tuple[int, ...], key: str, *, session: str | None = None, query: str | None = None,
             tag: str = "") -> list[InterleavedQuery]:  # fmt: skip
    """`n` interleaved queries by `key`, each in its own session and of its own query unless given."""
    return [
        InterleavedQuery(TEAMS, clicked, source=Source(key, session or f"{key}{tag}-s{i}", query or f"q{tag}{i}"))
        for i in range(n)
    ]


def test_a_session_asking_one_query_again_counts_once_and_nets_its_outcomes() -> None:
    repeated = _queries(30, WIN, "k1", session="s1", query="q")  # one user clicking the same query 30 times
    honest = _queries(20, LOSS, "k1")
    evidence = online_evidence(OnlineInputs(interleaved=(*repeated, *honest)), mode="interleave", min_queries=10)
    assert evidence.preference is not None
    assert (evidence.preference.wins, evidence.preference.losses) == (1, 20)
    assert evidence.verdict == "worse"
    # Netted: 2 wins and 1 loss of one session on one query are one win; one each is one tie.
    mixed = [*_queries(2, WIN, "k", session="s", query="a"), *_queries(1, LOSS, "k", session="s", query="a")]
    even = [*_queries(1, WIN, "k", session="s", query="b"), *_queries(1, LOSS, "k", session="s", query="b")]
    pref = online_evidence(OnlineInputs(interleaved=(*mixed, *even)), mode="interleave", min_queries=1).preference
    assert pref is not None and (pref.wins, pref.ties, pref.losses) == (1, 1, 0)


def test_without_a_session_or_a_query_hash_nothing_is_grouped() -> None:
    alone = [InterleavedQuery(TEAMS, WIN, source=Source("k", None, "q")) for _ in range(5)]
    unhashed = [InterleavedQuery(TEAMS, WIN, source=Source("k", "s", None)) for _ in range(5)]
    assert len(dedupe(alone + unhashed, lambda q: q.source, lambda group: group[0])) == 10


def test_canary_repeats_are_one_request_positive_when_any_was() -> None:
    same = tuple(Source("k", "s1", "q") for _ in range(3))
    candidate = ArmRequests((None, 3, 1), same)
    production = ArmRequests((None,) * 4, tuple(Source("k", f"p{i}", "q") for i in range(4)))
    evidence = online_evidence(OnlineInputs(candidate=candidate, production=production), mode="canary", min_queries=1)
    assert evidence.feedback_rate is not None and evidence.click_mrr is not None
    assert (evidence.feedback_rate.candidate_positive, evidence.feedback_rate.candidate_n) == (1, 1)
    assert evidence.click_mrr.candidate.mean == 1.0  # its best rank


def test_concentration_reports_the_largest_key_and_session() -> None:
    sources = [Source("a", "s1"), Source("a", "s1"), Source("a", "s2"), Source("b", None), Source(None, None)]
    spread = concentration(sources)
    assert (spread.observations, spread.keys, spread.sessions, spread.top_key) == (5, 3, 4, "a")
    assert math.isclose(spread.top_key_share, 0.6) and math.isclose(spread.top_session_share, 0.4)
    assert concentration([]).observations == 0
    keys, sessions = dominant(sources, max_key_share=0.5, max_session_share=0.3)
    assert (keys, sessions) == ({"a"}, {"s1"})
    # A request without a session is one observation: never dominant, however few there are.
    assert dominant([Source("a", None)] * 3, max_key_share=1.0, max_session_share=0.1) == (set(), set())
    # One application key serving every user dominates nothing: its users are its sessions, and those are bounded.
    users = [Source("app", f"user-{i}") for i in range(20)]
    assert dominant(users, max_key_share=0.5, max_session_share=0.1) == (set(), set())
    assert dominant([*users, Source("app", "user-0")] * 1 + [Source("app", "user-0")] * 3, max_key_share=0.5,
                    max_session_share=0.1) == (set(), {"user-0"})  # fmt: skip
    assert dominant([*users, Source("other", "x")], max_key_share=0.5, max_session_share=0.1)[0] == {"app"}


def test_a_dominant_key_is_left_out_and_the_rest_decides() -> None:
    honest = [q for i in range(4) for q in _queries(10, LOSS, f"honest-{i}")]  # production is better
    forged = _queries(160, WIN, "attacker")
    alone = online_evidence(OnlineInputs(interleaved=tuple(honest)), mode="interleave", min_queries=20, limits=LIMITS)
    attacked = OnlineInputs(interleaved=(*honest, *forged))
    counted = online_evidence(attacked, mode="interleave", min_queries=20)  # no limits: the attacker wins it
    assert counted.verdict == "better"
    evidence = online_evidence(attacked, mode="interleave", min_queries=20, limits=LIMITS)
    assert alone.verdict == evidence.verdict == "worse"
    assert evidence.concentration is not None and evidence.concentration.top_key == "attacker"
    assert math.isclose(evidence.concentration.top_key_share, 0.8) and evidence.left_out == 160
    assert (
        evidence.caveat
        == "evidence dominated by one key (80% of decisive queries): its 160 decisive queries are left out"
    )
    assert evidence.to_dict()["concentration"]["left_out"] == 160
    text = "\n".join(evidence_lines(evidence, rollout="rollout #1"))
    assert "200 decisive queries from 5 API keys and 200 sessions: the largest key sent 80%" in text
    assert "evidence dominated by one key (80% of decisive queries)" in text


def test_too_little_left_without_the_dominant_key_is_not_decisive() -> None:
    inputs = OnlineInputs(interleaved=(*_queries(83, WIN, "attacker"), *_queries(17, LOSS, "honest")))
    evidence = online_evidence(inputs, mode="interleave", min_queries=20, limits=LIMITS)
    assert evidence.verdict == "not decisive" and evidence.caveat is not None
    assert evidence.caveat.startswith("evidence dominated by one key (83% of decisive queries)")
    assert "too few to decide (min_queries 20)" in evidence.caveat
    assert "not decisive: evidence dominated by one key (83%" in evidence_lines(evidence, rollout="r")[0]
    # The gate waits, and says why, whether or not it requires online evidence.
    ruling = judge_online(policy=OnlinePolicy(required=True), offline_auto_approve=True, first_model=False,
                          verdict=evidence.verdict, caveat=evidence.caveat)  # fmt: skip
    assert ruling.action == "wait" and "dominated by one key" in ruling.reason
    # Below min_queries before anything is left out, it is plainly "not enough queries".
    few = online_evidence(OnlineInputs(interleaved=tuple(_queries(9, WIN, "a"))), mode="interleave", min_queries=20,
                          limits=LIMITS)  # fmt: skip
    assert few.verdict == "not enough queries"


def test_a_dominant_session_is_left_out() -> None:
    one_user = [InterleavedQuery(TEAMS, WIN, source=Source("app", "busy", f"q{i}")) for i in range(30)]
    others = _queries(60, LOSS, "app")
    evidence = online_evidence(OnlineInputs(interleaved=(*one_user, *others)), mode="interleave", min_queries=20,
                               limits=EvidenceLimits(max_key_share=1.0, max_session_share=0.1))  # fmt: skip
    assert evidence.verdict == "worse" and evidence.left_out == 30
    assert evidence.caveat is not None and evidence.caveat.startswith("evidence dominated by one session (33%")


def test_sample_ratio_mismatch() -> None:
    healthy = sample_ratio(310, 292, 0.5)
    assert healthy is not None and not healthy.mismatch and healthy.p > 0.4
    broken = sample_ratio(412, 190, 0.5)
    assert broken is not None and broken.mismatch and broken.p < 1e-9
    assert broken.text() == f"sample ratio mismatch: 412 vs 190 for a 50%/50% split, p={broken.p:.1g}"
    # Chi-square with 1 dof at its 0.1 % critical value 10.828: p = 0.001.
    assert math.isclose(math.erfc(math.sqrt(10.828 / 2)), 0.001, rel_tol=1e-3)
    skewed = sample_ratio(100, 900, 0.1)  # as declared
    assert skewed is not None and not skewed.mismatch
    assert sample_ratio(3, 2, 0.5) is None and sample_ratio(10, 0, 1.0) is None  # too few, or nothing to compare


def test_a_split_that_does_not_match_its_share_is_not_decisive() -> None:
    clicked = tuple(_queries(300, WIN, "k"))
    production = ArmRequests((None,) * 100)  # 300 interleaved vs 100 production for a declared 50/50
    inputs = OnlineInputs(interleaved=clicked, production=production, share=0.5)
    evidence = online_evidence(inputs, mode="interleave", min_queries=20, limits=EvidenceLimits())
    assert evidence.verdict == "not decisive" and evidence.sample_ratio is not None
    assert evidence.caveat is not None and evidence.caveat.startswith("sample ratio mismatch: 300 vs 100 for a 50%")
    fair = OnlineInputs(interleaved=clicked, production=ArmRequests((None,) * 290), share=0.5)
    assert online_evidence(fair, mode="interleave", min_queries=20, limits=EvidenceLimits()).verdict == "better"
    # A canary counts sessions, the unit it assigns: one session's many requests are one unit.
    many = ArmRequests((None,) * 200, tuple(Source("k", "one", f"q{i}") for i in range(200)))
    canary = OnlineInputs(candidate=many, production=ArmRequests((None,) * 8), share=0.5)
    split = online_evidence(canary, mode="canary", min_queries=1, limits=EvidenceLimits()).sample_ratio
    assert split is None  # 1 + 8 sessions: too few units to test


def test_policy_shares_are_checked() -> None:
    assert (OnlinePolicy().max_key_share, OnlinePolicy().max_session_share) == (0.5, 0.1)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="max_key_share must be a share"):
            OnlinePolicy(max_key_share=bad)


def test_feedback_is_bound_to_the_key_and_session_that_searched() -> None:
    def refusal(made_by: str | None, made_in: str | None, caller: str, session: str | None) -> str | None:
        return binding_refusal(request_id="q_1", made_by=made_by, made_in=made_in, caller=caller,
                               caller_session=session)  # fmt: skip

    assert refusal("k1", None, "k1", None) is None
    assert refusal("k1", "h1", "k1", "h1") is None
    assert "made by another API key" in (refusal("k1", None, "k2", None) or "")
    assert "name the same `session`" in (refusal("k1", "h1", "k1", None) or "")
    assert "made in another session" in (refusal("k1", "h1", "k1", "h2") or "")
    assert "made without a session" in (refusal("k1", None, "k1", "h1") or "")
    assert "logged without the API key" in (refusal(None, None, "k1", None) or "")
