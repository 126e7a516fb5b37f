"""Retrieval indexes (one per model version and corpus revision) and the pipeline's current one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, and_, insert, select

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.registry import Registry
from runtime_ops.store.scope import Repository, row_dict

_I = t.retrieval_indexes


class Indexes(Repository):
    def __init__(self, engine: Engine, pipeline: str | None, registry: Registry) -> None:
        super().__init__(engine, pipeline)
        self._registry = registry

    def record_index(
        self, *, model_version: int, corpus_revision: int, n_chunks: int, artifact_id: int, run_id: str | None
    ) -> int:
        pipeline = self.owner("record a retrieval index")
        with self.tx() as conn:
            res = conn.execute(
                insert(_I).values(
                    pipeline=pipeline,
                    model_version=model_version,
                    corpus_revision=corpus_revision,
                    n_chunks=n_chunks,
                    artifact_id=artifact_id,
                    created_at=utcnow(),
                    run_id=run_id,
                )
            )
            assert res.inserted_primary_key is not None  # a one-row insert always has its key
            return int(res.inserted_primary_key[0])

    def get_index(self, index_id: int) -> dict[str, Any] | None:
        with self.tx() as conn:
            return row_dict(conn.execute(select(_I).where(and_(_I.c.id == index_id, self.owned(_I)))).first())

    def current_index(self) -> dict[str, Any] | None:
        """The index the scope's `retrieval_index` alias points at."""
        index_id = self._registry.alias("retrieval_index")
        return self.get_index(index_id) if index_id is not None else None
