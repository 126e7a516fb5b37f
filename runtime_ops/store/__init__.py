"""The state store: the document ledger, model registry, approvals and artifacts, in SQL."""

from runtime_ops.store.store import StateStore, open_store

__all__ = ["StateStore", "open_store"]
