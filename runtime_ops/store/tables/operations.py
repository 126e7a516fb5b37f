"""Running the system: lock leases, sagas, the idempotency ledger, the alert inbox, durable metric series, what the
retrain policy reads (drift signals, retrain requests) and who may call the ops API (scoped API keys)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata
from runtime_ops.store.tables.registry import model_ref

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

# One row per embedding pass of document_embeddings that embedded new chunks with the production model: how far
# those chunks moved from the corpus centroid and how many of their tokens the model does not know. The running
# centroid of that model version (sum of its vectors, little-endian float64, and their count) after the batch is
# kept on the row, so the next batch compares against it without reading every vector back.
drift_signals = Table(
    "drift_signals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("model_version", Integer, nullable=False),
    Column("corpus_revision", Integer, nullable=False),  # the corpus revision the batch was embedded at
    Column("chunks", Integer, nullable=False),
    Column("embedding_shift", Float),  # NULL: nothing to compare against (the model's first embedded chunks)
    Column("oov_rate", Float),
    Column("centroid_sum", LargeBinary, nullable=False),
    Column("centroid_count", Integer, nullable=False),
    Column("run_id", String(64)),
    Column("created_at", UTCDateTime(), nullable=False),
    Index("ix_drift_signals_pipeline_revision", "pipeline", "corpus_revision"),
    Index("ix_drift_signals_pipeline_model", "pipeline", "model_version"),
    model_ref("drift_signals", "model_version"),
)


# A request to retrain (an alert's or a person's) that the corpus sensor consumes once: `pending` until the
# sensor requests its run (status `requested`, with that run key).
retrain_requests = Table(
    "retrain_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    Column("source", String(16), nullable=False),  # alert | manual
    Column("reason", Text, nullable=False),
    Column("requested_by", String(128)),
    Column("corpus_revision", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # pending | requested
    Column("run_key", String(255)),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("handled_at", UTCDateTime()),
    Index("ix_retrain_requests_pipeline_status", "pipeline", "status"),
)

# Process-wide, like locks: a key is not any one pipeline's.
# One row per API key. The key itself (`rok_<key_id>_<secret>`) is shown once, when it is created; only the
# SHA-256 of the whole key is kept. `key_id` is the public part that logs and `runtime-ops keys list` show.
# `scopes`: comma-separated, sorted (read, decide, search, admin). A revoked key keeps its row (who had access when).
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key_id", String(16), nullable=False),
    Column("name", String(128), nullable=False),
    Column("secret_hash", String(64), nullable=False),  # hex SHA-256 of the whole key
    Column("scopes", String(255), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("created_by", String(128)),
    # The approver id this key decides as (CLI and API decisions); NULL: the key cannot decide.
    Column("approver", String(256)),
    # Written at most once a minute per key (not on every request): "is this key still in use?", not an audit log.
    Column("last_used_at", UTCDateTime()),
    Column("revoked_at", UTCDateTime()),
    Column("revoked_by", String(128)),
    UniqueConstraint("key_id", name="uq_api_keys_key_id"),
)
