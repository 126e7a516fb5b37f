"""Process-wide Dagster resources over runtime_ops' own state: the only way assets reach it.

Connection URLs may carry passwords: `runtime_ops.definitions` passes them as `dg.EnvVar`, so the Dagster
UI and the repository snapshot show the variable's name, never its value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from runtime_ops.store import StateStore, open_store

if TYPE_CHECKING:
    from runtime_ops.locks.base import LockerBase


class StateStoreResource(dg.ConfigurableResource):
    """The state store: SQLite file by default, PostgreSQL when RUNTIME_OPS_DATABASE_URL says so."""

    database_url: str

    def store(self) -> StateStore:
        from runtime_ops.database_urls import normalise_database_url
        from runtime_ops.settings import get_settings

        return open_store(normalise_database_url(self.database_url), get_settings())


class ApprovalsResource(dg.ConfigurableResource):
    """Where approval requests are announced (Slack or the log) and which URLs their links use.

    Secrets (the Slack token, the link-signing secret) are read from the settings at run time, never stored in
    resource config, so they do not show in the Dagster UI. Who approves is each pipeline's own policy;
    `runtime_ops.approvals.announce.announcer_for` builds the announcer from this resource.
    """

    public_url: str = "http://127.0.0.1:8000"
    dagster_url: str = "http://127.0.0.1:3000"
    slack_api_url: str | None = None


class LocksResource(dg.ConfigurableResource):
    """Distributed locks: Redis when REDIS_URL is set, else leases on the state store (same semantics)."""

    redis_url: str | None = None
    database_url: str

    def locker(self) -> LockerBase:
        from runtime_ops.database_urls import normalise_database_url
        from runtime_ops.locks.factory import locker_for
        from runtime_ops.settings import get_settings

        return locker_for(self.redis_url or None, normalise_database_url(self.database_url), get_settings())
