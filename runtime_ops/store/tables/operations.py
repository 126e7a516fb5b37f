"""Lock leases, sagas, the idempotency ledger, the alert inbox and durable metric series."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata

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
