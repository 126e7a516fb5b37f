"""Regression evaluation: the production model re-scored on today's corpus against the scores it was promoted
with. Runs when a model is promoted (declarative automation) and on a schedule."""

from typing import Any

import dagster as dg

from runtime_ops.embedders.registry import load_embedder
from runtime_ops.jobs import AssetJob
from runtime_ops.observability.steps import RUN_LOGGER_CONFIG, observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import IO_RETRY
from runtime_ops.store import StateStore


def _promoted_with(store: StateStore, version: int) -> dict[str, float] | None:
    """The candidate metrics of the evaluation report behind the approval that promoted `version`."""
    for change in reversed(store.registry.alias_history("production")):
        if change["new_target"] == version and change["approval_id"]:
            request = store.requests.get_request(change["approval_id"])
            report = store.evaluations.get_eval_report(request["eval_report_id"]) if request else None
            return report["candidate_metrics"] if report else None
    return None


def evaluate_production(store: StateStore, spec: PipelineSpec) -> dg.MaterializeResult:
    from runtime_ops.models.golden import current_question_set
    from runtime_ops.models.scoring import score_stored

    version = store.registry.alias("production")
    if version is None:
        raise dg.Failure("no production model to evaluate", allow_retries=False)
    qs = current_question_set(store, spec)
    try:
        scored = score_stored(store, version, load_embedder(store, version, spec.embedder), qs.gating)
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


def build_regression(
    spec: PipelineSpec, production_model: dg.AssetsDefinition
) -> tuple[dg.AssetsDefinition, dg.AssetChecksDefinition, AssetJob]:
    gate = spec.gate

    @dg.asset(
        key=spec.asset_path("production_evaluation"),
        deps=[production_model],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        retry_policy=IO_RETRY,
        automation_condition=dg.AutomationCondition.eager(),
        description="The production model re-evaluated on the golden set and the current corpus; compared with "
        "the metrics it was promoted with (check no_regression). Runs after every promotion and on "
        "regression_schedule.",
    )
    @observed
    def production_evaluation(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return evaluate_production(state.store().scoped(spec.name), spec)

    @dg.asset_check(
        asset=production_evaluation,
        name="no_regression",
        description=f"Warns when the production model scores worse than it did at promotion by more than "
        f"{gate.max_regression} on {gate.primary_metric} (the corpus drifted away from it: consider retraining).",
    )
    @observed
    def no_regression(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        event = context.instance.get_latest_materialization_event(production_evaluation.key)
        meta = event.asset_materialization.metadata if event and event.asset_materialization else {}
        drift = meta.get(f"drift/{gate.primary_metric}")
        if drift is None:
            return dg.AssetCheckResult(passed=True, description="no promotion-time baseline to compare with")
        value = float(drift.value)  # type: ignore[arg-type]
        return dg.AssetCheckResult(
            passed=value >= -gate.max_regression,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"{gate.primary_metric} moved {value:+.4f} since promotion "
            f"(allowed -{gate.max_regression:.3f})",
            metadata={"drift": value},
        )

    regression_job = dg.define_asset_job(
        spec.qualified("regression_job"),
        selection=dg.AssetSelection.assets(production_evaluation),
        tags={**spec.tags, "dagster/max_runtime": "1800"},
        config=RUN_LOGGER_CONFIG,
        description="Re-evaluate the production model on the current corpus.",
    )
    return production_evaluation, no_regression, regression_job
