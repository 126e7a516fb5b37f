"""Tables of the state store (SQLAlchemy Core). Alembic migrations in `migrations/` create them.

Pipeline-owned tables carry `pipeline` (their uniqueness is per pipeline); chunks, embeddings, votes, the audit
log and link uses hang off owned rows and are reached through them; artifacts, locks and metric series are
process-wide (series carry a `pipeline` label)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect

from runtime_ops.store.scope import DEFAULT_PIPELINE

metadata = MetaData()


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to the state store; use datetime.now(UTC)")
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


# One row per sensor tick that found new objects: the unit Dagster partitions by.
landing_batches = Table(
    "landing_batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("seq", Integer, nullable=False),
    Column("source", String(1024), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("n_objects", Integer, nullable=False),
    # pending -> launched (a run exists) -> ingested | failed
    Column("status", String(16), nullable=False),
    Column("run_id", String(64)),
    Column("ingested_at", UTCDateTime()),
    UniqueConstraint("pipeline", "seq", name="uq_landing_batches_pipeline_seq"),
)

# The document ledger: one row per (key, version). Each version is processed once.
documents = Table(
    "documents",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("key", String(1024), nullable=False),
    Column("version", String(256), nullable=False),
    Column("batch_id", String(64), ForeignKey("landing_batches.id"), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("last_modified", UTCDateTime()),
    # pending -> ok | quarantined | duplicate ; ok -> superseded when a newer version is ingested
    Column("status", String(16), nullable=False),
    Column("reason", Text),
    Column("quarantine_code", String(32)),
    Column("content_hash", String(64)),
    Column("format", String(16)),
    Column("title", Text),
    Column("text", Text),
    Column("processed_at", UTCDateTime()),
    UniqueConstraint("pipeline", "key", "version", name="uq_documents_pipeline_key_version"),
    Index("ix_documents_batch", "batch_id"),
    Index("ix_documents_status_key", "status", "key"),
)

chunks = Table(
    "chunks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("document_id", Integer, ForeignKey("documents.id"), nullable=False),
    Column("ord", Integer, nullable=False),
    Column("text", Text, nullable=False),
    UniqueConstraint("document_id", "ord", name="uq_chunks_document_ord"),
)

# Content-addressed blobs: trained models, retrieval indexes.
artifacts = Table(
    "artifacts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False),
    Column("digest", String(64), nullable=False, unique=True),
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
)

model_versions = Table(
    "model_versions",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("digest", String(64), nullable=False),
    Column("artifact_id", Integer, ForeignKey("artifacts.id"), nullable=False),
    Column("params", JSON, nullable=False),
    Column("n_documents", Integer, nullable=False),
    Column("n_chunks", Integer, nullable=False),
    Column("corpus_revision", Integer, nullable=False),
    Column("trained_at", UTCDateTime(), nullable=False),
    Column("run_id", String(64)),
    UniqueConstraint("pipeline", "digest", name="uq_model_versions_pipeline_digest"),
)

eval_reports = Table(
    "eval_reports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("candidate_version", Integer, ForeignKey("model_versions.version"), nullable=False),
    Column("production_version", Integer, ForeignKey("model_versions.version")),
    Column("candidate_metrics", JSON, nullable=False),
    Column("production_metrics", JSON),
    Column("verdict", JSON, nullable=False),
    Column("markdown", Text, nullable=False),
    Column("report_digest", String(64), nullable=False),
    Column("candidate_digest", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("run_id", String(64)),
    Index("ix_eval_reports_candidate", "candidate_version"),
)

# Named pointers: `production` -> model version, `retrieval_index` -> index id. `fence` is the highest
# fencing token a write to the alias carried (issue 4's lock tokens); 0 means unfenced writes so far.
aliases = Table(
    "aliases",
    metadata,
    Column("pipeline", String(64), primary_key=True, server_default=DEFAULT_PIPELINE),
    Column("name", String(64), primary_key=True),
    Column("target", Integer, nullable=False),
    Column("fence", BigInteger, nullable=False, default=0),
    Column("updated_at", UTCDateTime(), nullable=False),
)

alias_history = Table(
    "alias_history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("name", String(64), nullable=False),
    Column("old_target", Integer),
    Column("new_target", Integer),  # NULL: the alias was removed
    Column("approval_id", String(64)),
    Column("actor", String(256), nullable=False),
    Column("run_id", String(64)),
    Column("changed_at", UTCDateTime(), nullable=False),
)

approval_requests = Table(
    "approval_requests",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("candidate_version", Integer, ForeignKey("model_versions.version"), nullable=False),
    Column("candidate_digest", String(64), nullable=False),
    Column("eval_report_id", Integer, ForeignKey("eval_reports.id"), nullable=False),
    # `policy` requests are decided by the gate's policy at creation; `human` ones wait for a person.
    Column("kind", String(16), nullable=False),
    # pending -> approved | rejected | superseded | expired
    Column("status", String(16), nullable=False),
    Column("requested_by", String(256), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("decided_at", UTCDateTime()),
    Column("decided_by", String(256)),
    Column("decision_reason", Text),
    Column("promotion_run_id", String(64)),
    Column("run_id", String(64)),
    # The request's own policy, fixed when it opens.
    Column("approvers", JSON),
    Column("escalation_approvers", JSON),
    Column("required_approvals", Integer, nullable=False, server_default="1"),
    Column("escalate_at", UTCDateTime()),
    Column("expire_at", UTCDateTime()),
    Column("escalated_at", UTCDateTime()),
    Column("escalation_notified_at", UTCDateTime()),
    Column("superseded_by", String(64)),
    # Compensation registered for a request that ends without approval (e.g. removing a canary alias).
    Column("compensation", String(64)),
    Column("compensated_at", UTCDateTime()),
    # Where the request was announced and which status that message shows (resynced when they differ).
    Column("notified_at", UTCDateTime()),
    Column("slack_channel", String(64)),
    Column("slack_ts", String(64)),
    Column("slack_status", String(16)),
    # Head of this request's audit chain.
    Column("audit_seq", Integer, nullable=False, server_default="0"),
    Column("audit_hash", String(64), nullable=False, server_default="0" * 64),
    # W3C traceparent of the span that opened the request; the decision's span links to it.
    Column("trace_context", String(128)),
    Index("ix_approval_requests_status", "status"),
    UniqueConstraint("pipeline", "candidate_digest", name="uq_approval_requests_pipeline_candidate_digest"),
)

# Lock leases held on the state store when REDIS_URL is unset (runtime_ops.locks.store_lock).
locks = Table(
    "locks",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("token", String(255)),  # the holder's lease token; NULL when free
    # When the lease ends, in milliseconds since the Unix epoch on the database clock.
    Column("expires_at_ms", BigInteger, nullable=False),
    # The last fencing token issued for this lock.
    Column("fence", BigInteger, nullable=False),
)

# Promotion sagas: their steps and status, saved after every step so a crash is finished or compensated.
sagas = Table(
    "sagas",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("kind", String(32), nullable=False),
    Column("status", String(16), nullable=False),
    Column("steps", JSON, nullable=False),
    Column("error", Text),
    Column("owner", String(64)),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

# The idempotency ledger: one row per side effect, keyed by what it is derived from. `started` rows whose
# owner stopped heartbeating are taken over (resumed or compensated by the caller), never silently repeated.
effects = Table(
    "effects",
    metadata,
    Column("pipeline", String(64), primary_key=True, server_default=DEFAULT_PIPELINE),
    Column("key", String(255), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("status", String(16), nullable=False),  # started | finished | failed
    Column("owner", String(128)),
    Column("attempts", Integer, nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime()),
    Column("result", JSON),
    Column("error", Text),
)

# One row per counted vote; M-of-N approvals are distinct actors' rows.
approval_votes = Table(
    "approval_votes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", String(64), ForeignKey("approval_requests.id"), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("vote", String(16), nullable=False),
    Column("channel", String(32), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("request_id", "actor", name="uq_approval_votes_request_actor"),
)

# Append-only, hash-chained record of every request, notification, attempt and outcome. Each approval request
# is its own chain (its head lives on the request row, which a decision locks anyway), so clicks on different
# requests never wait for each other; records of no known request chain through `audit_head`. Positions are
# gapless within a chain, so a deleted record is as visible as an edited one.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("chain", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("request_id", String(64)),
    Column("event", String(32), nullable=False),
    Column("actor", String(256)),
    Column("channel", String(32)),
    Column("outcome", String(32)),
    Column("detail", JSON),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    Index("ix_audit_log_request", "request_id"),
    UniqueConstraint("chain", "seq", name="uq_audit_log_chain_seq"),
)

audit_head = Table(
    "audit_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("last_id", Integer, nullable=False),
    Column("last_hash", String(64), nullable=False),
)

# Nonces of signed approval links that were used: a link decides at most once.
link_uses = Table(
    "link_uses",
    metadata,
    Column("nonce", String(64), primary_key=True),
    Column("request_id", String(64), nullable=False),
    Column("approver", String(256), nullable=False),
    Column("action", String(16), nullable=False),
    Column("used_at", UTCDateTime(), nullable=False),
)

# Slack redelivers a click with the same (message_ts, action_ts, user): the same attempt, answered the same.
interaction_deliveries = Table(
    "interaction_deliveries",
    metadata,
    Column("dedupe_key", String(256), primary_key=True),
    Column("request_id", String(64), nullable=False),
    Column("outcome", String(32), nullable=False),
    Column("message", Text, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
)

chunk_embeddings = Table(
    "chunk_embeddings",
    metadata,
    Column("chunk_id", Integer, ForeignKey("chunks.id"), primary_key=True),
    Column("model_version", Integer, ForeignKey("model_versions.version"), primary_key=True),
    Column("vector", LargeBinary, nullable=False),
)

retrieval_indexes = Table(
    "retrieval_indexes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("model_version", Integer, ForeignKey("model_versions.version"), nullable=False),
    Column("corpus_revision", Integer, nullable=False),
    Column("n_chunks", Integer, nullable=False),
    Column("artifact_id", Integer, ForeignKey("artifacts.id"), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("run_id", String(64)),
)

answers = Table(
    "answers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("question", Text, nullable=False),
    Column("answer", Text, nullable=False),
    Column("sources", JSON, nullable=False),
    Column("index_id", Integer, ForeignKey("retrieval_indexes.id"), nullable=False),
    Column("answerer", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("run_id", String(64)),
)

# The alert inbox: one row per Alertmanager alert firing period, keyed by (fingerprint, startsAt). The webhook
# inserts or re-marks it firing, `resolved` closes it; the alert sensor records what it did about it.
alerts = Table(
    "alerts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # The pipeline the alert targets (its `pipeline` label, else the default pipeline).
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("fingerprint", String(64), nullable=False),
    Column("starts_at", UTCDateTime(), nullable=False),
    Column("alertname", String(256), nullable=False),
    Column("status", String(16), nullable=False),  # firing | resolved
    Column("labels", JSON, nullable=False),
    Column("annotations", JSON, nullable=False),
    Column("ends_at", UTCDateTime()),
    Column("generator_url", Text),
    Column("receiver", String(256)),
    Column("group_key", Text),
    Column("received_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("resolved_at", UTCDateTime()),
    # What the alert sensor did. action_status: NULL (not handled yet) | requested (run requested, id not yet
    # seen) | launched | succeeded | failed | awaiting_approval | rejected | suppressed | notified | no_rule |
    # skipped | error
    Column("rule", String(128)),
    Column("action", String(16)),
    Column("action_status", String(32)),
    Column("action_detail", Text),
    Column("action_params", JSON),
    Column("run_key", String(255)),
    Column("run_id", String(64)),
    Column("approval_id", String(64)),
    Column("handled_at", UTCDateTime()),
    UniqueConstraint("fingerprint", "starts_at", name="uq_alerts_fingerprint_starts_at"),
    Index("ix_alerts_status", "status"),
    Index("ix_alerts_action_status", "action_status"),
    Index("ix_alerts_rule", "rule"),
)


# Durable counters and histograms: run workers are separate processes (and containers), so what they observe
# (lock waits, landing lag) is added here in one short transaction and the ops API's /metrics reads it back.
# `labels` is the canonical JSON of the label set; `buckets` the cumulative counts per upper bound (histograms).
metric_series = Table(
    "metric_series",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("labels", String(512), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("sum", Float, nullable=False),
    Column("buckets", JSON),
    Column("updated_at", UTCDateTime(), nullable=False),
)
