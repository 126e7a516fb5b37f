"""The evaluation steps of a pipeline's `golden_questions` and `evaluation_report` assets: the question set, and the
candidate scored against production on it, judged by the gate's rule (`policies/gate_rule.py`) and recorded as the
evaluation report (metrics: `models/metrics.py`; the comparison table: `models/report_markdown.py`). The production
queries (`models/production_queries.py`) are scored in the same pass and reported beside it, never gating."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import dagster as dg

from runtime_ops.embedders.registry import load_embedder
from runtime_ops.labels import version_label
from runtime_ops.markdown import escape_text, table_row
from runtime_ops.models.history import EvaluatedVersion, history_markdown, set_label
from runtime_ops.models.production_queries import METHOD as PRODUCTION_METHOD
from runtime_ops.models.production_queries import SET_NAME
from runtime_ops.models.question_set import (
    ALIAS,
    build_production_queries,
    build_question_set,
    current_production_queries,
    current_question_set,
    save_production_queries,
    save_question_set,
)
from runtime_ops.models.report_markdown import comparison_markdown
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.policies.changed_questions import changed_questions
from runtime_ops.policies.gate_text import CHANGED_HEADING, changed_lines, interval_text
from runtime_ops.store import StateStore
from runtime_ops.store.registry.evaluations import Evaluations
from runtime_ops.tags import CANDIDATE_ALIAS, PRODUCTION_ALIAS


def question_set(context: dg.AssetExecutionContext, store: StateStore, spec: PipelineSpec) -> dg.MaterializeResult:
    previous = store.registry.alias(ALIAS)
    started = time.monotonic()
    try:
        qs = build_question_set(store, spec, context.run_id)
    except ValueError as exc:  # a malformed reviewed set: the message names the file, line and problem
        raise dg.Failure(str(exc), allow_retries=False) from None
    if len(qs.gating) < 2:
        raise dg.Failure(
            f"pipeline {spec.name} has {len(qs.gating)} evaluation question(s): the corpus is too small to generate "
            "questions from (land more documents) and no reviewed golden set applies to it (evaluation.golden_set)",
            allow_retries=False,
        )
    qs = save_question_set(store.registry, store.artifacts, qs, context.run_id)
    production, production_note = build_production_queries(store, spec)
    production = save_production_queries(store, production, context.run_id)
    for note in [*qs.notes, production_note]:
        context.log.info(note)
    mix = qs.mix
    return dg.MaterializeResult(
        metadata={
            "version": qs.version,
            "changed": qs.artifact_id != previous,
            "gating_questions": dg.MetadataValue.int(len(qs.gating)),
            "all_questions": dg.MetadataValue.int(len(qs.questions)),
            **{f"provenance/{method}": dg.MetadataValue.int(n) for method, n in mix.items()},
            "production_queries": set_label(production.version, len(production.questions)) if production else "none",
            "notes": dg.MetadataValue.md("\n".join(f"- {n}" for n in [*qs.notes, production_note])),
            "sample": dg.MetadataValue.md(
                "| id | question | relevant | method |\n|---|---|---|---|\n"
                + "\n".join(
                    table_row(
                        escape_text(str(cell))
                        for cell in (
                            q.question.id,
                            q.question.question[:120],
                            ", ".join(q.question.relevant),
                            q.provenance.get("method"),
                        )
                    )
                    for q in qs.questions[:10]
                )
            ),
            "seconds": dg.MetadataValue.float(round(time.monotonic() - started, 3)),
        },
        data_version=dg.DataVersion(qs.version[:16]),
    )


def evaluate_candidate(
    context: dg.AssetExecutionContext, store: StateStore, spec: PipelineSpec
) -> dg.MaterializeResult:
    # numpy: kept out of the code location's load
    from runtime_ops.models.scoring import KS, score_candidate, score_stored
    from runtime_ops.policies.digests import candidate_digest, report_digest
    from runtime_ops.policies.gate_rule import judge

    gate = spec.gate
    candidate_version = store.registry.alias(CANDIDATE_ALIAS)
    if candidate_version is None:
        raise dg.Failure("no candidate model: materialize embedding_model first", allow_retries=False)
    production_version = store.registry.alias(PRODUCTION_ALIAS)
    candidate = store.registry.get_model(candidate_version)
    assert candidate is not None
    qs = current_question_set(store, spec, context.run_id)
    questions = qs.gating
    production_qs = current_production_queries(store)
    beside = [q.question for q in production_qs.questions] if production_qs is not None else []
    started = time.monotonic()
    try:
        # One pass over the corpus scores both sets; each is then read apart.
        cand_embedder = load_embedder(store.registry, store.artifacts, candidate_version, spec.embedder)
        cand_all = score_candidate(store, candidate_version, cand_embedder, questions + beside)
        prod_all = None
        if production_version is not None:
            # Production is scored on the same set from the vectors stored for serving: a changed set re-scores it.
            prod_all = score_stored(
                store,
                production_version,
                load_embedder(store.registry, store.artifacts, production_version, spec.embedder),
                questions + beside,
            )
        cand = cand_all.subset(questions)
        if cand is None:
            raise ValueError(f"none of the {len(questions)} gating questions has a relevant document in the corpus")
        prod = prod_all.subset(questions) if prod_all is not None else None
    except ValueError as exc:
        raise dg.Failure(
            f"{exc}: the question set {qs.version[:12]} no longer fits the corpus; rematerialize golden_questions",
            allow_retries=False,
        ) from None
    eval_s = time.monotonic() - started
    cand_beside = cand_all.subset(beside)
    prod_beside = prod_all.subset(beside) if prod_all is not None else None
    production_queries: dict[str, Any] | None = None
    if production_qs is not None and cand_beside is not None:
        production_queries = {
            "version": production_qs.version,
            "questions": len(cand_beside.questions),
            "candidate_metrics": cand_beside.means,
            "production_metrics": prod_beside.means if prod_beside is not None else None,
        }
    cand_metrics = cand.means
    prod_metrics = prod.means if prod is not None else None
    # Per-question values of both models on the same questions: judge decides on their paired bootstrap interval.
    verdict = judge(
        cand.per_question,
        prod.per_question if prod is not None else None,
        gate,
        candidate_is_production=production_version == candidate_version,
        seed=spec.evaluation.seed,
    )
    changed: list[dict[str, Any]] = []
    if prod is not None and production_version != candidate_version:
        # The production queries' changes too (people asked them), each question labelled with where it is from.
        sets = [(cand, prod, {q.question.id: str(q.provenance.get("method", "")) for q in qs.questions})]
        if cand_beside is not None and prod_beside is not None:
            sets.append((cand_beside, prod_beside, {q.id: PRODUCTION_METHOD for q in cand_beside.questions}))
        metric = gate.primary_metric  # judge has checked both models have it, per question
        changed = [
            c.to_dict()
            for c in changed_questions(
                [r for c_set, _, _ in sets for r in c_set.ranked],
                [r for _, p_set, _ in sets for r in p_set.ranked],
                [q for c_set, _, _ in sets for q in c_set.questions],
                [v for c_set, _, _ in sets for v in c_set.per_question[metric].tolist()],
                [v for _, p_set, _ in sets for v in p_set.per_question[metric].tolist()],
                depth=max(KS),
                sources=[source[q.id] for c_set, _, source in sets for q in c_set.questions],
            )
        ]
    interval_dict: dict[str, Any] | None = None
    if verdict.interval is not None:
        interval_dict = {**verdict.interval.to_dict(), "metric": gate.primary_metric}
    report = {
        "candidate_version": candidate_version,
        "candidate_model_digest": candidate["digest"],
        "production_version": production_version,
        "candidate_metrics": cand_metrics,
        "production_metrics": prod_metrics,
        "questions": [q.id for q in cand.questions],
        "question_set": qs.version,
        "interval": interval_dict,
        "corpus_revision": store.ledger.corpus_revision(),
    }
    r_digest = report_digest(report)
    c_digest = candidate_digest(candidate["digest"], r_digest)
    markdown = comparison_markdown(
        cand_metrics,
        prod_metrics,
        candidate_label=f"candidate v{candidate_version}",
        production_label=f"production v{production_version}" if production_version else "production (none)",
        beside={SET_NAME: (production_queries["candidate_metrics"], production_queries["production_metrics"])}
        if production_queries
        else None,
    )
    markdown += _evidence_markdown(qs.version, qs.mix, verdict.reason, interval_dict, changed, production_queries)
    verdict_dict = {
        "meets_policy": verdict.meets_policy,
        "auto_approve": verdict.auto_approve,
        "reason": verdict.reason,
        "outcome": str(verdict.outcome),
        "delta": verdict.delta,
        "primary_metric": gate.primary_metric,
        "interval": interval_dict,
        "changed_questions": changed,
        "question_set": qs.version,
        "provenance": qs.mix,
        # Reported, never gating: outside the report digest, so a candidate's approval does not depend on traffic.
        "production_queries": production_queries,
    }
    row = store.evaluations.record_eval_report(
        candidate_version=candidate_version,
        production_version=production_version,
        candidate_metrics=cand_metrics,
        production_metrics=prod_metrics,
        verdict=verdict_dict,
        markdown=markdown,
        report_digest=r_digest,
        candidate_digest=c_digest,
        run_id=context.run_id,
    )
    # The UI plots every numeric metadata value over materializations: only the quality metrics are numbers
    # (rounded); ids, counts and timings are text, so the plots show what moved and nothing else.
    metadata: dict[str, dg.MetadataValue | str] = {**quality_metadata(cand_metrics)}
    if prod_metrics:
        metadata.update(quality_metadata(prod_metrics, "production/"))
    if verdict.delta is not None:
        metadata[f"delta/{gate.primary_metric}"] = dg.MetadataValue.float(round(float(verdict.delta), 4))
    if production_queries is not None:
        metadata.update(quality_metadata(production_queries["candidate_metrics"], "production_queries/"))
        metadata["production_queries"] = set_label(production_queries["version"], production_queries["questions"])
    if interval_dict is not None:
        metadata[f"ci_low/{gate.primary_metric}"] = dg.MetadataValue.float(round(float(interval_dict["low"]), 4))
        metadata[f"ci_high/{gate.primary_metric}"] = dg.MetadataValue.float(round(float(interval_dict["high"]), 4))
    metadata.update(
        {
            # Both models' numbers above were scored on this set (production re-scored on it).
            "question_set": set_label(qs.version, len(cand.questions)),
            "question_set_version": qs.version,
            "questions": str(len(cand.questions)),
            "report_id": str(row["id"]),
            "candidate_version": f"v{candidate_version}",
            "production_version": version_label(production_version),
            "candidate_digest": c_digest,
            **{f"provenance/{m}": str(n) for m, n in qs.mix.items()},
            "verdict": verdict.reason,
            "evaluation_seconds": f"{eval_s:.3f}",
            **usage_metadata(cand_embedder),
            "chunks": str(cand.chunks),
            # Candidate vectors read from a backfill's store (shadow_embeddings) rather than embedded here.
            "candidate_vectors_stored": str(cand.stored),
            "comparison": dg.MetadataValue.md(markdown),
            "history": dg.MetadataValue.md(
                _history(
                    store.evaluations,
                    {
                        **report,
                        "candidate_metrics": cand_metrics,
                        "production_metrics": prod_metrics,
                        "verdict": verdict_dict,
                    },
                )
            ),
        }
    )
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(c_digest[:16]))


def quality_metadata(metrics: dict[str, float], prefix: str = "") -> dict[str, dg.MetadataValue]:
    """The quality metrics of a scored model as rounded numbers (what the UI plots); the question count, which is
    not a quality, stays out."""
    return {
        f"{prefix}{name}": dg.MetadataValue.float(round(float(value), 4))
        for name, value in metrics.items()
        if name != "questions"
    }


def usage_metadata(embedder: object) -> dict[str, dg.MetadataValue]:
    """An endpoint embedder's cumulative usage (requests, retries, texts, tokens) as `usage/<counter>` metadata
    (text: counters, not quality, so the UI does not plot them)."""
    usage = getattr(embedder, "usage", None)
    if not isinstance(usage, dict):
        return {}
    return {f"usage/{name}": dg.MetadataValue.text(str(int(value))) for name, value in sorted(usage.items())}


def _evidence_markdown(
    version: str,
    mix: dict[str, int],
    reason: str,
    interval: dict[str, Any] | None,
    changed: list[dict[str, Any]],
    production_queries: dict[str, Any] | None,
) -> str:
    provenance = ", ".join(f"{n} {method}" for method, n in mix.items())
    lines = ["", f"Question set `{version[:12]}`: {provenance}."]
    if production_queries is not None:
        label = set_label(production_queries["version"], production_queries["questions"])
        lines.append(
            f"{SET_NAME.capitalize()} `{label}`: logged queries with positive feedback, in rows of their "
            "own above; reported, not gating."
        )
    lines.extend(["", f"Verdict: {escape_text(reason)}."])
    if interval:
        lines.append(f"Candidate minus production: {interval_text(interval)}.")
    if changed:
        lines.append("")
        lines.append(f"{CHANGED_HEADING}:")
        lines.extend(f"- {escape_text(line)}" for line in changed_lines(changed))
    return "\n".join(lines) + "\n"


def _history(evaluations: Evaluations, report: dict[str, Any]) -> str:
    """The history tables around `report`: on the gating set, then on the production queries where any report
    scored them. Its candidate and its production model on the report's own set (production re-scored on it, as the
    gate compared them); other versions on the set of their own report."""

    def gating(r: dict[str, Any]) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
        return str(r["verdict"].get("question_set") or ""), r["candidate_metrics"], r.get("production_metrics")

    def beside(r: dict[str, Any]) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
        pq = r["verdict"].get("production_queries") or {}
        return str(pq.get("version") or ""), pq.get("candidate_metrics"), pq.get("production_metrics")

    past = [{**row, "verdict": row["verdict"] or {}} for row in evaluations.eval_history()]
    text = _history_table(past, report, gating)
    if any(beside(r)[1] for r in [*past, report]):
        text += f"\n\nOn the {SET_NAME} (reported, not gating):\n\n" + _history_table(past, report, beside)
    return text


def _history_table(
    past: list[dict[str, Any]],
    report: dict[str, Any],
    scored_on: Callable[[dict[str, Any]], tuple[str, dict[str, Any] | None, dict[str, Any] | None]],
) -> str:
    """`scored_on(report)`: the set a report scored and the candidate's and production's metrics on it."""

    def verdict_text(v: dict) -> str:
        if v.get("auto_approve"):
            return "auto-approve"
        return "needs approval" if v.get("meets_policy") else "below policy"

    def count(metrics: dict[str, Any] | None) -> int | None:
        n = (metrics or {}).get("questions")
        return int(n) if n is not None else None

    candidate_version, production_version = report["candidate_version"], report["production_version"]
    rows: dict[int, EvaluatedVersion] = {}
    for row in past:
        question_set, metrics, _ = scored_on(row)
        if metrics:
            rows[row["candidate_version"]] = EvaluatedVersion(
                version=row["candidate_version"],
                metrics=metrics,
                verdict=verdict_text(row["verdict"]),
                production=row["candidate_version"] == production_version,
                question_set=question_set,
                questions=count(metrics),
            )
    current_set, current_metrics, production_metrics = scored_on(report)
    if current_metrics:
        rows[candidate_version] = EvaluatedVersion(
            candidate_version,
            current_metrics,
            verdict_text(report["verdict"]),
            production=candidate_version == production_version,
            question_set=current_set,
            questions=count(current_metrics),
        )
    if production_version is not None and production_version != candidate_version and production_metrics:
        own = rows.get(production_version)
        rows[production_version] = EvaluatedVersion(
            production_version,
            production_metrics,
            f"production, re-scored on this set{f'; was {own.verdict}' if own else ''}",
            production=True,
            question_set=current_set,
            questions=count(production_metrics),
        )
    return history_markdown(list(rows.values()), highlight=candidate_version)
