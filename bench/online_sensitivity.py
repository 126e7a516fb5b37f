"""Sensitivity of the online comparison: queries needed to tell two real models apart, team-draft interleaving vs a
50/50 A/B split (Chapelle, Joachims, Radlinski and Yue, ACM TOIS 2012, measured on our own models).

Models: three lsa embedders (`train_embedder`, seed 0) fitted on the demo corpus cut by `chunk_text`, differing
only in their dimension; the candidate (BENCH_ONLINE_CANDIDATE, dim 80) against two productions, one about 0.02 and
one about 0.05 below it in offline nDCG@10 (`models/metrics.py`, documents ranked by their best chunk, the demo's
golden set of 45 questions; the measured differences are in the rows' details). Each model's top-10 documents for
every golden question are ranked once.

Simulated traffic (per seed, per click model): each query is a golden question drawn at random, the user clicks by a
click model on the documents shown (`online/click_models.py`: position-based, eta 1; cascade), a relevant document
being the golden question's.

- interleaving: the shown list is `team_draft(production, candidate, 10, rng)`; `credit` gives each query's
  outcome and `statistics.preference` the interval. Ours: the examined-prefix rule with the rankings' common prefix
  shared (clicks there credit neither team); the details hold all four variants (examined prefix or plain
  team-draft counts, with or without the shared prefix) on the same clicks.
- A/B: a fair coin sends the query to one arm, which shows its own top 10; compared are click-through (queries with
  a click, Newcombe's interval on the difference) and click MRR (Welch interval). The A/B figure is the median of
  whichever of the two metrics has the smaller median (the baseline at its best; both are in the details).

"Queries needed" counts every query issued (with or without a click). The interval is read at checkpoints (20
queries, then steps of 5 %), as a live rollout would; a run has decided at the first checkpoint n whose verdict
(interval above or below 0) holds at every checkpoint up to 2n, so a peek that excludes 0 by chance and falls back
is not a decision. A run that has not decided by the cap (BENCH_ONLINE_CAP_INTERLEAVED / _AB) counts as the cap:
a median at the cap means "more than the cap". Runs that decided for the wrong side (the candidate is better
offline) are counted in the details. Median over BENCH_ONLINE_SEEDS seeds (20).
Rows: `sensitivity.ndcg_<difference>.<click model>`, ours = interleaving's median, baseline = the A/B median; target:
ratio <= 0.1 (ten times fewer queries), the issue's target at the smaller difference and the paper's claim at both.
A full run takes about 7 minutes on 2 cores.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import BenchResult, Target, benchmark
from runtime_ops.online.click_models import Cascade, ClickModel, PositionBased, grades
from runtime_ops.online.credit import CreditRule, common_prefix, credit
from runtime_ops.online.interleaving import team_draft
from runtime_ops.online.statistics import Verdict, mean_difference, preference_from_counts, proportion_difference

SEEDS = int(os.environ.get("BENCH_ONLINE_SEEDS", "20"))
CAP_INTERLEAVED = int(os.environ.get("BENCH_ONLINE_CAP_INTERLEAVED", "50000"))
CAP_AB = int(os.environ.get("BENCH_ONLINE_CAP_AB", "200000"))
CANDIDATE_DIM = int(os.environ.get("BENCH_ONLINE_CANDIDATE", "80"))
PRODUCTION_DIMS = {"0.02": 96, "0.05": 52}  # about 0.02 and 0.05 below the candidate's nDCG@10 (measured, see rows)
K = 10


def checkpoints(cap: int) -> list[int]:
    """20, then steps of 5 % (at least 1), up to and including `cap`."""
    points, n = [], 20
    while n < cap:
        points.append(n)
        n = max(n + 1, round(n * 1.05))
    return [*points, cap]


@dataclass(frozen=True)
class Question:
    relevant: frozenset[str]
    production: tuple[str, ...]
    candidate: tuple[str, ...]
    shared: int  # their common prefix: team draft shows it first whatever the coins


@dataclass(frozen=True)
class Stop:
    queries: int  # queries issued until the interval excluded 0 (the cap when it never did)
    verdict: Verdict  # "no difference yet" when it never did


def race(simulate: Callable[[int], None], verdicts: dict[str, Callable[[], Verdict]], cap: int) -> dict[str, Stop]:
    """Simulate queries up to each checkpoint in turn (`simulate(n)`: the first n queries have been issued) and
    read every method's verdict there. A method's stop is the first checkpoint n whose verdict holds at every
    checkpoint up to 2n: a peek that excludes 0 by chance and falls back is not a decision. All methods read one
    stream of queries, so they differ only in how they judge it."""
    since: dict[str, Stop] = {}  # the verdict each method has held since that checkpoint
    stops: dict[str, Stop] = {}
    for n in checkpoints(cap):
        simulate(n)
        for name, verdict in verdicts.items():
            if name in stops:
                continue
            seen = verdict()
            held = since.get(name)
            if seen == "no difference yet":
                since.pop(name, None)
            elif held is None or held.verdict != seen:
                since[name] = Stop(n, seen)
            elif n >= 2 * held.queries:
                stops[name] = held
        if len(stops) == len(verdicts):
            break
    return {name: stops.get(name, Stop(cap, "no difference yet")) for name in verdicts}


VARIANTS: dict[str, tuple[CreditRule, bool]] = {  # name: (rule, shared prefix credits neither team)
    "examined_prefix+shared": ("examined_prefix", True),
    "team_draft+shared": ("team_draft", True),
    "examined_prefix": ("examined_prefix", False),
    "team_draft": ("team_draft", False),  # the reference: Radlinski et al. 2008 as published
}
OURS = "examined_prefix+shared"


def interleaving_run(questions: Sequence[Question], model: ClickModel, seed: int) -> dict[str, Stop]:
    """Queries needed by interleaving under each credit variant (the same simulated clicks for all)."""
    rng = random.Random(seed)
    counts: dict[str, list[int]] = {name: [0, 0, 0] for name in VARIANTS}  # wins, ties, losses
    index = {"win": 0, "tie": 1, "loss": 2}
    issued = 0

    def simulate(upto: int) -> None:
        nonlocal issued
        while issued < upto:
            issued += 1
            q = questions[rng.randrange(len(questions))]
            shown = team_draft(q.production, q.candidate, K, rng)
            clicked = model.clicks(grades([d.item for d in shown], q.relevant), rng)
            teams = [d.team for d in shown]
            for name, (rule, shared) in VARIANTS.items():
                result = credit(teams, clicked, rule, shared=q.shared if shared else 0)
                if result is not None:
                    counts[name][index[result.outcome]] += 1

    def judge(name: str) -> Callable[[], Verdict]:
        return lambda: preference_from_counts(*counts[name]).verdict

    return race(simulate, {name: judge(name) for name in VARIANTS}, CAP_INTERLEAVED)


def ab_run(questions: Sequence[Question], model: ClickModel, seed: int) -> dict[str, Stop]:
    """Queries needed by a 50/50 A/B split, on click-through and on click MRR."""
    rng = random.Random(seed)
    production = [grades(q.production, q.relevant) for q in questions]
    candidate = [grades(q.candidate, q.relevant) for q in questions]
    clicked = {"production": [0, 0], "candidate": [0, 0]}  # queries with a click, queries
    reciprocal: dict[str, list[float]] = {"production": [], "candidate": []}
    issued = 0

    def simulate(upto: int) -> None:
        nonlocal issued
        while issued < upto:
            issued += 1
            q = rng.randrange(len(questions))
            arm = "candidate" if rng.random() < 0.5 else "production"
            clicks = model.clicks((candidate if arm == "candidate" else production)[q], rng)
            clicked[arm][0] += bool(clicks)
            clicked[arm][1] += 1
            reciprocal[arm].append(1.0 / clicks[0] if clicks else 0.0)

    def ctr() -> Verdict:
        return proportion_difference(*clicked["candidate"], *clicked["production"]).verdict

    def mrr() -> Verdict:
        return mean_difference(reciprocal["candidate"], reciprocal["production"]).verdict

    return race(simulate, {"ctr": ctr, "mrr": mrr}, CAP_AB)


def _models_and_rankings() -> tuple[list[Any], dict[int, list[list[str]]], dict[int, dict[str, float]], float]:
    from runtime_ops.demo import CORPUS_DIR, corpus_keys
    from runtime_ops.documents.chunking import chunk_text
    from runtime_ops.documents.parsing import parse_document
    from runtime_ops.embedders.lsa import EmbedderParams, train_embedder
    from runtime_ops.models.golden import evaluable, load_golden_set
    from runtime_ops.models.metrics import rank_documents, retrieval_metrics

    started = time.monotonic()
    texts: list[str] = []
    keys: list[str] = []
    for key in corpus_keys():
        text = parse_document(key, (CORPUS_DIR / key).read_bytes(), max_bytes=10 * 1024 * 1024).text
        for chunk in chunk_text(text):
            texts.append(chunk)
            keys.append(key)
    golden = evaluable(load_golden_set(CORPUS_DIR.parent / "golden.jsonl"), set(keys))
    rankings: dict[int, list[list[str]]] = {}
    offline: dict[int, dict[str, float]] = {}
    for dim in sorted({CANDIDATE_DIM, *PRODUCTION_DIMS.values()}):
        embedder = train_embedder(texts, EmbedderParams(dim=dim))
        ranked = rank_documents(embedder.embed([q.question for q in golden]), embedder.embed(texts), keys, K)
        rankings[dim] = ranked
        offline[dim] = retrieval_metrics(ranked, [q.relevant for q in golden], (K,))
    return golden, rankings, offline, time.monotonic() - started


def _median(stops: Sequence[Stop]) -> float:
    return float(statistics.median(s.queries for s in stops))


def _summary(stops: Sequence[Stop], cap: int) -> dict[str, Any]:
    return {
        "median": _median(stops),
        "undecided_at_cap": sum(s.verdict == "no difference yet" for s in stops),
        "wrong_side": sum(s.verdict == "worse" for s in stops),
        "cap": cap,
    }


@benchmark(
    "sensitivity", "queries until the interval excludes 0: team-draft interleaving vs a 50/50 A/B, two lsa pairs"
)
def run() -> list[BenchResult]:
    golden, rankings, offline, setup_seconds = _models_and_rankings()
    models: list[ClickModel] = [PositionBased(), Cascade()]
    results: list[BenchResult] = []
    for label, production_dim in PRODUCTION_DIMS.items():
        questions = [
            Question(frozenset(q.relevant), tuple(prod), tuple(cand), common_prefix(prod, cand))
            for q, prod, cand in zip(golden, rankings[production_dim], rankings[CANDIDATE_DIM], strict=True)
        ]
        delta = offline[CANDIDATE_DIM][f"ndcg@{K}"] - offline[production_dim][f"ndcg@{K}"]
        for model in models:
            started = time.monotonic()
            inter = [interleaving_run(questions, model, seed) for seed in range(SEEDS)]
            ab = [ab_run(questions, model, 10_000 + seed) for seed in range(SEEDS)]
            ours = [s[OURS] for s in inter]
            by_metric = {metric: [s[metric] for s in ab] for metric in ("ctr", "mrr")}
            best_metric = min(by_metric, key=lambda metric: _median(by_metric[metric]))
            results.append(
                BenchResult(
                    f"sensitivity.ndcg_{label}.{model.name}",
                    _median(ours),
                    _median(by_metric[best_metric]),
                    "queries",
                    Target("ratio", "<=", 0.1),
                    {
                        "offline_ndcg@10": {
                            "candidate": round(offline[CANDIDATE_DIM][f"ndcg@{K}"], 4),
                            "production": round(offline[production_dim][f"ndcg@{K}"], 4),
                            "difference": round(delta, 4),
                            "candidate_dim": CANDIDATE_DIM,
                            "production_dim": production_dim,
                            "questions": len(questions),
                        },
                        "seeds": SEEDS,
                        "interleaving": {
                            name: _summary([s[name] for s in inter], CAP_INTERLEAVED) for name in VARIANTS
                        },
                        "ab_click_through": _summary(by_metric["ctr"], CAP_AB),
                        "ab_click_mrr": _summary(by_metric["mrr"], CAP_AB),
                        "ab_baseline_metric": best_metric,
                        "seconds": round(time.monotonic() - started, 1),
                        "setup_seconds": round(setup_seconds, 1),
                    },
                )
            )
    return results
