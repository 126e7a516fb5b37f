"""Content-addressed blobs (trained models, retrieval indexes): shared by every pipeline, keyed by digest."""

from __future__ import annotations

from sqlalchemy import insert, select

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository

_A = t.artifacts


class Artifacts(Repository):
    def put_artifact(self, kind: str, data: bytes, digest: str) -> int:
        with self.tx() as conn:
            row = conn.execute(select(_A.c.id).where(_A.c.digest == digest)).first()
            if row:
                return int(row.id)
            res = conn.execute(
                insert(_A).values(kind=kind, digest=digest, size=len(data), data=data, created_at=utcnow())
            )
            assert res.inserted_primary_key is not None  # a one-row insert always has its key
            return int(res.inserted_primary_key[0])

    def artifact_digest(self, artifact_id: int) -> str | None:
        with self.tx() as conn:
            return conn.execute(select(_A.c.digest).where(_A.c.id == artifact_id)).scalar()

    def get_artifact(self, artifact_id: int) -> bytes:
        with self.tx() as conn:
            return bytes(conn.execute(select(_A.c.data).where(_A.c.id == artifact_id)).scalar_one())
