"""The model registry of a pipeline: model versions (numbered per pipeline: a model is (pipeline, version)), named
aliases (`production`, `candidate`, `retrieval_index`, ...) with their history, and fenced alias writes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository, row_dict
from runtime_ops.tags import PRODUCTION_ALIAS, PRODUCTION_QUERIES_ALIAS, QUESTION_SET_ALIAS, SERVING_INDEX_ALIAS

_M, _AL, _H = t.model_versions, t.aliases, t.alias_history
# Aliases whose target is a retrieval index id; every other alias points at a model version.
INDEX_ALIASES = frozenset({SERVING_INDEX_ALIAS})
# Aliases that point at an artifact id (the current evaluation question set, the set of production queries).
ARTIFACT_ALIASES = frozenset({QUESTION_SET_ALIAS, PRODUCTION_QUERIES_ALIAS})
# Aliases only the holder of the pipeline's promotion lock writes: every write carries the lease's fencing token.
FENCED_ALIASES = frozenset({PRODUCTION_ALIAS, SERVING_INDEX_ALIAS})


class AliasConflict(RuntimeError):
    """A fenced alias write carried a token older than the last accepted one."""


class ForeignTarget(ValueError):
    """An alias write whose target (model version or index) belongs to another pipeline."""


class UnfencedWrite(ValueError):
    """A write to a fenced alias (`production`, `retrieval_index`) without a fencing token."""


def _require_fence(pipeline: str, name: str, fence: int | None) -> None:
    if fence is None and name in FENCED_ALIASES:
        raise UnfencedWrite(
            f"refusing to write alias {name!r} of pipeline {pipeline!r} without a fencing token: a fencing token is "
            f"required (hold the pipeline's promotion lock, {pipeline}:promotion, and pass fence=lease.fence)"
        )


def _alias_row(conn: Connection, pipeline: str, name: str) -> Any:
    return conn.execute(
        select(_AL).where(and_(_AL.c.pipeline == pipeline, _AL.c.name == name)).with_for_update()
    ).first()


def _check_target(conn: Connection, pipeline: str, name: str, target: int) -> None:
    if name in ARTIFACT_ALIASES:
        return  # artifacts are content-addressed and shared: any pipeline may point at one
    if name in INDEX_ALIASES:
        table, key, what = t.retrieval_indexes, t.retrieval_indexes.c.id, "retrieval index"
    else:
        table, key, what = _M, _M.c.version, "model version"
    # Index ids are global; a model version number exists in every pipeline that has trained that many models, so
    # only a target the pipeline lacks and another one has is another pipeline's.
    owners = set(conn.execute(select(table.c.pipeline).where(key == target)).scalars())
    if owners and pipeline not in owners:
        raise ForeignTarget(
            f"alias {name!r} of pipeline {pipeline!r} cannot point at {what} {target}: it belongs to pipeline "
            f"{', '.join(repr(o) for o in sorted(owners))}"
        )


# Told, inside the alias write's transaction, that production moved (old, new, actor): what depends on production as
# it was (a rollout comparing a candidate with it) ends with the same commit.
# (transaction, old production, new production, actor, the approval request behind the move)
ProductionMoved = Callable[[Connection, int | None, int | None, str, str | None], None]


class Registry(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, on_production_move: ProductionMoved | None = None) -> None:
        super().__init__(engine, pipeline)
        self._on_production_move = on_production_move

    def _moved(
        self, conn: Connection, name: str, old: int | None, new: int | None, actor: str, approval_id: str | None = None
    ) -> None:
        if name == PRODUCTION_ALIAS and old != new and self._on_production_move is not None:
            self._on_production_move(conn, old, new, actor, approval_id)

    # ------------------------------------------------------------------ model versions
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
        chunking_profile: int = 1,
    ) -> tuple[dict[str, Any], bool]:
        """Register a trained model reading the chunks of `chunking_profile` (1: the character chunking of old) as the
        pipeline's next version (v1 for its first); the same digest maps to the same version (returns created=False)."""
        pipeline = self.owner("register a model")
        with self.tx() as conn:
            row = conn.execute(select(_M).where(and_(_M.c.pipeline == pipeline, _M.c.digest == digest))).first()
            if row:
                return dict(row._mapping), False
            newest = select(func.max(_M.c.version)).where(_M.c.pipeline == pipeline)
            version = (conn.execute(newest).scalar() or 0) + 1
            values = {
                "version": version,
                "pipeline": pipeline,
                "digest": digest,
                "artifact_id": artifact_id,
                "params": params,
                "n_documents": n_documents,
                "n_chunks": n_chunks,
                "corpus_revision": corpus_revision,
                "trained_at": utcnow(),
                "run_id": run_id,
                "chunking_profile_id": chunking_profile,
            }
            conn.execute(insert(_M).values(**values))
            return values, True

    def get_model(self, version: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            return row_dict(conn.execute(select(_M).where(and_(_M.c.version == version, self.versioned(_M)))).first())

    def latest_model(self) -> dict[str, Any] | None:
        with self.tx() as conn:
            q = select(_M).where(self.versioned(_M)).order_by(_M.c.version.desc()).limit(1)
            return row_dict(conn.execute(q).first())

    def models(self) -> list[dict[str, Any]]:
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(select(_M).where(self.owned(_M)).order_by(_M.c.version))]

    # ------------------------------------------------------------------ aliases
    def alias(self, name: str) -> int | None:
        """The target of the scope's alias `name`. An unscoped store has one per pipeline: use `aliases(name)`."""
        pipeline = self.owner("read an alias")
        with self.tx() as conn:
            return conn.execute(
                select(_AL.c.target).where(and_(_AL.c.pipeline == pipeline, _AL.c.name == name))
            ).scalar()

    def aliases(self, name: str | None = None) -> list[dict[str, Any]]:
        """Alias rows of the scope (every pipeline's when unscoped), optionally of one name."""
        q = select(_AL).where(self.owned(_AL)).order_by(_AL.c.pipeline, _AL.c.name)
        if name is not None:
            q = q.where(_AL.c.name == name)
        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

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

        With `fence`, the write is refused (AliasConflict) when a newer token already wrote the alias; `production`
        and `retrieval_index` are refused without one (UnfencedWrite). A target that belongs to another pipeline is
        refused (ForeignTarget).
        """
        pipeline = self.owner(f"set alias {name!r}")
        _require_fence(pipeline, name, fence)
        now = utcnow()
        with self.tx() as conn:
            _check_target(conn, pipeline, name, target)
            row = _alias_row(conn, pipeline, name)
            old = row.target if row else None
            if fence is not None and row is not None and fence < row.fence:
                raise AliasConflict(f"stale write to alias {name!r}: fencing token {fence} is older than {row.fence}")
            new_fence = fence if fence is not None else (row.fence if row else 0)
            if row is None:
                try:
                    conn.execute(
                        insert(_AL).values(pipeline=pipeline, name=name, target=target, fence=new_fence, updated_at=now)
                    )
                except IntegrityError as exc:  # a concurrent first write; caller retries via its own policy
                    raise AliasConflict(f"concurrent first write to alias {name!r}") from exc
            else:
                conn.execute(
                    update(_AL)
                    .where(and_(_AL.c.pipeline == pipeline, _AL.c.name == name))
                    .values(target=target, fence=new_fence, updated_at=now)
                )
            if old != target:
                conn.execute(
                    insert(_H).values(
                        pipeline=pipeline,
                        name=name,
                        old_target=old,
                        new_target=target,
                        approval_id=approval_id,
                        actor=actor,
                        run_id=run_id,
                        changed_at=now,
                    )
                )
                self._moved(conn, name, old, target, actor, approval_id)
            return old

    def remove_alias(self, name: str, *, actor: str, run_id: str | None = None, fence: int | None = None) -> int | None:
        """Remove `name` (fenced like set_alias); returns the target it had."""
        pipeline = self.owner(f"remove alias {name!r}")
        _require_fence(pipeline, name, fence)
        now = utcnow()
        with self.tx() as conn:
            row = _alias_row(conn, pipeline, name)
            if row is None:
                return None
            if fence is not None and fence < row.fence:
                raise AliasConflict(f"stale write to alias {name!r}: fencing token {fence} is older than {row.fence}")
            conn.execute(_AL.delete().where(and_(_AL.c.pipeline == pipeline, _AL.c.name == name)))
            conn.execute(
                insert(_H).values(
                    pipeline=pipeline,
                    name=name,
                    old_target=row.target,
                    new_target=None,
                    actor=actor,
                    run_id=run_id,
                    changed_at=now,
                )
            )
            self._moved(conn, name, int(row.target), None, actor)
            return int(row.target)

    def alias_history(self, name: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_H).where(and_(_H.c.name == name, self.owned(_H))).order_by(_H.c.id)
            return [dict(r._mapping) for r in conn.execute(q)]


def remove_alias_compensation(alias: str) -> Any:
    """A compensation that removes `alias` (of the request's pipeline) when it still points at the request's
    candidate."""

    def compensate(conn: Connection, request: dict[str, Any], now: datetime) -> dict[str, Any]:
        pipeline = request["pipeline"]
        row = _alias_row(conn, pipeline, alias)
        if row is None or row.target != request["candidate_version"]:
            return {"alias": alias, "removed": False, "why": "alias no longer points at this candidate"}
        conn.execute(delete(_AL).where(and_(_AL.c.pipeline == pipeline, _AL.c.name == alias)))
        conn.execute(
            insert(_H).values(
                pipeline=pipeline,
                name=alias,
                old_target=row.target,
                new_target=0,
                approval_id=request["id"],
                actor="compensation",
                run_id=None,
                changed_at=now,
            )
        )
        return {"alias": alias, "removed": True, "version": row.target}

    return compensate
