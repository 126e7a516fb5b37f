"""Content-addressed blobs (trained models, question sets): shared by every pipeline, keyed by digest.

Retention releases the blobs of collected model versions: the row stays (model_versions references it, and its
digest and size remain on record) with its data emptied; reading it then raises ArtifactCollected.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import and_, func, insert, select, update

from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository

_A = t.artifacts


class ArtifactCollected(LookupError):
    """The artifact's data was released by retention."""


class Artifacts(Repository):
    def put_artifact(self, kind: str, data: bytes, digest: str) -> int:
        with self.tx() as conn:
            row = conn.execute(
                select(_A.c.id, func.length(_A.c.data).label("held")).where(_A.c.digest == digest)
            ).first()
            if row:
                if not row.held and data:  # released by retention, needed again (the same model trained anew)
                    conn.execute(update(_A).where(_A.c.id == row.id).values(data=data, size=len(data)))
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
            row = conn.execute(select(_A.c.kind, _A.c.size, _A.c.data).where(_A.c.id == artifact_id)).one()
        if row.size and not row.data:
            raise ArtifactCollected(f"artifact #{artifact_id} ({row.kind}) was released by the retention policy")
        return bytes(row.data)

    def release(self, artifact_ids: Iterable[int]) -> int:
        """Empty these artifacts' data (their rows stay); returns the bytes released."""
        ids = sorted({int(i) for i in artifact_ids})
        if not ids:
            return 0
        with self.tx() as conn:
            held = and_(_A.c.id.in_(ids), func.length(_A.c.data) > 0)
            freed = int(conn.execute(select(func.coalesce(func.sum(_A.c.size), 0)).where(held)).scalar_one())
            conn.execute(update(_A).where(held).values(data=b""))
        return freed
