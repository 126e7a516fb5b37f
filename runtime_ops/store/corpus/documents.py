"""Documents of the landing ledger and their chunks: parse, quarantine, make current (superseding older
versions of the key), and read the current corpus. Per pipeline: a key is the same document only within it.
A document has one set of chunks per chunking profile in use; reads take the profile (None: every profile)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Select, and_, bindparam, exists, func, insert, select, true, update
from sqlalchemy.engine import Connection

from runtime_ops.store import schema as t
from runtime_ops.store.corpus.changes import ADD, REMOVE, append_changes
from runtime_ops.store.corpus.profiles import LEGACY_PROFILE_ID
from runtime_ops.store.engine import upsert, utcnow
from runtime_ops.store.scope import Repository, row_dict

_D, _C = t.documents, t.chunks
_LISTED = [c for c in _D.c if c.name != "text"]
# Built once: every search request reads its hits' texts, and building the statement costs more than running it.
_TEXTS_ANY = (
    select(_C.c.id, _D.c.key, _D.c.title, _C.c.text, _C.c.document_id, _C.c.ord)
    .join(_D, _D.c.id == _C.c.document_id)
    .where(_C.c.id.in_(bindparam("ids", expanding=True)))
)
_TEXTS = _TEXTS_ANY.where(_D.c.pipeline == bindparam("pipeline"))


class ChunkRow(NamedTuple):
    """A chunk as search shows it: its document's key and title, its text, and where it sits in the document
    (`ord` counts the document's chunks from 0; consecutive ones share their overlap)."""

    key: str
    title: str
    text: str
    document_id: int
    ord: int


def of_profile(profile: int | None) -> ColumnElement[bool]:
    """Chunks of one chunking profile (None: of every profile)."""
    return true() if profile is None else _C.c.profile_id == profile


class Documents(Repository):
    def _key_of(self, conn: Connection, document_id: int, what: str) -> str:
        """The key of one of the scope's documents (NoResultFound for another pipeline's id)."""
        cond = and_(_D.c.id == document_id, _D.c.pipeline == self.owner(what))
        return str(conn.execute(select(_D.c.key).where(cond)).scalar_one())

    def batch_documents(self, batch_id: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(*_LISTED).where(and_(_D.c.batch_id == batch_id, self.owned(_D))).order_by(_D.c.key)
            return [dict(r._mapping) for r in conn.execute(q)]

    def document(self, key: str, version: str) -> dict[str, Any] | None:
        with self.tx() as conn:
            cond = and_(_D.c.key == key, _D.c.version == version, self.owned(_D))
            return row_dict(conn.execute(select(_D).where(cond).order_by(_D.c.id).limit(1)).first())

    def documents_by_status(self, status: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(*_LISTED).where(and_(_D.c.status == status, self.owned(_D))).order_by(_D.c.key)
            return [dict(r._mapping) for r in conn.execute(q)]

    def quarantine(self, document_id: int, code: str, reason: str) -> None:
        cond = and_(_D.c.id == document_id, _D.c.pipeline == self.owner("quarantine a document"))
        with self.tx() as conn:
            conn.execute(
                update(_D)
                .where(cond)
                .values(status="quarantined", quarantine_code=code, reason=reason, processed_at=utcnow())
            )

    def store_parsed(self, document_id: int, *, content_hash: str, fmt: str, title: str, text: str) -> str:
        """Keep a parsed document version; returns `parsed`, or `duplicate` when the current version of
        the key already has this content (nothing downstream needs to run again for it)."""
        now = utcnow()
        with self.tx() as conn:
            key = self._key_of(conn, document_id, "store a parsed document")
            same = conn.execute(
                select(_D.c.id).where(
                    and_(
                        _D.c.pipeline == self.pipeline,
                        _D.c.key == key,
                        _D.c.status == "ok",
                        _D.c.content_hash == content_hash,
                        _D.c.id != document_id,
                    )
                )
            ).first()
            values: dict[str, Any] = {"content_hash": content_hash, "format": fmt, "title": title, "processed_at": now}
            if same:
                values.update(status="duplicate", reason="same content as the current version")
            else:
                values.update(status="parsed", text=text, reason=None, quarantine_code=None)
            conn.execute(update(_D).where(_D.c.id == document_id).values(**values))
            return str(values["status"])

    def parsed_documents(self, batch_id: str) -> list[dict[str, Any]]:
        with self.tx() as conn:
            q = select(_D.c.id, _D.c.pipeline, _D.c.key, _D.c.text).where(
                and_(_D.c.batch_id == batch_id, _D.c.status == "parsed", self.owned(_D))
            )
            return [dict(r._mapping) for r in conn.execute(q.order_by(_D.c.key))]

    def store_chunks(self, document_id: int, chunk_texts: Sequence[str] | Mapping[int, Sequence[str]]) -> str:
        """Make a parsed version current with its chunks (a list: of profile 1; or profile id -> chunks), superseding
        older versions of the key in the same transaction (readers never see a key with zero or two current
        versions). Returns the status."""
        by_profile = chunk_texts if isinstance(chunk_texts, Mapping) else {LEGACY_PROFILE_ID: chunk_texts}
        with self.tx() as conn:
            key = self._key_of(conn, document_id, "store chunks")
            current = conn.execute(
                select(_D.c.id).where(
                    and_(_D.c.pipeline == self.pipeline, _D.c.key == key, _D.c.status == "ok", _D.c.id != document_id)
                )
            ).all()
            older = [c.id for c in current if c.id < document_id]
            if older:
                conn.execute(update(_D).where(_D.c.id.in_(older)).values(status="superseded"))
            # A newer version may have been ingested first (batches can run out of order): this one is stale.
            status = "superseded" if any(c.id > document_id for c in current) else "ok"
            conn.execute(_C.delete().where(_C.c.document_id == document_id))
            rows = [
                {"document_id": document_id, "profile_id": profile, "ord": i, "text": c}
                for profile, texts in sorted(by_profile.items())
                for i, c in enumerate(texts)
            ]
            if rows:
                conn.execute(insert(_C), rows)
            conn.execute(update(_D).where(_D.c.id == document_id).values(status=status, processed_at=utcnow()))
            # What the serving indexes must apply, committed with the change itself.
            changes = [(d, REMOVE) for d in older] + ([(document_id, ADD)] if status == "ok" else [])
            append_changes(conn, self.owner("store chunks"), changes)
            return status

    def add_chunks(self, profile: int, chunks_by_document: Mapping[int, Sequence[str]]) -> int:
        """Give documents their chunks of another profile (a candidate's that cuts differently), in one transaction;
        idempotent: chunks already there stay as they are (chunking is deterministic: a second writer writes the
        same). Returns how many were added."""
        ids = sorted(chunks_by_document)
        rows = [
            {"document_id": d, "profile_id": profile, "ord": i, "text": c}
            for d in ids
            for i, c in enumerate(chunks_by_document[d])
        ]
        if not rows:
            return 0
        with self.tx() as conn:
            cond = and_(_D.c.id.in_(ids), _D.c.pipeline == self.owner("add chunks"))
            owned = {int(i) for i in conn.execute(select(_D.c.id).where(cond)).scalars()}
            if owned != set(ids):
                raise LookupError(f"documents {sorted(set(ids) - owned)} are not pipeline {self.pipeline!r}'s")
            return int(conn.execute(upsert(_C, conn).on_conflict_do_nothing(), rows).rowcount or 0)

    def current_without_chunks(
        self, profile: int, *, limit: int, after: int = 0, document_ids: Sequence[int] | None = None
    ) -> list[tuple[int, str]]:
        """(id, text) of up to `limit` current documents (ids above `after`; of `document_ids` when given) that have
        no chunk of `profile` yet, in id order."""
        if document_ids is not None and not document_ids:
            return []
        chunked = exists().where(and_(_C.c.document_id == _D.c.id, _C.c.profile_id == profile))
        cond = and_(_D.c.status == "ok", _D.c.id > after, ~chunked, self.owned(_D))
        if document_ids is not None:
            cond = and_(cond, _D.c.id.in_(list(document_ids)))
        rows = self.fetch(select(_D.c.id, _D.c.text).where(cond).order_by(_D.c.id).limit(limit))
        return [(int(r.id), str(r.text or "")) for r in rows]

    def remove_key(self, key: str, *, reason: str) -> int | None:
        """The key was deleted at the landing: its current version stops being current (status `deleted`) and
        the serving indexes are told to drop it. Returns that document's id (None: no current version)."""
        pipeline = self.owner("remove a document")
        with self.tx() as conn:
            cond = and_(_D.c.pipeline == pipeline, _D.c.key == key, _D.c.status == "ok")
            ids = [int(i) for i in conn.execute(select(_D.c.id).where(cond)).scalars()]
            if not ids:
                return None
            conn.execute(
                update(_D).where(_D.c.id.in_(ids)).values(status="deleted", reason=reason, processed_at=utcnow())
            )
            append_changes(conn, pipeline, [(d, REMOVE) for d in ids])
            return ids[-1]

    def current_keys_between(self, after: str | None, upto: str | None, *, source: str) -> list[str]:
        """Keys of current documents landed from `source` with after < key <= upto (None: open), in byte order
        (as S3 and the local landing list them; PostgreSQL compares with the C collation)."""
        key = _D.c.key.collate("C") if self.engine.dialect.name == "postgresql" else _D.c.key
        lb = t.landing_batches
        cond = and_(_D.c.status == "ok", self.owned(_D), lb.c.source == source)
        if after is not None:
            cond = and_(cond, key > after)
        if upto is not None:
            cond = and_(cond, key <= upto)
        with self.tx() as conn:
            q = select(_D.c.key).select_from(_D.join(lb, lb.c.id == _D.c.batch_id)).where(cond)
            return [str(k) for k in conn.execute(q).scalars()]

    def document_counts(self) -> dict[str, int]:
        with self.tx() as conn:
            rows = conn.execute(select(_D.c.status, func.count()).where(self.owned(_D)).group_by(_D.c.status))
            return {r[0]: int(r[1]) for r in rows}

    def iter_current_chunks(
        self, batch_size: int = 5000, *, profile: int | None = None
    ) -> Iterator[list[tuple[int, str, str]]]:
        """(chunk_id, document key, text) of every chunk (of `profile`) of a current (`ok`) document, in id order."""

        def page(last: int) -> Select[Any]:
            return (
                select(_C.c.id, _D.c.key, _C.c.text)
                .join(_D, _D.c.id == _C.c.document_id)
                .where(and_(_D.c.status == "ok", _C.c.id > last, self.owned(_D), of_profile(profile)))
                .order_by(_C.c.id)
                .limit(batch_size)
            )

        for rows in self.pages(page):
            yield [(r.id, r.key, r.text) for r in rows]

    def current_chunk_count(self, *, profile: int | None = None) -> int:
        """How many chunks (of `profile`) the current corpus has (of the scope's documents with status ok)."""
        with self.tx() as conn:
            q = select(func.count()).select_from(_C.join(_D, _D.c.id == _C.c.document_id))
            cond = and_(_D.c.status == "ok", self.owned(_D), of_profile(profile))
            return int(conn.execute(q.where(cond)).scalar() or 0)

    def current_chunks(self, *, profile: int | None = None) -> list[tuple[int, str, str]]:
        out: list[tuple[int, str, str]] = []
        for page in self.iter_current_chunks(profile=profile):
            out.extend(page)
        return out

    def chunk_texts(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """chunk id -> (document key, document title, chunk text), for the scope's chunks among `chunk_ids`."""
        return {i: (r.key, r.title, r.text) for i, r in self.chunk_rows(chunk_ids).items()}

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
        """chunk id -> its ChunkRow, for the scope's chunks among `chunk_ids` (one query)."""
        if not chunk_ids:
            return {}
        if self.pipeline is None:
            rows = self.fetch(_TEXTS_ANY, {"ids": list(chunk_ids)})
        else:
            rows = self.fetch(_TEXTS, {"ids": list(chunk_ids), "pipeline": self.pipeline})
        return {r.id: ChunkRow(r.key, r.title or r.key, r.text, int(r.document_id), int(r.ord)) for r in rows}
