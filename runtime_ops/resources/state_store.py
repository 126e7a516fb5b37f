"""The state store resource: the only way assets reach runtime_ops' own state.

Connection URLs may carry passwords: `runtime_ops.definitions` passes them as `dg.EnvVar`, so the Dagster
UI and the repository snapshot show the variable's name, never its value.
"""

from __future__ import annotations

import dagster as dg

from runtime_ops.database_urls import normalise_database_url
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store


class StateStoreResource(dg.ConfigurableResource):
    """The state store: SQLite file by default, PostgreSQL when RUNTIME_OPS_DATABASE_URL says so."""

    database_url: str

    def store(self) -> StateStore:
        return open_store(normalise_database_url(self.database_url), get_settings())
