"""The YAML interface of a `RetrievalPipeline` (`defs/<name>/defs.yaml` attributes), with field descriptions.

A field left out falls back to the process-wide environment default named in its description (so the demo
pipeline keeps honouring RUNTIME_OPS_LANDING, RUNTIME_OPS_APPROVERS, ...), then to the built-in default.
Secrets are never literal here: a secret field takes `{env: VARIABLE_NAME}` and is read at run time. The larger
sections have their own modules: `embedder_attributes.py`, `chunking_attributes.py`, `gate_attributes.py`,
`approval_attributes.py`, `rollout_attributes.py`, `queries_attributes.py`.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

import dagster as dg
from pydantic import Field, field_validator, model_validator

from runtime_ops.durations import parse_duration
from runtime_ops.pipeline.approval_attributes import ApprovalAttributes
from runtime_ops.pipeline.attribute_types import EnvName, EnvRef, Fraction, Positive, http_url, secret_ref
from runtime_ops.pipeline.chunking_attributes import ChunkingAttributes
from runtime_ops.pipeline.embedder_attributes import EmbedderAttributes
from runtime_ops.pipeline.gate_attributes import GateAttributes
from runtime_ops.pipeline.queries_attributes import QueriesAttributes
from runtime_ops.pipeline.rollout_attributes import RolloutAttributes
from runtime_ops.pipeline.spec import JOB_NAMES, check_name


class LandingAttributes(dg.Resolvable, dg.Model):
    uri: str | None = Field(
        default=None,
        description="Where documents land: s3://bucket[/prefix] or a local folder (relative paths are relative to "
        "RUNTIME_OPS_HOME). Default: RUNTIME_OPS_LANDING, else RUNTIME_OPS_HOME/landing.",
    )
    sqs_queue_url: str | None = Field(
        default=None,
        description="SQS queue with the bucket's S3 event notifications (event mode). Default: "
        "RUNTIME_OPS_SQS_QUEUE_URL.",
    )
    batch_max_objects: Annotated[int, Field(gt=0, le=25_000)] | None = Field(
        default=None,
        description="Most objects per landing batch. Default: RUNTIME_OPS_BATCH_MAX_OBJECTS.",
    )
    scan_max_keys: Positive | None = Field(
        default=None, description="Most keys listed per sensor tick. Default: RUNTIME_OPS_SCAN_MAX_KEYS."
    )
    max_document_bytes: Positive | None = Field(
        default=None, description="Larger objects are quarantined. Default: RUNTIME_OPS_MAX_DOCUMENT_BYTES."
    )
    reconcile_every: str | None = Field(
        default=None,
        description="Event mode: how often a listing sweep of the bucket ingests what notifications missed (a lost "
        "or purged message) and removes what was deleted unnoticed (90s, 30m, 1h; off). Default: "
        "RUNTIME_OPS_RECONCILE_EVERY, else 1h.",
    )

    @field_validator("reconcile_every")
    @classmethod
    def _check_reconcile(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration(v)  # raises on nonsense, naming it
        return v

    @field_validator("uri")
    @classmethod
    def _check_uri(cls, v: str | None) -> str | None:
        if v and "://" in v and not v.startswith("s3://"):
            raise ValueError("must be s3://bucket[/prefix] or a local folder path")
        if v and v.startswith("s3://") and not v[len("s3://") :].split("/", 1)[0]:
            raise ValueError("s3:// URL has no bucket name; use s3://bucket[/prefix]")
        return v or None


class EvaluationAttributes(dg.Resolvable, dg.Model):
    golden_set: str | None = Field(
        default=None,
        description="Reviewed JSONL golden set (id, question, relevant document keys), relative to this defs.yaml; "
        "questions whose documents are not in the corpus are left out. Default: RUNTIME_OPS_GOLDEN_SET, else the "
        "demo set.",
    )
    min_questions: int = Field(
        default=200,
        ge=10,
        le=100_000,
        description="When fewer reviewed questions apply to the corpus, questions generated from the corpus (offline, "
        "deterministic) top the gating set up to this many.",
    )
    holdout_fraction: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        default=0.5, description="Share of the generated questions held out for gating."
    )
    seed: int = Field(default=0, ge=0, description="Seed of question generation and of the bootstrap.")
    endpoint_questions: bool = Field(
        default=False,
        description="Have the chat model of answers.endpoint write the generated questions in its own words (each "
        "cached per chunk digest and retried; a chunk whose call fails keeps its offline question).",
    )
    min_production_queries: int = Field(
        default=20,
        ge=1,
        le=100_000,
        description="Logged queries with a click or a `helpful` (only under `queries: {log: text}`) form the "
        '"production queries" set, scored and reported beside the gating set but never gating; with fewer '
        "questions than this it is not used.",
    )


class AnswersAttributes(dg.Resolvable, dg.Model):
    questions_file: str | None = Field(
        default=None, description="Questions rag_answers answers (one per line), relative to this defs.yaml."
    )
    endpoint: str | None = Field(
        default=None,
        description="OpenAI-compatible chat endpoint. Default: RUNTIME_OPS_MODEL_ENDPOINT (none: extractive).",
    )
    model_name: str | None = Field(
        default=None, description="Model name sent to the endpoint. Default: RUNTIME_OPS_MODEL_NAME."
    )
    api_key: EnvRef | None = Field(
        default=None, description="The endpoint's API key, as {env: VAR}. Default: RUNTIME_OPS_MODEL_API_KEY."
    )

    @field_validator("api_key", mode="before")
    @classmethod
    def _no_literal_key(cls, v: object) -> object:
        return secret_ref(v)

    @field_validator("endpoint")
    @classmethod
    def _check_endpoint(cls, v: str | None) -> str | None:
        return http_url(v)


class RetrainAttributes(dg.Resolvable, dg.Model):
    """When the corpus sensor retrains instead of on every landing batch; `null` turns a condition off. The
    retrain schedule (schedules.retrain_cron) retrains regardless."""

    growth_fraction: Annotated[float, Field(gt=0.0, le=100.0)] | None = Field(
        default=0.2,
        description="Retrain once the corpus has grown by this fraction of the chunks the newest model was trained "
        "on (0.2: 20% more chunks). null: growth never triggers a retrain.",
    )
    drift_threshold: Annotated[float, Field(gt=0.0, le=2.0)] | None = Field(
        default=0.25,
        description="Retrain when a landing batch embedded with the production model since the newest model has "
        "an embedding shift (1 - cosine between the batch's mean vector and the corpus centroid) of at least "
        "this. null: off.",
    )
    oov_threshold: Fraction | None = Field(
        default=None,
        description="Retrain when a landing batch embedded since the newest model has at least this fraction of "
        "tokens the model's vocabulary does not know. Default: 0.3 for the lsa embedder. null: off.",
    )
    min_signal_chunks: int = Field(
        default=50,
        ge=1,
        description="Drift and OOV signals of landing batches with fewer chunks do not count: the mean vector of "
        "a few chunks is far from any centroid by chance. Corpus growth still catches many small batches.",
    )
    on_alert: bool = Field(
        default=True,
        description="An alert whose rule action is `retrain` (and a pending alert retrain request) retrains. "
        "false: such alerts are recorded as suppressed.",
    )

    @field_validator("oov_threshold")
    @classmethod
    def _positive(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError("must be above 0 (null turns the condition off)")
        return v


class VectorStoreAttributes(dg.Resolvable, dg.Model):
    url: str | None = Field(
        default=None,
        description="Where the vectors live: lance:///absolute/folder (embedded) or postgresql://user@host:5432/db "
        "(pgvector; the same database as the state store is fine). No password here: use url_env for a URL that "
        "carries one. Default: RUNTIME_OPS_VECTOR_STORE, else lance://RUNTIME_OPS_HOME/vectors.",
    )
    url_env: EnvName | None = Field(
        default=None,
        description="Name of the environment variable holding the vector store's URL (read when a run needs it).",
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if not v.startswith(("lance:///", "postgresql://", "postgres://", "postgresql+psycopg2://")):
            raise ValueError("must be lance:///absolute/folder or postgresql://user@host:5432/db")
        if urlsplit(v).password:
            raise ValueError("a password is a literal secret here; put the URL in a variable and name it in url_env")
        return v


class RetentionAttributes(dg.Resolvable, dg.Model):
    """Which old model versions keep their vector index, stored vectors and weights. Never collected: production,
    the candidate, versions awaiting approval; collected after each change of the serving index."""

    keep_previous: int = Field(
        default=1,
        ge=0,
        description="Earlier production models kept as rollback targets (a rollback swaps back to their index at "
        "once, with nothing re-embedded). 0: no rollback target is kept.",
    )
    keep_recent: int = Field(
        default=2, ge=0, description="Newest other versions kept besides the protected ones (e.g. rejected candidates)."
    )


class BackfillAttributes(dg.Resolvable, dg.Model):
    """How re-embedding a model version's corpus is spread over a Dagster backfill of shadow_embeddings."""

    shards: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Partitions of shadow_embeddings: each embeds and indexes the chunks whose id modulo `shards` is "
        "its number, resumable on its own. Changing it while a backfill is under way is refused.",
    )
    pool: str = Field(
        default="runtime_ops_embedding",
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Dagster concurrency pool of the partitions: its limit (dagster.yaml `concurrency.pools`, or "
        "`dagster instance concurrency set`) is how many embed at once.",
    )
    cores: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Cores each partition run embeds with (forked workers, BLAS and torch threads): size the run "
        "workers (Kubernetes Job pods) for it; parallelism comes from the pool's limit, not from each run.",
    )


class TimeoutAttributes(dg.Resolvable, dg.Model):
    parse_document: str | None = Field(
        default=None,
        description="Longest parse of one document (90s, 2m; off); a slower one is quarantined as too slow and the "
        "batch goes on. Default: RUNTIME_OPS_PARSE_TIMEOUT, else 60s.",
    )
    step: str | None = Field(
        default=None,
        description="Longest run of one step (30m, 2h; off); past it the step fails and its retry policy applies. "
        "Default: RUNTIME_OPS_STEP_TIMEOUT, else 30m.",
    )
    jobs: dict[str, str] = Field(
        default_factory=dict,
        description="A step timeout per job (ingest_job, train_job, promotion_job, index_job, rollback_job, "
        "reembed_job), over `step`.",
    )

    @field_validator("parse_document", "step")
    @classmethod
    def _check_duration(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration(v)
        return v

    @field_validator("jobs")
    @classmethod
    def _check_jobs(cls, v: dict[str, str]) -> dict[str, str]:
        for job, value in v.items():
            if job not in JOB_NAMES:
                raise ValueError(f"timeouts.jobs: no job named {job!r}; jobs: {', '.join(JOB_NAMES)}")
            parse_duration(value)
        return v


class ScheduleAttributes(dg.Resolvable, dg.Model):
    retrain_cron: str | None = Field(
        default="0 3 * * *",
        description="Cron of the periodic retrain (null: none); a scheduled run retrains whatever retrain: says.",
    )
    regression_cron: str | None = Field(
        default="0 */6 * * *", description="Cron of the production model's regression evaluation (null: none)."
    )


class PipelineAttributes(dg.Model):
    """Everything one pipeline declares; nested sections may be left out."""

    name: str = Field(description="Pipeline name: prefixes its asset keys, jobs, sensors and schedules.")
    description: str = Field(default="", description="Shown in the Dagster UI on the pipeline's assets.")
    landing: LandingAttributes = Field(default_factory=LandingAttributes)
    embedder: EmbedderAttributes = Field(default_factory=EmbedderAttributes)
    chunking: ChunkingAttributes = Field(default_factory=ChunkingAttributes)
    evaluation: EvaluationAttributes = Field(default_factory=EvaluationAttributes)
    gate: GateAttributes = Field(default_factory=GateAttributes)
    approvals: ApprovalAttributes = Field(default_factory=ApprovalAttributes)
    answers: AnswersAttributes = Field(default_factory=AnswersAttributes)
    retrain: RetrainAttributes = Field(default_factory=RetrainAttributes)
    schedules: ScheduleAttributes = Field(default_factory=ScheduleAttributes)
    vector_store: VectorStoreAttributes = Field(default_factory=VectorStoreAttributes)
    retention: RetentionAttributes = Field(default_factory=RetentionAttributes)
    backfill: BackfillAttributes = Field(default_factory=BackfillAttributes)
    timeouts: TimeoutAttributes = Field(default_factory=TimeoutAttributes)
    rollout: RolloutAttributes = Field(default_factory=RolloutAttributes)
    queries: QueriesAttributes = Field(default_factory=QueriesAttributes)
    alert_rules: str | None = Field(
        default=None,
        description="Remediation rule file, relative to this defs.yaml. Default: RUNTIME_OPS_ALERT_RULES, else the "
        "example rules.",
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        return check_name(v)

    @model_validator(mode="after")
    def _online_needs_a_deciding_rollout(self) -> PipelineAttributes:
        # Otherwise nothing could ever clear the online half: every candidate would wait for a person, silently.
        if self.gate.online.required and self.rollout.mode not in ("interleave", "canary"):
            raise ValueError(
                f"gate.online.required needs a rollout that can decide: rollout.mode is {self.rollout.mode!r} "
                "(shadow only informs; off sends no live traffic to the candidate); declare rollout.mode "
                "interleave or canary, or set gate.online.required to false"
            )
        return self
