"""Filling in a pipeline's attributes: the defs.yaml value, else the process-wide default, else the built-in one."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

from runtime_ops.durations import parse_duration
from runtime_ops.errors import UserError
from runtime_ops.pipeline.approval_attributes import ApprovalAttributes
from runtime_ops.pipeline.attributes import PipelineAttributes, RetrainAttributes
from runtime_ops.pipeline.embedder_attributes import SentenceTransformerAttributes
from runtime_ops.pipeline.spec import (
    AnswersSpec,
    ApprovalSpec,
    BackfillSpec,
    ChunkingSpec,
    EmbedderSpec,
    EvaluationSpec,
    LandingSpec,
    OpenAIEmbedderSpec,
    PipelineSpec,
    RetentionSpec,
    RetrainSpec,
    SentenceTransformerSpec,
    TimeoutSpec,
    VectorStoreSpec,
)
from runtime_ops.policies.approvals import RequestPolicy, Tier
from runtime_ops.settings import Settings

T = TypeVar("T")

# The settings the pipelines being loaded resolve their defaults from (build_definitions may be given its own
# Settings; the component reads them here while Dagster's component tree builds it).
LOADING_SETTINGS: ContextVar[Settings | None] = ContextVar("runtime_ops_loading_settings", default=None)


def _timeouts(attrs: PipelineAttributes, settings: Settings) -> TimeoutSpec:
    t = attrs.timeouts

    def declared(value: str | None, default: timedelta | None) -> float | None:
        return _seconds(parse_duration(value) if value is not None else default)

    return TimeoutSpec(
        parse_document_s=declared(t.parse_document, settings.parse_timeout),
        step_s=declared(t.step, settings.step_timeout),
        steps={job: _seconds(parse_duration(value)) for job, value in t.jobs.items()},
    )


def _seconds(value: timedelta | None) -> float | None:
    return value.total_seconds() if value is not None else None


def _first(value: T | None, default: T) -> T:
    return default if value is None else value


def _relative(base: Path, value: str | None) -> Path | None:
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def _tier_after(value: str) -> timedelta:
    after = parse_duration(value)
    assert after is not None, "validated by EscalationTierAttributes"
    return after


def landing_uri(value: str | None, settings: Settings) -> str:
    """The landing a pipeline reads: its own landing.uri, else RUNTIME_OPS_LANDING, else RUNTIME_OPS_HOME/landing."""
    uri = value or settings.landing
    if uri and not uri.startswith("s3://") and not Path(uri).expanduser().is_absolute():
        return str(settings.resolved_home / uri)
    return str(Path(uri).expanduser()) if uri and not uri.startswith("s3://") else (uri or settings.resolved_landing)


def embedder_spec(attrs: PipelineAttributes, base_dir: Path) -> EmbedderSpec:
    """The embedder a pipeline declares (a model folder relative to its defs.yaml resolved)."""
    e = attrs.embedder
    openai = None
    if e.openai is not None:
        o = e.openai
        openai = OpenAIEmbedderSpec(
            endpoint=o.endpoint,
            model=o.model_name,
            dimensions=o.dimensions,
            api_key_env=o.api_key.env if o.api_key else None,
            batch_size=o.batch_size,
            max_batch_chars=o.max_batch_chars,
            concurrency=o.concurrency,
            timeout_s=o.timeout_s,
            send_dimensions=o.send_dimensions,
            max_input_tokens=o.max_input_tokens,
        )
    sentence = None
    if e.kind == "sentence_transformers" or e.sentence_transformers is not None:
        st = e.sentence_transformers or SentenceTransformerAttributes()
        # A path-like model is a directory next to the defs.yaml; a bare name is an installed model package.
        name = st.model_name
        model = str(_relative(base_dir, name)) if ("/" in name or name.startswith(".")) else name
        sentence = SentenceTransformerSpec(model=model, batch_size=st.batch_size)
    return EmbedderSpec(
        kind=e.kind,
        dim=e.dim,
        max_features=e.max_features,
        seed=e.seed,
        train_sample=e.train_sample,
        openai=openai,
        sentence_transformers=sentence,
    )


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


def _vector_store(attrs: PipelineAttributes, settings: Settings) -> VectorStoreSpec:
    vs = attrs.vector_store
    if vs.url_env or vs.url:
        return VectorStoreSpec(url=vs.url or "", url_env=vs.url_env)
    if settings.vector_store:  # may carry a password: read from the variable when a run needs it
        return VectorStoreSpec(url_env="RUNTIME_OPS_VECTOR_STORE")
    return VectorStoreSpec(url=f"lance://{settings.resolved_home / 'vectors'}")


class OpenApprovals(UserError, ValueError):
    """A pipeline would let anyone approve its promotions where others can reach the decision."""


class DeclarationError(UserError, ValueError):
    """A declaration whose fields are each valid but that cannot work, with these settings: `field` is the attribute
    path the problem is about; loading names the file and the line (`located`)."""

    def __init__(self, field: Sequence[str], problem: str, source: str = "") -> None:
        self.field, self.problem = tuple(field), problem
        super().__init__(self.located(source))

    def located(self, source: str, line: int | None = None) -> str:
        where = f"{source}:{line}: " if source and line else f"{source}: " if source else ""
        return f"{where}attributes.{'.'.join(self.field)}: {self.problem}"


def approval_policy(a: ApprovalSpec) -> RequestPolicy:
    """The policy a pipeline's new requests open with; the same one its load checks (`check_policy`)."""
    return RequestPolicy(
        approvers=a.approvers,
        escalation_approvers=() if a.tiers else a.escalation_approvers,
        required_approvals=a.required_approvals,
        escalate_after=None if a.tiers else a.escalate_after,
        expire_after=a.expire_after,
        tiers=tuple(Tier(approvers, after) for approvers, after in a.tiers),
    )


def _from(given: object, field: str, variable: str, section: tuple[str, ...]) -> str:
    """Where a policy value comes from: the defs.yaml field when it is given, else the variable it fell back to."""
    return ".".join((*section, field)) if given is not None else variable


def check_policy(
    a: ApprovalAttributes, approvals: ApprovalSpec, *, source: str = "", section: tuple[str, ...] = ("approvals",)
) -> None:
    """Refuse at load a policy no request could ever meet, rather than when the first request opens: more approvals
    required than there are people who can ever decide (the approvers and every escalation tier, which joins before
    the request expires), or escalation deadlines out of order. Each value is named where it comes from: the
    defs.yaml field (under `section`: a pipeline's `approvals:`, a gate's top level), or the process-wide variable
    it fell back to."""
    tiers = ("escalation", a.escalation) if a.escalation else ("escalation_approvers", a.escalation_approvers)
    try:
        policy = approval_policy(replace(approvals, required_approvals=1))
    except ValueError as exc:  # deadlines out of order
        escalation = "escalation" if a.escalation else "escalate_after"
        field = escalation if a.escalation or a.expire_after is None else "expire_after"
        sources = (
            _from(a.escalation or a.escalate_after, escalation, "RUNTIME_OPS_ESCALATE_AFTER", section),
            _from(a.expire_after, "expire_after", "RUNTIME_OPS_EXPIRE_AFTER", section),
        )
        raise DeclarationError(
            (*section, field),
            f"{exc} ({' / '.join(sources)}); a request could never open: set the deadlines in order "
            f"({'.'.join((*section, 'escalate_after'))}: off for no escalation)",
            source,
        ) from None
    deciders, required = policy.deciders, approvals.required_approvals
    if not deciders or required <= len(deciders):  # no approvers at all: anyone may decide (embedded mode)
        return
    first, later = sorted(policy.approvers), sorted(deciders - set(policy.approvers))
    who = [f"{', '.join(first)} ({_from(a.approvers, 'approvers', 'RUNTIME_OPS_APPROVERS', section)})"] if first else []
    if later:
        who.append(f"{', '.join(later)} ({_from(tiers[1], tiers[0], 'RUNTIME_OPS_ESCALATION_APPROVERS', section)})")
    wanted = _from(a.required_approvals, "required_approvals", "RUNTIME_OPS_REQUIRED_APPROVALS", section)
    field = "required_approvals" if a.required_approvals is not None or a.approvers is None else "approvers"
    raise DeclarationError(
        (*section, field),
        f"{required} approvals required ({wanted}) but only {len(deciders)} approver{'s' if len(deciders) > 1 else ''} "
        f"can ever decide: {' and '.join(who)}; name more approvers or require fewer approvals",
        source,
    )


def _loopback(url: str) -> bool:
    """Only this machine reaches `url` (localhost, 127.0.0.0/8, ::1)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_approvers(
    a: ApprovalAttributes, settings: Settings, *, owner: str, source: str = "", field: str = "approvals.approvers"
) -> None:
    """Refuse a pipeline with no approvers once Slack or a public URL is configured: every member of the
    workspace (guests too), or anyone holding a link's page, could approve a production promotion. Local use
    (no Slack, a loopback URL such as the default, or `runtime-ops dev`'s port) keeps the open default: the CLI's
    operator decides."""
    if a.approvers or settings.approvers:
        return
    exposed = []
    if settings.slack_bot_token or settings.slack_signing_secret:
        exposed.append("Slack (SLACK_BOT_TOKEN / SLACK_SIGNING_SECRET)")
    if "public_url" in settings.model_fields_set and not _loopback(settings.public_url):
        exposed.append(f"a public URL (RUNTIME_OPS_PUBLIC_URL={settings.public_url})")
    if exposed:
        where = f"{source}: " if source else ""
        raise OpenApprovals(
            f"{where}{owner} names no approvers while {' and '.join(exposed)} is configured: anyone "
            f"reaching it could approve what it gates. Set {field} in its defs.yaml (or "
            "RUNTIME_OPS_APPROVERS) to the ids allowed to decide."
        )


def approval_spec(
    approvals: ApprovalAttributes,
    settings: Settings,
    *,
    owner: str,
    source: str = "",
    section: tuple[str, ...] = ("approvals",),
) -> ApprovalSpec:
    """Who decides, how many, by when: the declared values, else the process-wide ones; refused at load when no
    request could ever be decided, or nobody is named while Slack or a public URL is configured. `owner` names the
    pipeline or gate in that refusal; `section` is where its approval fields sit in defs.yaml."""
    escalate = (
        parse_duration(approvals.escalate_after) if approvals.escalate_after is not None else settings.escalate_after
    )
    expire = parse_duration(approvals.expire_after) if approvals.expire_after is not None else settings.expire_after
    check_approvers(approvals, settings, owner=owner, source=source, field=".".join((*section, "approvers")))
    approval = ApprovalSpec(
        approvers=tuple(_first(approvals.approvers, list(settings.approvers))),
        escalation_approvers=tuple(_first(approvals.escalation_approvers, list(settings.escalation_approvers))),
        required_approvals=_first(approvals.required_approvals, settings.required_approvals),
        escalate_after=escalate,
        expire_after=expire,
        slack_channel=_first(approvals.slack_channel, settings.slack_approval_channel),
        tiers=tuple((tuple(t.approvers), _tier_after(t.after)) for t in approvals.escalation or ()),
    )
    check_policy(approvals, approval, source=source, section=section)
    return approval


def resolve_spec(attrs: PipelineAttributes, settings: Settings, *, base_dir: Path, source: str = "") -> PipelineSpec:
    landing = attrs.landing
    answers = attrs.answers
    approval = approval_spec(attrs.approvals, settings, owner=f"pipeline {attrs.name!r}", source=source)
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
            reconcile_every_s=_seconds(
                parse_duration(landing.reconcile_every) if landing.reconcile_every else settings.reconcile_every
            ),
        ),
        embedder=embedder_spec(attrs, base_dir),
        chunking=ChunkingSpec(max_tokens=attrs.chunking.max_tokens, overlap_tokens=attrs.chunking.overlap_tokens),
        golden_set=_relative(base_dir, attrs.evaluation.golden_set) or settings.resolved_golden_set,
        gate=attrs.gate.policy(settings),
        evaluation=EvaluationSpec(
            min_questions=attrs.evaluation.min_questions,
            holdout_fraction=attrs.evaluation.holdout_fraction,
            seed=attrs.evaluation.seed,
            endpoint_questions=attrs.evaluation.endpoint_questions,
            min_production_queries=attrs.evaluation.min_production_queries,
        ),
        approvals=approval,
        answers=AnswersSpec(
            questions_file=_relative(base_dir, answers.questions_file),
            endpoint=_first(answers.endpoint, settings.model_endpoint),
            model=_first(answers.model_name, settings.model_name),
            api_key_env=answers.api_key.env if answers.api_key else "RUNTIME_OPS_MODEL_API_KEY",
        ),
        retrain=resolve_retrain(attrs.retrain, attrs.embedder.kind),
        retrain_cron=attrs.schedules.retrain_cron,
        regression_cron=attrs.schedules.regression_cron,
        sensor_interval_s=settings.sensor_seconds(0) or None,
        vector_store=_vector_store(attrs, settings),
        retention=RetentionSpec(keep_previous=attrs.retention.keep_previous, keep_recent=attrs.retention.keep_recent),
        backfill=BackfillSpec(shards=attrs.backfill.shards, pool=attrs.backfill.pool, cores=attrs.backfill.cores),
        timeouts=_timeouts(attrs, settings),
        retry_delay_s=settings.retry_delay.total_seconds(),
        rollout=attrs.rollout.spec(),
        queries=attrs.queries.spec(),
        alert_rules=_relative(base_dir, attrs.alert_rules) or settings.resolved_alert_rules,
    )
