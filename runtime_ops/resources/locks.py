"""The locks resource: distributed locks for assets and jobs (Redis, or leases on the state store).

Connection URLs may carry passwords: `runtime_ops.definitions` passes them as `dg.EnvVar`, so the Dagster
UI and the repository snapshot show the variable's name, never its value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from runtime_ops.database_urls import normalise_database_url
from runtime_ops.locks.factory import locker_for
from runtime_ops.settings import get_settings

if TYPE_CHECKING:
    from runtime_ops.locks.base import LockerBase


class LocksResource(dg.ConfigurableResource):
    """Distributed locks: Redis when REDIS_URL is set, else leases on the state store (same semantics)."""

    redis_url: str | None = None
    database_url: str

    def locker(self) -> LockerBase:
        return locker_for(self.redis_url or None, normalise_database_url(self.database_url), get_settings())
