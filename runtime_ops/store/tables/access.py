"""Who may call the ops API: scoped API keys (process-wide, like locks: a key is not any one pipeline's)."""

from __future__ import annotations

from sqlalchemy import Column, Integer, String, Table, UniqueConstraint

from runtime_ops.store.tables.base import UTCDateTime, metadata

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
