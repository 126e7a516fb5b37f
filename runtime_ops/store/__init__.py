"""The state store: small repositories by concern (ledger, registry, requests, ...) over one engine, scoped
to one pipeline. See `runtime_ops.store.store`."""

from runtime_ops.store.api_keys import SCOPES, ApiKey, NewKey, UnknownScope
from runtime_ops.store.effects import Claim
from runtime_ops.store.ledger import NewObject
from runtime_ops.store.registry import AliasConflict, ForeignTarget, UnfencedWrite, remove_alias_compensation
from runtime_ops.store.scope import DEFAULT_PIPELINE, UnscopedWrite
from runtime_ops.store.store import StateStore, open_store
from runtime_ops.store.votes import VoteResult

__all__ = [
    "DEFAULT_PIPELINE",
    "SCOPES",
    "AliasConflict",
    "ApiKey",
    "Claim",
    "ForeignTarget",
    "NewKey",
    "NewObject",
    "StateStore",
    "UnfencedWrite",
    "UnknownScope",
    "UnscopedWrite",
    "VoteResult",
    "open_store",
    "remove_alias_compensation",
]
