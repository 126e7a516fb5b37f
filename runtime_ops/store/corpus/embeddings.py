"""Chunk embeddings per model version: what is missing, storing vectors once, reading them back by page.

Embeddings hang off chunks (of a pipeline's documents) and model versions: scoped through the documents. A model
version reads the chunks of its own chunking profile only: every read here keeps to them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Select, and_, delete, func, select, true

from runtime_ops.store import schema as t
from runtime_ops.store.engine import upsert
from runtime_ops.store.scope import Repository

if TYPE_CHECKING:  # numpy is imported where embeddings are written: loading the code location never needs it
    import numpy as np

_E, _C, _D, _M = t.chunk_embeddings, t.chunks, t.documents, t.model_versions


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: the chunks whose id is `index` modulo `count`. Shards split a model version's
    embedding work into slices that cover every chunk exactly once and that separate runs can fill side by
    side, each resumable on its own (chunk ids are stable, so a chunk stays in its shard)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"a shard is an index in [0, count) of count >= 1, got {self.index} of {self.count}")

    @property
    def key(self) -> str:
        """The shard's name (shadow_embeddings' partition key), zero-padded so a list of them sorts in order."""
        return f"{self.index:0{len(str(self.count - 1))}d}"


def _in_shard(shard: Shard | None) -> ColumnElement[bool]:
    return true() if shard is None or shard.count == 1 else (_C.c.id % shard.count) == shard.index


class Embeddings(Repository):
    def _of_model(self, model_version: int) -> ColumnElement[bool]:
        """Chunks of the profile `model_version` (of the scope's pipeline) reads."""
        model = and_(_M.c.version == model_version, self.owned(_M))
        return _C.c.profile_id == select(_M.c.chunking_profile_id).where(model).scalar_subquery()

    def chunks_missing_embeddings(
        self, model_version: int, limit: int, *, after: int = 0, shard: Shard | None = None
    ) -> list[tuple[int, str]]:
        """Up to `limit` current chunks with no vector for `model_version`, in id order, with ids above `after`
        (a caller paging through passes the last id it got: each page then starts where the last one ended
        instead of re-scanning every chunk already embedded); with `shard`, only that shard's chunks."""
        with self.tx() as conn:
            rows = conn.execute(
                select(_C.c.id, _C.c.text)
                .join(_D, _D.c.id == _C.c.document_id)
                .outerjoin(_E, and_(_E.c.chunk_id == _C.c.id, _E.c.model_version == model_version))
                .where(
                    and_(
                        _D.c.status == "ok",
                        _E.c.chunk_id.is_(None),
                        _C.c.id > after,
                        self.versioned(_D),
                        _in_shard(shard),
                        self._of_model(model_version),
                    )
                )
                .order_by(_C.c.id)
                .limit(limit)
            ).all()
            return [(r.id, r.text) for r in rows]

    def put_embeddings(self, model_version: int, rows: Iterable[tuple[int, np.ndarray]]) -> int:
        """Store vectors; a chunk already embedded with this model is left as it is (never written twice)."""
        import numpy as np

        payload = [
            {"chunk_id": cid, "model_version": model_version, "vector": np.asarray(v, dtype="<f4").tobytes()}
            for cid, v in rows
        ]
        if not payload:
            return 0
        with self.tx() as conn:
            res = conn.execute(upsert(_E, conn).on_conflict_do_nothing(), payload)
            return int(res.rowcount or 0)

    def embedding_counts(self, model_version: int, *, shard: Shard | None = None) -> dict[str, int]:
        """How many current chunks there are and how many have a vector for `model_version` (of `shard` only)."""
        current = and_(_D.c.status == "ok", self.versioned(_D), _in_shard(shard), self._of_model(model_version))
        with self.tx() as conn:
            total = conn.execute(
                select(func.count()).select_from(_C.join(_D, _D.c.id == _C.c.document_id)).where(current)
            ).scalar()
            done = conn.execute(
                select(func.count())
                .select_from(_E.join(_C, _C.c.id == _E.c.chunk_id).join(_D, _D.c.id == _C.c.document_id))
                .where(and_(current, _E.c.model_version == model_version))
            ).scalar()
            return {"current_chunks": int(total or 0), "embedded": int(done or 0)}

    def _stored_pages(
        self, first: Any, model_version: int, batch_size: int, shard: Shard | None = None
    ) -> Iterator[list[Any]]:
        """Pages of (chunk_id, `first`, vector) of the current chunks (of `shard`) embedded with `model_version`."""

        def page(last: int) -> Select[Any]:
            return (
                select(_E.c.chunk_id, first, _E.c.vector)
                .join(_C, _C.c.id == _E.c.chunk_id)
                .join(_D, _D.c.id == _C.c.document_id)
                .where(
                    and_(
                        _E.c.model_version == model_version,
                        _D.c.status == "ok",
                        _E.c.chunk_id > last,
                        self.versioned(_D),
                        _in_shard(shard),
                        self._of_model(model_version),
                    )
                )
                .order_by(_E.c.chunk_id)
                .limit(batch_size)
            )

        return self.pages(page)

    def iter_current_embeddings(
        self, model_version: int, batch_size: int = 5000
    ) -> Iterator[list[tuple[int, str, bytes]]]:
        """(chunk_id, document key, vector bytes) for current chunks embedded with `model_version`."""
        for rows in self._stored_pages(_D.c.key, model_version, batch_size):
            yield [(r.chunk_id, r.key, bytes(r.vector)) for r in rows]

    def iter_current_chunks_with_vectors(
        self, model_version: int, batch_size: int = 5000
    ) -> Iterator[list[tuple[int, str, str, bytes | None]]]:
        """(chunk_id, document key, text, vector bytes or None) of every current chunk in id order, with its
        vector for `model_version` where one is stored: a reader embeds only the chunks that have none."""

        def page(last: int) -> Select[Any]:
            return (
                select(_C.c.id, _D.c.key, _C.c.text, _E.c.vector)
                .join(_D, _D.c.id == _C.c.document_id)
                .outerjoin(_E, and_(_E.c.chunk_id == _C.c.id, _E.c.model_version == model_version))
                .where(and_(_D.c.status == "ok", _C.c.id > last, self.versioned(_D), self._of_model(model_version)))
                .order_by(_C.c.id)
                .limit(batch_size)
            )

        for rows in self.pages(page):
            yield [(r.id, r.key, r.text, None if r.vector is None else bytes(r.vector)) for r in rows]

    def iter_current_vectors(
        self, model_version: int, batch_size: int = 5000, *, shard: Shard | None = None
    ) -> Iterator[list[tuple[int, int, bytes]]]:
        """(chunk_id, document_id, vector bytes) of current chunks embedded with `model_version` (of `shard`
        only), by page."""
        for rows in self._stored_pages(_C.c.document_id, model_version, batch_size, shard):
            yield [(int(r.chunk_id), int(r.document_id), bytes(r.vector)) for r in rows]

    def chunks_of_documents(
        self, model_version: int, document_ids: Sequence[int]
    ) -> list[tuple[int, int, str, bytes | None]]:
        """(chunk_id, document_id, text, vector bytes or None when not embedded yet) of the chunks of those
        documents that are still current, in chunk order."""
        if not document_ids:
            return []
        with self.tx() as conn:
            rows = conn.execute(
                select(_C.c.id, _C.c.document_id, _C.c.text, _E.c.vector)
                .join(_D, _D.c.id == _C.c.document_id)
                .outerjoin(_E, and_(_E.c.chunk_id == _C.c.id, _E.c.model_version == model_version))
                .where(
                    and_(
                        _C.c.document_id.in_(list(document_ids)),
                        _D.c.status == "ok",
                        self.versioned(_D),
                        self._of_model(model_version),
                    )
                )
                .order_by(_C.c.id)
            ).all()
        return [
            (int(r.id), int(r.document_id), str(r.text), None if r.vector is None else bytes(r.vector)) for r in rows
        ]

    def drop_embeddings(self, model_version: int, *, batch_id: str | None = None) -> int:
        """Delete the stored vectors of `model_version` for one landing batch's chunks (or every chunk of the
        scope), so the next embedding pass recomputes them. Returns how many were deleted."""
        pipeline = self.owner("drop embeddings")
        scope = and_(_D.c.pipeline == pipeline, *([_D.c.batch_id == batch_id] if batch_id is not None else []))
        chunk_ids = select(_C.c.id).join(_D, _D.c.id == _C.c.document_id).where(scope)
        cond = and_(_E.c.model_version == model_version, _E.c.chunk_id.in_(chunk_ids))
        with self.tx() as conn:
            return int(conn.execute(delete(_E).where(cond)).rowcount or 0)
