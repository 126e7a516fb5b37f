"""Regression evaluation, the step of a pipeline's `production_evaluation` asset: the production model re-scored on
today's corpus against the scores it was promoted with. Runs when a model is promoted (declarative automation) and
on a schedule (the asset, its `no_regression` check and `regression_job`: `models/assets.py`)."""

from typing import Any

import dagster as dg

from runtime_ops.embedders.registry import load_embedder
from runtime_ops.models.question_set import current_question_set
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.store import StateStore
from runtime_ops.tags import PRODUCTION_ALIAS


def _promoted_with(store: StateStore, version: int) -> dict[str, float] | None:
    """The candidate metrics of the evaluation report behind the approval that promoted `version`."""
    for change in reversed(store.registry.alias_history(PRODUCTION_ALIAS)):
        if change["new_target"] == version and change["approval_id"]:
            request = store.requests.get_request(change["approval_id"])
            report = store.evaluations.get_eval_report(request["eval_report_id"]) if request else None
            return report["candidate_metrics"] if report else None
    return None


def evaluate_production(store: StateStore, spec: PipelineSpec) -> dg.MaterializeResult:
    # numpy: kept out of the code location's load
    from runtime_ops.models.scoring import score_stored

    version = store.registry.alias(PRODUCTION_ALIAS)
    if version is None:
        raise dg.Failure("no production model to evaluate", allow_retries=False)
    qs = current_question_set(store, spec)
    try:
        scored = score_stored(
            store, version, load_embedder(store.registry, store.artifacts, version, spec.embedder), qs.gating
        )
    except ValueError as exc:
        raise dg.Failure(f"{exc}; rematerialize golden_questions", allow_retries=False) from None
    metrics = scored.means
    baseline = _promoted_with(store, version) or {}
    metadata: dict[str, Any] = {name: dg.MetadataValue.float(float(v)) for name, v in metrics.items()}
    metadata["model_version"] = dg.MetadataValue.int(version)
    metadata["corpus_revision"] = dg.MetadataValue.int(store.ledger.corpus_revision())
    metadata["question_set"] = qs.version
    primary = spec.gate.primary_metric
    if primary in baseline and primary in metrics:
        metadata[f"promoted_with/{primary}"] = dg.MetadataValue.float(float(baseline[primary]))
        metadata[f"drift/{primary}"] = dg.MetadataValue.float(float(metrics[primary]) - float(baseline[primary]))
    return dg.MaterializeResult(metadata=metadata)
