"""The state store: small repositories by concern over one engine, scoped to one pipeline; its public names.

Repositories live in subpackages by concern, as their tables do in `tables/`: `approvals/` (requests, votes,
deadlines, notifications, the audit log), `corpus/` (ledger, documents, profiles, change feed, embeddings),
`registry/` (model versions and aliases, artifacts, evaluations), `serving/` (indexes, answers, rollouts) and
`operations/` (alerts, effects, sagas, retraining, API keys, metric series). At the top: `store.py` (the StateStore
facade and `open_store`), `engine.py`, `scope.py`, `schema.py`, `migrate.py` and `integrity.py`."""

from runtime_ops.store.approvals.votes import VoteResult
from runtime_ops.store.corpus.ledger import NewObject
from runtime_ops.store.operations.api_keys import SCOPES, ApiKey, NewKey, UnknownScope
from runtime_ops.store.operations.effects import Claim
from runtime_ops.store.registry.registry import AliasConflict, ForeignTarget, UnfencedWrite, remove_alias_compensation
from runtime_ops.store.scope import DEFAULT_PIPELINE, UnscopedWrite
from runtime_ops.store.serving.rollouts import RolloutConflict, stop_rollout_compensation
from runtime_ops.store.store import StateStore, open_store

__all__ = [
    "DEFAULT_PIPELINE",
    "SCOPES",
    "AliasConflict",
    "ApiKey",
    "Claim",
    "ForeignTarget",
    "NewKey",
    "NewObject",
    "RolloutConflict",
    "StateStore",
    "UnfencedWrite",
    "UnknownScope",
    "UnscopedWrite",
    "VoteResult",
    "open_store",
    "remove_alias_compensation",
    "stop_rollout_compensation",
]
