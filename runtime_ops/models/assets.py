"""A pipeline's model assets and the gate on them: the candidate, the evaluation question set, the candidate's
evaluation against production, the blocking `meets_policy` and `human_approval` checks on that evaluation, the
`production` alias, and the production model's regression evaluation (its `no_regression` check and job). What each
step does lives in a file named for its work (`training.py`, `evaluation.py`, `promotion.py`, `regression.py`).
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from runtime_ops import clock
from runtime_ops.approvals.gate import SYSTEM, decide_command
from runtime_ops.approvals.lifecycle_gate import lifecycle_text
from runtime_ops.approvals.requests import evaluate_gate, request_policy
from runtime_ops.jobs import AssetJob
from runtime_ops.labels import version_label
from runtime_ops.markdown import escape_text
from runtime_ops.models.evaluation import evaluate_candidate, quality_metadata, question_set
from runtime_ops.models.history import set_label
from runtime_ops.models.promotion import PromotionConfig, promote
from runtime_ops.models.regression import evaluate_production
from runtime_ops.models.training import TrainConfig, train_candidate
from runtime_ops.observability.steps import RUN_LOGGER_CONFIG, observed
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.policies.gate_text import CHANGED_HEADING, changed_lines
from runtime_ops.resources.locks import LocksResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.retries import io_retry
from runtime_ops.serving.rollout_start import start_rollout
from runtime_ops.serving.vector_store import pipeline_vectors
from runtime_ops.store import StateStore
from runtime_ops.store.operations.alerts import Alerts, alert_requester
from runtime_ops.store.operations.retraining import Retraining
from runtime_ops.tags import ALERT_TAG, RETRAIN_KEY_TAG, RETRAIN_TRIGGER_TAG


def build_model_assets(spec: PipelineSpec, document_chunks: dg.AssetsDefinition) -> list[dg.AssetsDefinition]:
    @dg.asset(
        key=spec.asset_path("embedding_model"),
        deps=[document_chunks],
        group_name=spec.name,
        kinds={"scikitlearn" if spec.embedder.kind == "lsa" else "python"},
        tags={"domain": "models"},
        retry_policy=io_retry(spec.retry_delay_s),
        description=f"A candidate {spec.embedder.kind} embedding model: lsa is fitted on a bounded sample of the "
        "corpus, a pretrained model (openai endpoint, sentence-transformers) is registered by its identity; "
        "versioned by digest, so the same model twice is the same version.",
    )
    @observed
    def embedding_model(
        context: dg.AssetExecutionContext, config: TrainConfig, state: StateStoreResource
    ) -> dg.MaterializeResult:
        return train_candidate(context, config, state.store().scoped(spec.name), spec)

    @dg.asset(
        key=spec.asset_path("golden_questions"),
        deps=[document_chunks],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        retry_policy=io_retry(spec.retry_delay_s),
        description="The evaluation question set: the reviewed golden set's questions that apply to the corpus, "
        "topped up with questions generated from the corpus (offline, deterministic) up to evaluation.min_questions; "
        "each records its provenance; versioned by digest, so every report names the set it scored. Beside it, under "
        "queries: {log: text}, the production queries: logged queries with a click or helpful, reported, never gating.",
    )
    @observed
    def golden_questions(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return question_set(context, state.store().scoped(spec.name), spec)

    @dg.asset(
        key=spec.asset_path("evaluation_report"),
        deps=[embedding_model, golden_questions],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        retry_policy=io_retry(spec.retry_delay_s),
        description="The candidate against the production model on the same held-out questions: recall@k, MRR, "
        "nDCG@k as numeric metadata (plotted over versions in the UI), the paired bootstrap interval of the "
        "difference, the questions whose results changed most, and the verdict.",
    )
    @observed
    def evaluation_report(context: dg.AssetExecutionContext, state: StateStoreResource) -> dg.MaterializeResult:
        return evaluate_candidate(context, state.store().scoped(spec.name), spec)

    @observed
    def promotion_step(
        context: dg.AssetExecutionContext, config: PromotionConfig, state: StateStoreResource, locks: LocksResource
    ) -> dg.MaterializeResult | None:
        return promote(context, config, state.store().scoped(spec.name), locks.locker(), spec)

    @dg.asset(
        key=spec.asset_path("production_model"),
        deps=[evaluation_report],
        group_name=spec.name,
        kinds={"python"},
        tags={"domain": "models"},
        # Serialized with every other run that can move the pipeline's aliases (retrieval_index, rollback, ...).
        pool=spec.lifecycle_pool,
        # Not materialized while the candidate waits for a person (the run's human_approval check is pending):
        # the run succeeds, production and the assets after it stay as they are until the promotion run.
        output_required=False,
        description="The `production` alias. Promotion re-verifies the decision for the exact candidate digest "
        "itself (so a run that selects this asset without the human_approval check still refuses), then runs as "
        "a saga under the promotion lock: fenced alias move, index swap, announcement; compensated on failure. "
        "While the candidate waits for a person, a run that asked the gate leaves production as it is.",
    )
    def production_model(
        context: dg.AssetExecutionContext, config: PromotionConfig, state: StateStoreResource, locks: LocksResource
    ) -> Iterator[dg.MaterializeResult]:
        result = promotion_step(context, config, state, locks)
        if result is not None:
            yield result

    return [embedding_model, golden_questions, evaluation_report, production_model]


def _requester(context: dg.AssetCheckExecutionContext, retraining: Retraining, alerts: Alerts) -> str:
    """Who asked for this candidate, from an authenticated record only: the operator of the retrain request
    (their key's approver id) or the alert rule that consumed into this run; otherwise the system (a policy
    trigger or a run launched in the Dagster UI, which has no users to authenticate). Run tags are not evidence:
    whoever launches a run writes them."""
    tags = context.run.tags
    trigger, run_key, alert_key = tags.get(RETRAIN_TRIGGER_TAG), tags.get(RETRAIN_KEY_TAG), tags.get(ALERT_TAG)
    if trigger in ("manual", "alert") and run_key:
        request = retraining.request_for_run(run_key)
        if request is not None and request.get("requested_by"):
            return str(request["requested_by"])
    if trigger == "alert" and alert_key:
        alert = alerts.alert_for_run(alert_key)
        if alert is not None:
            return alert_requester(alert)
    return SYSTEM


def build_gate_checks(spec: PipelineSpec, evaluation_report: dg.AssetsDefinition) -> list[dg.AssetChecksDefinition]:
    @dg.asset_check(
        asset=evaluation_report,
        name="meets_policy",
        blocking=True,
        description=f"The candidate does not regress by more than {spec.gate.max_regression} on "
        f"{spec.gate.primary_metric} (gate.max_regression).",
    )
    @observed
    def meets_policy(state: StateStoreResource) -> dg.AssetCheckResult:
        report = state.store().scoped(spec.name).evaluations.latest_eval_report()
        if report is None:
            return dg.AssetCheckResult(passed=False, description="no evaluation report yet")
        verdict = report["verdict"]
        metadata: dict[str, dg.MetadataValue | str | int] = {
            "candidate_version": f"v{report['candidate_version']}",
            "production_version": version_label(report["production_version"]),
            "reason": verdict["reason"],
            # The numbers the verdict compared: both models on one question set (production re-scored on it).
            **quality_metadata(report["candidate_metrics"], "candidate/"),
            **quality_metadata(report["production_metrics"] or {}, "production/"),
        }
        interval = verdict.get("interval")
        if interval:
            metadata.update(
                {
                    "ci_low": dg.MetadataValue.float(float(interval["low"])),
                    "ci_high": dg.MetadataValue.float(float(interval["high"])),
                    "mean_delta": dg.MetadataValue.float(float(interval["mean_delta"])),
                    "confidence": dg.MetadataValue.float(float(interval["confidence"])),
                    "questions": str(int(interval["n"])),
                }
            )
        if verdict.get("changed_questions"):
            metadata["changed_most"] = dg.MetadataValue.md(
                f"{CHANGED_HEADING}:\n\n"
                + "\n".join(f"- {escape_text(line)}" for line in changed_lines(verdict["changed_questions"]))
            )
        if verdict.get("question_set"):
            questions = report["candidate_metrics"].get("questions")
            metadata["question_set"] = set_label(verdict["question_set"], int(questions) if questions else None)
        return dg.AssetCheckResult(
            passed=bool(verdict["meets_policy"]), description=verdict["reason"], metadata=metadata
        )

    @dg.asset_check(
        asset=evaluation_report,
        name="human_approval",
        blocking=True,
        description="Passes when the policy auto-approves the candidate or a person approved this exact candidate "
        "digest; otherwise opens one approval request per digest and reports it pending: a warning (Dagster "
        "labels it Failed with a yellow icon) naming the request, its deadline and how to decide it, which "
        "neither fails the run nor the assets after it. Fails (an error) only for a rejected or expired request.",
    )
    @observed
    def human_approval(context: dg.AssetCheckExecutionContext, state: StateStoreResource) -> dg.AssetCheckResult:
        store = state.store().scoped(spec.name)
        outcome = evaluate_gate(
            store,
            requested_by=_requester(context, store.retraining, store.alerts),
            run_id=context.run.run_id,
            policy=request_policy(spec),
            online=spec.gate.online,
            now=clock.now(),
        )
        metadata: dict[str, dg.MetadataValue | str] = {"status": outcome.status}
        if outcome.request:
            metadata["approval_id"] = outcome.request["id"]
            metadata["candidate_digest"] = outcome.request["candidate_digest"]
            metadata["lifecycle"] = lifecycle_text(store, outcome.request["id"]) or "-"
        if outcome.status == "pending" and outcome.request:
            # Waiting for a person is the gate working, not a failure: a WARN result does not fail the run or
            # block production_model, which sees the pending request itself and leaves production as it is.
            metadata.update(pending_metadata(outcome.request))
            context.log.info(outcome.message)
            if spec.rollout.enabled:
                metadata["rollout"] = _rollout_beside(context, store, spec, outcome.request)
            return dg.AssetCheckResult(
                passed=False,
                severity=dg.AssetCheckSeverity.WARN,
                description=f"Pending: {outcome.message}",
                metadata=metadata,
            )
        if not outcome.passed:
            context.log.warning(outcome.message)
        elif outcome.request and spec.rollout.ramps:
            # A policy approval ramps too: its ramp serves from the candidate's index, filled here as beside a
            # pending request (the approvals sensor starts the ramp once it is ready).
            metadata["rollout"] = _rollout_beside(context, store, spec, outcome.request)
        return dg.AssetCheckResult(passed=outcome.passed, description=outcome.message, metadata=metadata)

    return [meets_policy, human_approval]


def _rollout_beside(
    context: dg.AssetCheckExecutionContext, store: StateStore, spec: PipelineSpec, request: dict[str, Any]
) -> str:
    """Start the rollout beside a pending request (`rollout:` in defs.yaml). A rollout that cannot start is logged
    and leaves the gate's answer as it is: live traffic is extra evidence, never a condition of waiting for a
    person."""
    try:
        return start_rollout(
            store, spec, pipeline_vectors(spec), request, run_id=context.run.run_id, log=context.log.info
        )
    except Exception as exc:
        context.log.warning(f"rollout of candidate v{request['candidate_version']} not started: {exc}")
        return f"rollout: not started: {exc}"


def pending_metadata(request: dict[str, Any]) -> dict[str, dg.MetadataValue | str]:
    """What a person looking at a pending human_approval check needs: which request, by when, and how to decide."""
    out: dict[str, dg.MetadataValue | str] = {
        # Approvers also got signed links (Slack, or the log without Slack): those decide in one click.
        "decide": decide_command(request["id"]),
    }
    if request.get("expire_at") is not None:
        out["expires_at"] = dg.MetadataValue.timestamp(request["expire_at"])
    return out


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
        retry_policy=io_retry(spec.retry_delay_s),
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
