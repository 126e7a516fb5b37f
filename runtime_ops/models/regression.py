"""Regression evaluation: the production model re-scored on today's corpus against the scores it was promoted
with. Runs when a model is promoted (declarative automation) and on a schedule."""

import dagster as dg

from runtime_ops.models.assets import golden_inputs, production_model
from runtime_ops.models.registry import load_embedder
from runtime_ops.observability.steps import RUN_LOGGER_CONFIG, observed
from runtime_ops.resources.state import GatePolicyResource, StateStoreResource
from runtime_ops.retries import IO_RETRY


def _promoted_with(store, version: int) -> dict[str, float] | None:  # type: ignore[no-untyped-def]
    """The candidate metrics of the evaluation report behind the approval that promoted `version`."""
    for change in reversed(store.alias_history("production")):
        if change["new_target"] == version and change["approval_id"]:
            request = store.get_request(change["approval_id"])
            report = store.get_eval_report(request["eval_report_id"]) if request else None
            return report["candidate_metrics"] if report else None
    return None


@dg.asset(
    deps=[production_model],
    group_name="models",
    kinds={"python"},
    retry_policy=IO_RETRY,
    automation_condition=dg.AutomationCondition.eager(),
    description="The production model re-evaluated on the golden set and the current corpus; compared with the "
    "metrics it was promoted with (check no_regression). Runs after every promotion and on regression_schedule.",
)
@observed
def production_evaluation(
    context: dg.AssetExecutionContext, state: StateStoreResource, gate: GatePolicyResource
) -> dg.MaterializeResult:
    from runtime_ops.models.evaluation import evaluate_embedder

    store = state.store()
    version = store.alias("production")
    if version is None:
        raise dg.Failure("no production model to evaluate", allow_retries=False)
    keys, texts, questions = golden_inputs(store, gate.golden_set)
    metrics = evaluate_embedder(load_embedder(store, version), texts, keys, questions)
    baseline = _promoted_with(store, version) or {}
    metadata: dict[str, object] = {name: dg.MetadataValue.float(float(v)) for name, v in metrics.items()}
    metadata["model_version"] = dg.MetadataValue.int(version)
    metadata["corpus_revision"] = dg.MetadataValue.int(store.corpus_revision())
    primary = gate.primary_metric
    if primary in baseline and primary in metrics:
        metadata[f"promoted_with/{primary}"] = dg.MetadataValue.float(float(baseline[primary]))
        metadata[f"drift/{primary}"] = dg.MetadataValue.float(float(metrics[primary]) - float(baseline[primary]))
    return dg.MaterializeResult(metadata=metadata)


@dg.asset_check(
    asset=production_evaluation,
    description="Warns when the production model scores worse than it did at promotion by more than "
    "RUNTIME_OPS_MAX_REGRESSION on the primary metric (the corpus drifted away from it: consider retraining).",
)
@observed
def no_regression(context: dg.AssetCheckExecutionContext, gate: GatePolicyResource) -> dg.AssetCheckResult:
    event = context.instance.get_latest_materialization_event(production_evaluation.key)
    meta = event.asset_materialization.metadata if event and event.asset_materialization else {}
    drift = meta.get(f"drift/{gate.primary_metric}")
    if drift is None:
        return dg.AssetCheckResult(passed=True, description="no promotion-time baseline to compare with")
    value = float(drift.value)
    return dg.AssetCheckResult(
        passed=value >= -gate.max_regression,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{gate.primary_metric} moved {value:+.4f} since promotion (allowed -{gate.max_regression:.3f})",
        metadata={"drift": value},
    )


regression_job = dg.define_asset_job(
    "regression_job",
    selection=dg.AssetSelection.assets(production_evaluation),
    tags={"dagster/max_runtime": "1800"},
    config=RUN_LOGGER_CONFIG,
    description="Re-evaluate the production model on the current corpus.",
)
