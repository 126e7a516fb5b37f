"""Dagster resources over runtime_ops' own state and settings: the only way assets reach them."""

import dagster as dg

from runtime_ops.store import StateStore, open_store


class StateStoreResource(dg.ConfigurableResource):
    """The state store: SQLite file by default, PostgreSQL when RUNTIME_OPS_DATABASE_URL says so."""

    database_url: str

    def store(self) -> StateStore:
        return open_store(self.database_url)


class GatePolicyResource(dg.ConfigurableResource):
    """How the promotion gate judges a candidate, and the golden set it is judged on."""

    primary_metric: str = "ndcg@5"
    auto_approve_margin: float = 0.02
    max_regression: float = 0.05
    golden_set: str

    def policy(self):  # type: ignore[no-untyped-def]
        from runtime_ops.models.policy import GatePolicy

        return GatePolicy(
            primary_metric=self.primary_metric,
            auto_approve_margin=self.auto_approve_margin,
            max_regression=self.max_regression,
        )
