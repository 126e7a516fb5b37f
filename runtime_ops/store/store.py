"""StateStore: runtime_ops' own state, as small repositories by concern over one engine and one pipeline scope.

    store = open_store(url)                       # scoped to the default pipeline
    store.ledger.known_versions(keys)
    store.registry.alias("production")
    store.scoped("beta").requests.get_request(rid)  # None: that request is alpha's
    open_store(url, pipeline=None)                # unscoped: reads span every pipeline, owned writes refused

Each repository method is one transaction; rows come back as plain dicts (with their "pipeline") so callers never
hold SQLAlchemy objects across transactions. Backed by SQLite (embedded default) or PostgreSQL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from runtime_ops.store.alerts import Alerts
from runtime_ops.store.answers import Answers
from runtime_ops.store.artifacts import Artifacts
from runtime_ops.store.audit import Audit
from runtime_ops.store.deadlines import Deadlines
from runtime_ops.store.documents import Documents
from runtime_ops.store.effects import Effects
from runtime_ops.store.embeddings import Embeddings
from runtime_ops.store.engine import engine_for, tx
from runtime_ops.store.evaluations import Evaluations
from runtime_ops.store.indexes import Indexes
from runtime_ops.store.ledger import (
    Ledger,
    NewObject,  # noqa: F401  TEMPORARY: old import path
)
from runtime_ops.store.metrics import Metrics
from runtime_ops.store.migrate import upgrade_to_head
from runtime_ops.store.notifications import Notifications
from runtime_ops.store.registry import AliasConflict, Registry  # noqa: F401  TEMPORARY: old import path
from runtime_ops.store.requests import Requests
from runtime_ops.store.sagas import Sagas
from runtime_ops.store.scope import DEFAULT_PIPELINE
from runtime_ops.store.votes import Votes


def open_store(url: str, *, pipeline: str | None = DEFAULT_PIPELINE, migrate: bool = True) -> StateStore:
    """The state store at `url` (migrated to the newest schema), scoped to `pipeline` (None: unscoped)."""
    engine = engine_for(url)
    if migrate:
        upgrade_to_head(engine)
    return StateStore(engine, pipeline=pipeline)


class StateStore:
    """The engine, the pipeline scope and one repository per concern."""

    def __init__(self, engine: Engine, *, pipeline: str | None = DEFAULT_PIPELINE) -> None:
        if pipeline is not None and (not pipeline.strip() or len(pipeline) > 64):
            raise ValueError(f"a pipeline name is 1 to 64 characters, got {pipeline!r}")
        self.engine = engine
        self.pipeline = pipeline
        p = pipeline
        self.metrics = Metrics(engine, p)
        self.ledger = Ledger(engine, p, self.metrics)
        self.documents = Documents(engine, p)
        self.artifacts = Artifacts(engine, p)
        self.registry = Registry(engine, p)
        self.sagas = Sagas(engine, p)
        self.evaluations = Evaluations(engine, p)
        self.embeddings = Embeddings(engine, p)
        self.indexes = Indexes(engine, p, self.registry)
        self.answers = Answers(engine, p)
        self.audit_log = Audit(engine, p)
        self.requests = Requests(engine, p, self.audit_log)
        self.votes = Votes(engine, p, self.audit_log, self.requests)
        self.deadlines = Deadlines(engine, p, self.audit_log)
        self.notifications = Notifications(engine, p, self.audit_log)
        self.alerts = Alerts(engine, p, self.requests)
        self.effects = Effects(engine, p)

    def scoped(self, pipeline: str | None) -> StateStore:
        """A store on the same engine for `pipeline` (None: the unscoped view)."""
        return StateStore(self.engine, pipeline=pipeline)

    @contextlib.contextmanager
    def tx(self) -> Iterator[Connection]:
        with tx(self.engine) as conn:
            yield conn

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def __repr__(self) -> str:
        url = self.engine.url.render_as_string(hide_password=True)
        return f"StateStore({url}, pipeline={self.pipeline!r})"

    # TEMPORARY, removed with the call-site rewrite: the old method names, resolved to the repositories.
    _LEGACY = {
        "known_versions": ("ledger", "known_versions"),
        "record_batch": ("ledger", "record_batch"),
        "batches": ("ledger", "batches"),
        "get_batch": ("ledger", "get_batch"),
        "mark_batch": ("ledger", "mark_batch"),
        "corpus_revision": ("ledger", "corpus_revision"),
        "batch_documents": ("documents", "batch_documents"),
        "document": ("documents", "document"),
        "documents_by_status": ("documents", "documents_by_status"),
        "quarantine": ("documents", "quarantine"),
        "store_parsed": ("documents", "store_parsed"),
        "parsed_documents": ("documents", "parsed_documents"),
        "store_chunks": ("documents", "store_chunks"),
        "document_counts": ("documents", "document_counts"),
        "iter_current_chunks": ("documents", "iter_current_chunks"),
        "current_chunks": ("documents", "current_chunks"),
        "chunk_texts": ("documents", "chunk_texts"),
        "put_artifact": ("artifacts", "put_artifact"),
        "artifact_digest": ("artifacts", "artifact_digest"),
        "get_artifact": ("artifacts", "get_artifact"),
        "register_model": ("registry", "register_model"),
        "get_model": ("registry", "get_model"),
        "latest_model": ("registry", "latest_model"),
        "models": ("registry", "models"),
        "alias": ("registry", "alias"),
        "set_alias": ("registry", "set_alias"),
        "remove_alias": ("registry", "remove_alias"),
        "alias_history": ("registry", "alias_history"),
        "load_saga": ("sagas", "load_saga"),
        "save_saga": ("sagas", "save_saga"),
        "record_eval_report": ("evaluations", "record_eval_report"),
        "latest_eval_report": ("evaluations", "latest_eval_report"),
        "eval_history": ("evaluations", "eval_history"),
        "get_eval_report": ("evaluations", "get_eval_report"),
        "chunks_missing_embeddings": ("embeddings", "chunks_missing_embeddings"),
        "put_embeddings": ("embeddings", "put_embeddings"),
        "embedding_counts": ("embeddings", "embedding_counts"),
        "iter_current_embeddings": ("embeddings", "iter_current_embeddings"),
        "drop_embeddings": ("embeddings", "drop_embeddings"),
        "record_index": ("indexes", "record_index"),
        "get_index": ("indexes", "get_index"),
        "current_index": ("indexes", "current_index"),
        "record_answers": ("answers", "record_answers"),
        "latest_answers": ("answers", "latest_answers"),
        "audit": ("audit_log", "append"),
        "audit_records": ("audit_log", "records"),
        "iter_audit": ("audit_log", "iter_records"),
        "audit_heads": ("audit_log", "heads"),
        "verify_audit": ("audit_log", "verify"),
        "open_request": ("requests", "open_request"),
        "request_for_digest": ("requests", "request_for_digest"),
        "get_request": ("requests", "get_request"),
        "get_request_in": ("requests", "get_request_in"),
        "list_requests": ("requests", "list_requests"),
        "cast_vote": ("votes", "cast_vote"),
        "votes": ("votes", "for_request"),
        "expire_due": ("deadlines", "expire_due"),
        "escalate_due": ("deadlines", "escalate_due"),
        "compensate_due": ("deadlines", "compensate_due"),
        "requests_to_notify": ("notifications", "requests_to_notify"),
        "requests_with_messages": ("notifications", "requests_with_messages"),
        "escalations_to_notify": ("notifications", "escalations_to_notify"),
        "mark_notified": ("notifications", "mark_notified"),
        "mark_escalation_notified": ("notifications", "mark_escalation_notified"),
        "set_slack_status": ("notifications", "set_slack_status"),
        "approved_unlaunched": ("notifications", "approved_unlaunched"),
        "mark_request_launched": ("notifications", "mark_request_launched"),
        "record_alerts": ("alerts", "record_alerts"),
        "list_alerts": ("alerts", "list_alerts"),
        "get_alert": ("alerts", "get_alert"),
        "alerts_to_handle": ("alerts", "alerts_to_handle"),
        "alerts_in_action": ("alerts", "alerts_in_action"),
        "set_alert_action": ("alerts", "set_alert_action"),
        "active_remediation": ("alerts", "active_remediation"),
        "last_rule_launch": ("alerts", "last_rule_launch"),
        "open_rollback_request": ("alerts", "open_rollback_request"),
        "claim_effect": ("effects", "claim_effect"),
        "finish_effect": ("effects", "finish_effect"),
        "fail_effect": ("effects", "fail_effect"),
        "effect": ("effects", "effect"),
        "add_metric_deltas": ("metrics", "add_metric_deltas"),
        "metric_rows": ("metrics", "metric_rows"),
        "metric_aggregates": ("metrics", "metric_aggregates"),
    }

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        legacy = type(self)._LEGACY.get(name)
        if legacy is None:
            raise AttributeError(name)
        return getattr(getattr(self, legacy[0]), legacy[1])
