"""Approval requests, their votes, the audit chain, used link nonces and Slack deliveries."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.tables.base import UTCDateTime, metadata
from runtime_ops.store.tables.registry import model_ref

approval_requests = Table(
    "approval_requests",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("pipeline", String(64), nullable=False, server_default=DEFAULT_PIPELINE),
    # A model promotion names its candidate and evaluation report; an asset gate's request has neither
    # (migration 0022) and names its `target` instead. The digest is of what is approved, either way.
    Column("candidate_version", Integer),
    Column("candidate_digest", String(64), nullable=False),
    Column("eval_report_id", Integer, ForeignKey("eval_reports.id")),
    # The gated asset's label ("scoring/ticket_labels", "scoring/ticket_labels[2026-12-01]"); NULL: a model promotion.
    Column("target", String(512)),
    # The materialization's metadata shown to approvers (the gate's `evidence` fields).
    Column("evidence", JSON),
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
    # [{"approvers": [...], "at": iso deadline}, ...] in order, and how many of them have joined (migration 0012).
    Column("escalation_tiers", JSON),
    Column("escalation_tier", Integer, nullable=False, server_default="0"),
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
    model_ref("approval_requests", "candidate_version"),
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
    # chain.key_id of the key that MACed the record (migration 0016; older records have none): not MACed, it
    # only lets verify say "wrong key" rather than "forged".
    Column("key_id", String(16)),
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
