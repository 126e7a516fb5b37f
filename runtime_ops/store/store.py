"""StateStore: runtime_ops' own state, as small repositories by concern over one engine and one pipeline scope.

    store = open_store(url, settings)             # scoped to the default pipeline
    store.ledger.known_versions(keys)
    store.registry.alias("production")
    store.scoped("beta").requests.get_request(rid)  # None: that request is alpha's
    open_store(url, settings, pipeline=None)      # unscoped: reads span every pipeline, owned writes refused

Each repository method is one transaction; rows come back as plain dicts (with their "pipeline") so callers never
hold SQLAlchemy objects across transactions. Backed by SQLite (embedded default) or PostgreSQL. The settings it
uses (statement timeout, home, audit key) are handed in by the entry points (CLI, resources, API), never looked up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from runtime_ops.store import integrity
from runtime_ops.store.approvals.audit import Audit, create_settings_key, settings_key
from runtime_ops.store.approvals.deadlines import Deadlines
from runtime_ops.store.approvals.lifecycle import Lifecycle
from runtime_ops.store.approvals.notifications import Notifications
from runtime_ops.store.approvals.requests import Requests
from runtime_ops.store.approvals.votes import Votes
from runtime_ops.store.corpus.changes import CorpusChanges
from runtime_ops.store.corpus.documents import Documents
from runtime_ops.store.corpus.embeddings import Embeddings
from runtime_ops.store.corpus.ledger import Ledger
from runtime_ops.store.corpus.profiles import ChunkingProfiles
from runtime_ops.store.engine import engine_for, tx
from runtime_ops.store.inference.results import InferenceResults
from runtime_ops.store.migrate import head_revision, upgrade_to_head
from runtime_ops.store.operations.alerts import Alerts
from runtime_ops.store.operations.api_keys import ApiKeys
from runtime_ops.store.operations.effects import Effects
from runtime_ops.store.operations.metrics import Metrics
from runtime_ops.store.operations.retraining import Retraining
from runtime_ops.store.operations.sagas import Sagas
from runtime_ops.store.registry.artifacts import Artifacts
from runtime_ops.store.registry.evaluations import Evaluations
from runtime_ops.store.registry.registry import Registry
from runtime_ops.store.scope import DEFAULT_PIPELINE

if TYPE_CHECKING:
    from runtime_ops.settings import Settings
from runtime_ops.store.serving.answers import Answers
from runtime_ops.store.serving.indexes import Indexes
from runtime_ops.store.serving.judgements import Judgements
from runtime_ops.store.serving.query_log import QueryLog
from runtime_ops.store.serving.rollouts import Rollouts


def open_store(
    url: str,
    settings: Settings,
    *,
    pipeline: str | None = DEFAULT_PIPELINE,
    migrate: bool = True,
    check: bool = False,
) -> StateStore:
    """The state store at `url` (migrated to the newest schema) under `settings`, scoped to `pipeline` (None:
    unscoped). `check` (entry points: the CLI, the API, `runtime-ops dev`) first checks it answers and is whole,
    once per process, raising `StateUnreachable` (host and port) or `StateDamaged` (the file and the fix)."""
    engine = engine_for(url, settings)
    if check and url not in _CHECKED:
        integrity.check(engine, head_revision())
        _CHECKED.add(url)
    if migrate:
        # A store being created gets its audit key with it (unless RUNTIME_OPS_AUDIT_KEY gives one). Nothing else
        # makes one, so a key that went missing is refused rather than silently replaced.
        upgrade_to_head(engine, settings, on_create=partial(create_settings_key, settings))
    return StateStore(engine, settings, pipeline=pipeline)


_CHECKED: set[str] = set()


class StateStore:
    """The engine, the pipeline scope and one repository per concern."""

    def __init__(self, engine: Engine, settings: Settings, *, pipeline: str | None = DEFAULT_PIPELINE) -> None:
        if pipeline is not None and (not pipeline.strip() or len(pipeline) > 64):
            raise ValueError(f"a pipeline name is 1 to 64 characters, got {pipeline!r}")
        self.engine = engine
        self.settings = settings
        self.pipeline = pipeline
        p = pipeline
        self.metrics = Metrics(engine, p)
        self.ledger = Ledger(engine, p, self.metrics)
        self.documents = Documents(engine, p)
        self.profiles = ChunkingProfiles(engine, p)
        self.changes = CorpusChanges(engine, p)
        self.artifacts = Artifacts(engine, p)
        self.sagas = Sagas(engine, p)
        self.evaluations = Evaluations(engine, p)
        self.embeddings = Embeddings(engine, p)
        self.indexes = Indexes(engine, p)
        self.answers = Answers(engine, p)
        self.inference = InferenceResults(engine, p)
        self.query_log = QueryLog(engine, p)
        self.judgements = Judgements(engine, p)
        self.audit_log = Audit(engine, p, key=partial(settings_key, settings))
        self.rollouts = Rollouts(engine, p, self.audit_log)
        self.lifecycle = Lifecycle(engine, p, self.audit_log, on_superseded=self._candidate_superseded_in)
        # Production moving ends the rollout that compared a candidate with the old production and moves the
        # candidate's lifecycle (promoted, rolled back), in the alias write's transaction: a move the lifecycle
        # refuses never happens.
        self.registry = Registry(engine, p, on_production_move=self._production_moved_in)
        self.requests = Requests(engine, p, self.audit_log, self.lifecycle)
        self.votes = Votes(engine, p, self.audit_log, self.requests, self.lifecycle)
        self.deadlines = Deadlines(engine, p, self.audit_log, self.lifecycle)
        self.notifications = Notifications(engine, p, self.audit_log)
        self.alerts = Alerts(engine, p, self.requests)
        self.effects = Effects(engine, p)
        self.retraining = Retraining(engine, p)
        self.api_keys = ApiKeys(engine, p)  # process-wide: the same keys whatever the scope

    def _production_moved_in(
        self, conn: Connection, old: int | None, new: int | None, actor: str, approval_id: str | None
    ) -> None:
        self.rollouts.production_moved_in(conn, old, new, actor)
        self.lifecycle.production_moved_in(conn, old, new, actor, approval_id)

    def _candidate_superseded_in(
        self, conn: Connection, pipeline: str, approval_id: str, reason: str, actor: str
    ) -> None:
        # The candidate's own pipeline: a decision may come through an unscoped store (the ops API).
        Rollouts(self.engine, pipeline, self.audit_log).stop_in(
            conn, reason=reason, actor=actor, approval_id=approval_id
        )

    def scoped(self, pipeline: str | None) -> StateStore:
        """A store on the same engine for `pipeline` (None: the unscoped view)."""
        return StateStore(self.engine, self.settings, pipeline=pipeline)

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
