"""StateStore: every read and write of runtime_ops' own state, each method one transaction.

Backed by SQLite (embedded default) or PostgreSQL. Methods return plain dicts/dataclasses so callers never
hold SQLAlchemy objects across transactions.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, String, and_, any_, bindparam, create_engine, event, func, insert, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from runtime_ops.store import schema as t
from runtime_ops.store.alerts import AlertsMixin
from runtime_ops.store.approvals import ApprovalsMixin
from runtime_ops.store.effects import EffectsMixin
from runtime_ops.store.metrics import MetricsMixin
from runtime_ops.store.migrate import upgrade_to_head
from runtime_ops.store.sql import insert_ignore, utcnow

if TYPE_CHECKING:  # numpy is imported where embeddings are written: loading the code location never needs it
    import numpy as np


@dataclass(frozen=True)
class NewObject:
    key: str
    version: str
    size: int
    last_modified: datetime | None


_KNOWN_VERSIONS_PG = select(t.documents.c.key, t.documents.c.version).where(
    t.documents.c.key == any_(bindparam("keys", type_=ARRAY(String)))
)


class AliasConflict(RuntimeError):
    """A fenced alias write carried a token older than the last accepted one."""


_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine_for(url: str) -> Engine:
    with _ENGINES_LOCK:
        engine = _ENGINES.get(url)
        if engine is None:
            if url.startswith("sqlite"):
                # Sensors, runs and the CLI are separate processes: wait for the writer instead of failing.
                engine = create_engine(url, connect_args={"timeout": 30})

                @event.listens_for(engine, "connect")
                def _sqlite_pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
                    # Let SQLAlchemy's "begin" below issue BEGIN IMMEDIATE: a deferred transaction that reads
                    # then writes fails at once (SQLITE_BUSY) when another process wrote in between.
                    dbapi_conn.isolation_level = None
                    cur = dbapi_conn.cursor()
                    cur.execute("PRAGMA journal_mode=WAL")
                    cur.execute("PRAGMA foreign_keys=ON")
                    cur.execute("PRAGMA busy_timeout=30000")
                    cur.close()

                @event.listens_for(engine, "begin")
                def _sqlite_begin(conn):  # type: ignore[no-untyped-def]
                    conn.exec_driver_sql("BEGIN IMMEDIATE")

            else:
                engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=20)
            _ENGINES[url] = engine
        return engine


def open_store(url: str, *, migrate: bool = True) -> StateStore:
    if url.startswith("sqlite:///"):
        from pathlib import Path

        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    engine = _engine_for(url)
    if migrate:
        upgrade_to_head(engine)
    return StateStore(engine)


class StateStore(ApprovalsMixin, EffectsMixin, AlertsMixin, MetricsMixin):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.pipeline = "demo"

    def scoped(self, name: str) -> StateStore:  # stand-in until the store is scoped by pipeline
        return self

    @contextlib.contextmanager
    def tx(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    # ------------------------------------------------------------------ landing ledger
    def known_versions(self, keys: Sequence[str]) -> set[tuple[str, str]]:
        """The (key, version) pairs of `keys` already in the ledger."""
        if not keys:
            return set()
        with self.tx() as conn:
            if conn.dialect.name == "postgresql":
                # One array parameter instead of a thousand: a listing page costs one cheap round trip.
                rows = conn.execute(_KNOWN_VERSIONS_PG, {"keys": list(keys)})
            else:
                rows = conn.execute(
                    select(t.documents.c.key, t.documents.c.version).where(t.documents.c.key.in_(list(keys)))
                )
            return {(r.key, r.version) for r in rows}

    def record_batch(self, source: str, objects: Sequence[NewObject]) -> dict[str, Any] | None:
        """Record a landing batch and its documents atomically; objects already in the ledger are dropped.

        Returns the batch row, or None when every object was already known (a concurrent sensor won).
        """
        if not objects:
            return None
        # Two sensors racing may pick the same next seq: the loser's transaction rolls back whole on the unique
        # constraint and is tried again, by then without the objects the winner recorded.
        for attempt in range(5):
            try:
                batch, lags = self._record_batch(source, objects)
            except IntegrityError:
                if attempt == 4:
                    raise
                continue
            if lags:
                # After the batch committed, in its own transaction: a metrics failure cannot undo the batch.
                from runtime_ops.observability import metrics

                metrics.observe_many(self, "runtime_ops_landing_lag_seconds", lags)
            return batch
        return None  # pragma: no cover

    def _record_batch(self, source: str, objects: Sequence[NewObject]) -> tuple[dict[str, Any] | None, list[float]]:
        """The batch row (None when every object was known) and the landing lag of each object it recorded."""
        now = utcnow()
        lags: list[float] = []
        with self.tx() as conn:
            seq = (conn.execute(select(func.max(t.landing_batches.c.seq))).scalar() or 0) + 1
            batch_id = f"{now:%Y%m%dT%H%M%S}-{seq:06d}-{secrets.token_hex(3)}"
            conn.execute(
                insert(t.landing_batches).values(
                    id=batch_id, seq=seq, source=source, created_at=now, n_objects=0, status="pending"
                )
            )
            stmt = insert_ignore(t.documents, conn)
            inserted = 0
            for obj in objects:
                res = conn.execute(
                    stmt.values(
                        key=obj.key,
                        version=obj.version,
                        batch_id=batch_id,
                        size=obj.size,
                        last_modified=obj.last_modified,
                        status="pending",
                    )
                )
                inserted += res.rowcount or 0
                if res.rowcount and obj.last_modified is not None:
                    # A last_modified ahead of our clock (skew) is no lag, not a negative one.
                    lags.append(max((now - obj.last_modified).total_seconds(), 0.0))
            if inserted == 0:
                conn.rollback()
                return None, []
            conn.execute(update(t.landing_batches).where(t.landing_batches.c.id == batch_id).values(n_objects=inserted))
            return dict(
                conn.execute(select(t.landing_batches).where(t.landing_batches.c.id == batch_id)).one()._mapping
            ), lags

    def batches(self, status: str | None = None) -> list[dict[str, Any]]:
        q = select(t.landing_batches).order_by(t.landing_batches.c.seq)
        if status:
            q = q.where(t.landing_batches.c.status == status)
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def get_batch(self, batch_id: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(select(t.landing_batches).where(t.landing_batches.c.id == batch_id)).first()
            return dict(row._mapping) if row else None

    def mark_batch(self, batch_id: str, status: str, *, run_id: str | None = None) -> None:
        values: dict[str, Any] = {"status": status}
        if run_id:
            values["run_id"] = run_id
        if status == "ingested":
            values["ingested_at"] = utcnow()
        with self.tx() as conn:
            conn.execute(update(t.landing_batches).where(t.landing_batches.c.id == batch_id).values(**values))

    def batch_documents(self, batch_id: str) -> list[dict[str, Any]]:
        cols = [c for c in t.documents.c if c.name != "text"]
        with self.tx() as conn:
            rows = conn.execute(select(*cols).where(t.documents.c.batch_id == batch_id).order_by(t.documents.c.key))
            return [dict(r._mapping) for r in rows]

    def document(self, key: str, version: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(
                select(t.documents).where(and_(t.documents.c.key == key, t.documents.c.version == version))
            ).first()
            return dict(row._mapping) if row else None

    def documents_by_status(self, status: str) -> list[dict[str, Any]]:
        cols = [c for c in t.documents.c if c.name != "text"]
        with self.tx() as conn:
            rows = conn.execute(select(*cols).where(t.documents.c.status == status).order_by(t.documents.c.key))
            return [dict(r._mapping) for r in rows]

    def quarantine(self, document_id: int, code: str, reason: str) -> None:
        with self.tx() as conn:
            conn.execute(
                update(t.documents)
                .where(t.documents.c.id == document_id)
                .values(status="quarantined", quarantine_code=code, reason=reason, processed_at=utcnow())
            )

    def store_parsed(self, document_id: int, *, content_hash: str, fmt: str, title: str, text: str) -> str:
        """Keep a parsed document version; returns `parsed`, or `duplicate` when the current version of
        the key already has this content (nothing downstream needs to run again for it)."""
        now = utcnow()
        with self.tx() as conn:
            key = conn.execute(select(t.documents.c.key).where(t.documents.c.id == document_id)).scalar_one()
            same = conn.execute(
                select(t.documents.c.id).where(
                    and_(
                        t.documents.c.key == key,
                        t.documents.c.status == "ok",
                        t.documents.c.content_hash == content_hash,
                        t.documents.c.id != document_id,
                    )
                )
            ).first()
            values: dict[str, Any] = {
                "content_hash": content_hash,
                "format": fmt,
                "title": title,
                "processed_at": now,
            }
            if same:
                values.update(status="duplicate", reason="same content as the current version")
            else:
                values.update(status="parsed", text=text, reason=None, quarantine_code=None)
            conn.execute(update(t.documents).where(t.documents.c.id == document_id).values(**values))
            return str(values["status"])

    def parsed_documents(self, batch_id: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(t.documents.c.id, t.documents.c.key, t.documents.c.text).where(
                and_(t.documents.c.batch_id == batch_id, t.documents.c.status == "parsed")
            )
            return [dict(r._mapping) for r in conn.execute(q.order_by(t.documents.c.key))]

    def store_chunks(self, document_id: int, chunk_texts: Sequence[str]) -> str:
        """Make a parsed version current with its chunks, superseding older versions of the key in the same
        transaction (readers never see a key with zero or two current versions). Returns the status."""
        with self.tx() as conn:
            key = conn.execute(select(t.documents.c.key).where(t.documents.c.id == document_id)).scalar_one()
            current = conn.execute(
                select(t.documents.c.id).where(
                    and_(
                        t.documents.c.key == key,
                        t.documents.c.status == "ok",
                        t.documents.c.id != document_id,
                    )
                )
            ).all()
            older = [c.id for c in current if c.id < document_id]
            if older:
                conn.execute(update(t.documents).where(t.documents.c.id.in_(older)).values(status="superseded"))
            # A newer version may have been ingested first (batches can run out of order): this one is stale.
            status = "superseded" if any(c.id > document_id for c in current) else "ok"
            conn.execute(t.chunks.delete().where(t.chunks.c.document_id == document_id))
            if chunk_texts:
                conn.execute(
                    insert(t.chunks),
                    [{"document_id": document_id, "ord": i, "text": c} for i, c in enumerate(chunk_texts)],
                )
            conn.execute(
                update(t.documents).where(t.documents.c.id == document_id).values(status=status, processed_at=utcnow())
            )
            return status

    def corpus_revision(self) -> int:
        """The sequence number of the newest ingested batch: a cheap watermark of the corpus state."""
        with self.tx() as conn:
            q = select(func.max(t.landing_batches.c.seq)).where(t.landing_batches.c.status == "ingested")
            return conn.execute(q).scalar() or 0

    def document_counts(self) -> dict[str, int]:
        with self.tx() as conn:
            rows = conn.execute(select(t.documents.c.status, func.count()).group_by(t.documents.c.status))
            return {r[0]: int(r[1]) for r in rows}

    def iter_current_chunks(self, batch_size: int = 5000) -> Iterator[list[tuple[int, str, str]]]:
        """(chunk_id, document key, text) of every chunk of a current (`ok`) document, in id order."""
        last = 0
        while True:
            with self.tx() as conn:
                rows = conn.execute(
                    select(t.chunks.c.id, t.documents.c.key, t.chunks.c.text)
                    .join(t.documents, t.documents.c.id == t.chunks.c.document_id)
                    .where(and_(t.documents.c.status == "ok", t.chunks.c.id > last))
                    .order_by(t.chunks.c.id)
                    .limit(batch_size)
                ).all()
            if not rows:
                return
            yield [(r.id, r.key, r.text) for r in rows]
            last = rows[-1].id

    def current_chunks(self) -> list[tuple[int, str, str]]:
        out: list[tuple[int, str, str]] = []
        for page in self.iter_current_chunks():
            out.extend(page)
        return out

    # ------------------------------------------------------------------ artifacts
    def put_artifact(self, kind: str, data: bytes, digest: str) -> int:
        with self.tx() as conn:
            row = conn.execute(select(t.artifacts.c.id).where(t.artifacts.c.digest == digest)).first()
            if row:
                return int(row.id)
            res = conn.execute(
                insert(t.artifacts).values(kind=kind, digest=digest, size=len(data), data=data, created_at=utcnow())
            )
            return int(res.inserted_primary_key[0])

    def artifact_digest(self, artifact_id: int) -> str | None:
        with self.tx() as conn:
            return conn.execute(select(t.artifacts.c.digest).where(t.artifacts.c.id == artifact_id)).scalar()

    def get_artifact(self, artifact_id: int) -> bytes:
        with self.tx() as conn:
            return bytes(conn.execute(select(t.artifacts.c.data).where(t.artifacts.c.id == artifact_id)).scalar_one())

    # ------------------------------------------------------------------ model registry
    def register_model(
        self,
        *,
        digest: str,
        artifact_id: int,
        params: dict[str, Any],
        n_documents: int,
        n_chunks: int,
        corpus_revision: int,
        run_id: str | None,
    ) -> tuple[dict[str, Any], bool]:
        """Register a trained model; the same digest maps to the same version (returns created=False)."""
        with self.tx() as conn:
            row = conn.execute(select(t.model_versions).where(t.model_versions.c.digest == digest)).first()
            if row:
                return dict(row._mapping), False
            version = (conn.execute(select(func.max(t.model_versions.c.version))).scalar() or 0) + 1
            values = {
                "version": version,
                "digest": digest,
                "artifact_id": artifact_id,
                "params": params,
                "n_documents": n_documents,
                "n_chunks": n_chunks,
                "corpus_revision": corpus_revision,
                "trained_at": utcnow(),
                "run_id": run_id,
            }
            conn.execute(insert(t.model_versions).values(**values))
            return values, True

    def get_model(self, version: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(select(t.model_versions).where(t.model_versions.c.version == version)).first()
            return dict(row._mapping) if row else None

    def latest_model(self) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(select(t.model_versions).order_by(t.model_versions.c.version.desc()).limit(1)).first()
            return dict(row._mapping) if row else None

    def models(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            return [
                dict(r._mapping) for r in conn.execute(select(t.model_versions).order_by(t.model_versions.c.version))
            ]

    def alias(self, name: str) -> int | None:
        with self.tx() as conn:
            return conn.execute(select(t.aliases.c.target).where(t.aliases.c.name == name)).scalar()

    def set_alias(
        self,
        name: str,
        target: int,
        *,
        actor: str,
        approval_id: str | None = None,
        run_id: str | None = None,
        fence: int | None = None,
    ) -> int | None:
        """Point `name` at `target` with a history row; returns the previous target.

        With `fence`, the write is refused (AliasConflict) when a newer token already wrote the alias.
        """
        now = utcnow()
        with self.tx() as conn:
            row = conn.execute(select(t.aliases).where(t.aliases.c.name == name).with_for_update()).first()
            old = row.target if row else None
            if fence is not None and row is not None and fence < row.fence:
                raise AliasConflict(f"stale write to alias {name!r}: fencing token {fence} is older than {row.fence}")
            new_fence = fence if fence is not None else (row.fence if row else 0)
            if row is None:
                try:
                    conn.execute(insert(t.aliases).values(name=name, target=target, fence=new_fence, updated_at=now))
                except IntegrityError as exc:  # a concurrent first write; caller retries via its own policy
                    raise AliasConflict(f"concurrent first write to alias {name!r}") from exc
            else:
                conn.execute(
                    update(t.aliases)
                    .where(t.aliases.c.name == name)
                    .values(target=target, fence=new_fence, updated_at=now)
                )
            if old != target:
                conn.execute(
                    insert(t.alias_history).values(
                        name=name,
                        old_target=old,
                        new_target=target,
                        approval_id=approval_id,
                        actor=actor,
                        run_id=run_id,
                        changed_at=now,
                    )
                )
            return old

    def remove_alias(self, name: str, *, actor: str, run_id: str | None = None, fence: int | None = None) -> int | None:
        """Remove `name` (fenced like set_alias); returns the target it had."""
        now = utcnow()
        with self.tx() as conn:
            row = conn.execute(select(t.aliases).where(t.aliases.c.name == name).with_for_update()).first()
            if row is None:
                return None
            if fence is not None and fence < row.fence:
                raise AliasConflict(f"stale write to alias {name!r}: fencing token {fence} is older than {row.fence}")
            conn.execute(t.aliases.delete().where(t.aliases.c.name == name))
            conn.execute(
                insert(t.alias_history).values(
                    name=name, old_target=row.target, new_target=None, actor=actor, run_id=run_id, changed_at=now
                )
            )
            return int(row.target)

    def load_saga(self, saga_id: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(select(t.sagas).where(t.sagas.c.id == saga_id)).first()
            return dict(row._mapping) if row else None

    def save_saga(
        self, saga_id: str, *, kind: str, status: str, steps: list[dict[str, Any]], error: str | None, owner: str | None
    ) -> None:
        now = utcnow()
        with self.tx() as conn:
            res = conn.execute(
                update(t.sagas)
                .where(t.sagas.c.id == saga_id)
                .values(status=status, steps=steps, error=error, owner=owner, updated_at=now)
            )
            if not res.rowcount:
                conn.execute(
                    insert(t.sagas).values(
                        id=saga_id,
                        kind=kind,
                        status=status,
                        steps=steps,
                        error=error,
                        owner=owner,
                        created_at=now,
                        updated_at=now,
                    )
                )

    def alias_history(self, name: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(t.alias_history).where(t.alias_history.c.name == name).order_by(t.alias_history.c.id)
            return [dict(r._mapping) for r in conn.execute(q)]

    # ------------------------------------------------------------------ evaluation
    def record_eval_report(self, **values: Any) -> dict[str, Any]:
        values.setdefault("created_at", utcnow())
        with self.tx() as conn:
            res = conn.execute(insert(t.eval_reports).values(**values))
            values["id"] = int(res.inserted_primary_key[0])
            return values

    def latest_eval_report(self, candidate_version: int | None = None) -> dict[str, Any] | None:
        q = select(t.eval_reports).order_by(t.eval_reports.c.id.desc()).limit(1)
        if candidate_version is not None:
            q = q.where(t.eval_reports.c.candidate_version == candidate_version)
        with self.tx() as conn:
            row = conn.execute(q).first()
            return dict(row._mapping) if row else None

    def eval_history(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest report of each of the last `limit` evaluated candidate versions, oldest first."""
        r = t.eval_reports
        newest = select(func.max(r.c.id)).group_by(r.c.candidate_version).scalar_subquery()
        q = select(r.c.candidate_version, r.c.candidate_metrics, r.c.verdict).where(r.c.id.in_(newest))
        with self.tx() as conn:
            rows = [dict(x._mapping) for x in conn.execute(q.order_by(r.c.candidate_version.desc()).limit(limit))]
        return rows[::-1]

    def get_eval_report(self, report_id: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(select(t.eval_reports).where(t.eval_reports.c.id == report_id)).first()
            return dict(row._mapping) if row else None

    # ------------------------------------------------------------------ embeddings and index
    def chunks_missing_embeddings(self, model_version: int, limit: int) -> list[tuple[int, str]]:
        e = t.chunk_embeddings
        with self.tx() as conn:
            rows = conn.execute(
                select(t.chunks.c.id, t.chunks.c.text)
                .join(t.documents, t.documents.c.id == t.chunks.c.document_id)
                .outerjoin(e, and_(e.c.chunk_id == t.chunks.c.id, e.c.model_version == model_version))
                .where(and_(t.documents.c.status == "ok", e.c.chunk_id.is_(None)))
                .order_by(t.chunks.c.id)
                .limit(limit)
            ).all()
            return [(r.id, r.text) for r in rows]

    def put_embeddings(self, model_version: int, rows: Iterable[tuple[int, np.ndarray]]) -> int:
        """Store vectors; a chunk already embedded with this model is left as it is (never written twice)."""
        import numpy as np

        with self.tx() as conn:
            stmt = insert_ignore(t.chunk_embeddings, conn)
            payload = [
                {
                    "chunk_id": cid,
                    "model_version": model_version,
                    "vector": np.asarray(v, dtype="<f4").tobytes(),
                }
                for cid, v in rows
            ]
            if not payload:
                return 0
            res = conn.execute(stmt, payload)
            return int(res.rowcount or 0)

    def embedding_counts(self, model_version: int) -> dict[str, int]:
        e = t.chunk_embeddings
        with self.tx() as conn:
            total = (
                conn.execute(
                    select(func.count())
                    .select_from(t.chunks.join(t.documents, t.documents.c.id == t.chunks.c.document_id))
                    .where(t.documents.c.status == "ok")
                ).scalar()
                or 0
            )
            done = (
                conn.execute(
                    select(func.count())
                    .select_from(
                        e.join(t.chunks, t.chunks.c.id == e.c.chunk_id).join(
                            t.documents, t.documents.c.id == t.chunks.c.document_id
                        )
                    )
                    .where(and_(t.documents.c.status == "ok", e.c.model_version == model_version))
                ).scalar()
                or 0
            )
            return {"current_chunks": int(total), "embedded": int(done)}

    def iter_current_embeddings(
        self, model_version: int, batch_size: int = 5000
    ) -> Iterator[list[tuple[int, str, bytes]]]:
        """(chunk_id, document key, vector bytes) for current chunks embedded with `model_version`."""
        e = t.chunk_embeddings
        last = 0
        while True:
            with self.tx() as conn:
                rows = conn.execute(
                    select(e.c.chunk_id, t.documents.c.key, e.c.vector)
                    .join(t.chunks, t.chunks.c.id == e.c.chunk_id)
                    .join(t.documents, t.documents.c.id == t.chunks.c.document_id)
                    .where(
                        and_(
                            e.c.model_version == model_version,
                            t.documents.c.status == "ok",
                            e.c.chunk_id > last,
                        )
                    )
                    .order_by(e.c.chunk_id)
                    .limit(batch_size)
                ).all()
            if not rows:
                return
            yield [(r.chunk_id, r.key, bytes(r.vector)) for r in rows]
            last = rows[-1].chunk_id

    def chunk_texts(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """chunk id -> (document key, document title, chunk text)."""
        if not chunk_ids:
            return {}
        with self.tx() as conn:
            rows = conn.execute(
                select(t.chunks.c.id, t.documents.c.key, t.documents.c.title, t.chunks.c.text)
                .join(t.documents, t.documents.c.id == t.chunks.c.document_id)
                .where(t.chunks.c.id.in_(list(chunk_ids)))
            )
            return {r.id: (r.key, r.title or r.key, r.text) for r in rows}

    def record_index(
        self, *, model_version: int, corpus_revision: int, n_chunks: int, artifact_id: int, run_id: str | None
    ) -> int:
        with self.tx() as conn:
            res = conn.execute(
                insert(t.retrieval_indexes).values(
                    model_version=model_version,
                    corpus_revision=corpus_revision,
                    n_chunks=n_chunks,
                    artifact_id=artifact_id,
                    created_at=utcnow(),
                    run_id=run_id,
                )
            )
            return int(res.inserted_primary_key[0])

    def get_index(self, index_id: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            row = conn.execute(select(t.retrieval_indexes).where(t.retrieval_indexes.c.id == index_id)).first()
            return dict(row._mapping) if row else None

    def current_index(self) -> dict[str, Any] | None:
        index_id = self.alias("retrieval_index")
        return self.get_index(index_id) if index_id is not None else None

    def record_answers(self, rows: Sequence[dict[str, Any]]) -> None:
        now = utcnow()
        with self.tx() as conn:
            conn.execute(insert(t.answers), [{**r, "created_at": now} for r in rows])

    def latest_answers(self, limit: int = 20) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(t.answers).order_by(t.answers.c.id.desc()).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]
