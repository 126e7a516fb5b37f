"""Filling in a pipeline's attributes: the defs.yaml value, else the process-wide default, else the built-in one."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

from runtime_ops.pipeline.attributes import PipelineAttributes, RetrainAttributes
from runtime_ops.pipeline.spec import (
    AnswersSpec,
    ApprovalSpec,
    EmbedderSpec,
    GateSpec,
    LandingSpec,
    PipelineSpec,
    RetrainSpec,
)
from runtime_ops.settings import Settings, parse_duration

T = TypeVar("T")

# The settings the pipelines being loaded resolve their defaults from (build_definitions may be given its own
# Settings; the component reads them here while Dagster's component tree builds it).
LOADING_SETTINGS: ContextVar[Settings | None] = ContextVar("runtime_ops_loading_settings", default=None)


def _first(value: T | None, default: T) -> T:
    return default if value is None else value


def _relative(base: Path, value: str | None) -> Path | None:
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def landing_uri(value: str | None, settings: Settings) -> str:
    """The landing a pipeline reads: its own landing.uri, else RUNTIME_OPS_LANDING, else RUNTIME_OPS_HOME/landing."""
    uri = value or settings.landing
    if uri and not uri.startswith("s3://") and not Path(uri).expanduser().is_absolute():
        return str(settings.resolved_home / uri)
    return str(Path(uri).expanduser()) if uri and not uri.startswith("s3://") else (uri or settings.resolved_landing)


# The OOV threshold when `retrain.oov_threshold` is left out, per embedder kind (None: no OOV condition).
DEFAULT_OOV_THRESHOLD: dict[str, float | None] = {"lsa": 0.3}


def resolve_retrain(attrs: RetrainAttributes, embedder_kind: str) -> RetrainSpec:
    """The retrain policy: a field given (null included: off) is kept; a left-out oov_threshold is the
    embedder's default."""
    given = "oov_threshold" in attrs.model_fields_set
    return RetrainSpec(
        growth_fraction=attrs.growth_fraction,
        drift_threshold=attrs.drift_threshold,
        oov_threshold=attrs.oov_threshold if given else DEFAULT_OOV_THRESHOLD.get(embedder_kind),
        on_alert=attrs.on_alert,
        min_signal_chunks=attrs.min_signal_chunks,
    )


def resolve_spec(attrs: PipelineAttributes, settings: Settings, *, base_dir: Path, source: str = "") -> PipelineSpec:
    landing = attrs.landing
    approvals = attrs.approvals
    escalate = (
        parse_duration(approvals.escalate_after) if approvals.escalate_after is not None else settings.escalate_after
    )
    expire = parse_duration(approvals.expire_after) if approvals.expire_after is not None else settings.expire_after
    answers = attrs.answers
    return PipelineSpec(
        name=attrs.name,
        description=attrs.description,
        source=source,
        landing=LandingSpec(
            uri=landing_uri(landing.uri, settings),
            sqs_queue_url=_first(landing.sqs_queue_url, settings.sqs_queue_url),
            batch_max_objects=_first(landing.batch_max_objects, settings.batch_max_objects),
            scan_max_keys=_first(landing.scan_max_keys, settings.scan_max_keys),
            max_document_bytes=_first(landing.max_document_bytes, settings.max_document_bytes),
        ),
        embedder=EmbedderSpec(
            kind=attrs.embedder.kind,
            dim=attrs.embedder.dim,
            max_features=attrs.embedder.max_features,
            seed=attrs.embedder.seed,
        ),
        golden_set=_relative(base_dir, attrs.evaluation.golden_set) or settings.resolved_golden_set,
        gate=GateSpec(
            primary_metric=_first(attrs.gate.primary_metric, settings.primary_metric),
            auto_approve_margin=_first(attrs.gate.auto_approve_margin, settings.auto_approve_margin),
            max_regression=_first(attrs.gate.max_regression, settings.max_regression),
        ),
        approvals=ApprovalSpec(
            approvers=tuple(_first(approvals.approvers, list(settings.approvers))),
            escalation_approvers=tuple(_first(approvals.escalation_approvers, list(settings.escalation_approvers))),
            required_approvals=_first(approvals.required_approvals, settings.required_approvals),
            escalate_after=escalate,
            expire_after=expire,
            slack_channel=_first(approvals.slack_channel, settings.slack_approval_channel),
        ),
        answers=AnswersSpec(
            questions_file=_relative(base_dir, answers.questions_file),
            endpoint=_first(answers.endpoint, settings.model_endpoint),
            model=_first(answers.model_name, settings.model_name),
            api_key_env=answers.api_key.env if answers.api_key else "RUNTIME_OPS_MODEL_API_KEY",
        ),
        retrain=resolve_retrain(attrs.retrain, attrs.embedder.kind),
        retrain_cron=attrs.schedules.retrain_cron,
        regression_cron=attrs.schedules.regression_cron,
        alert_rules=_relative(base_dir, attrs.alert_rules) or settings.resolved_alert_rules,
    )
