"""Chunking profiles by digest (shared by every pipeline, like artifacts) and the profile each model version reads."""

from __future__ import annotations

from sqlalchemy import and_, insert, select
from sqlalchemy.exc import IntegrityError

from runtime_ops.pipeline.chunking import ChunkingProfile
from runtime_ops.store import schema as t
from runtime_ops.store.engine import utcnow
from runtime_ops.store.scope import Repository

_P, _M = t.chunking_profiles, t.model_versions
# Profile 1: the character chunking of every chunk cut before profiles existed (migration 0017).
LEGACY_PROFILE_ID = 1


class ChunkingProfiles(Repository):
    def ensure(self, profile: ChunkingProfile) -> int:
        """The id of `profile`, recorded the first time it is seen."""
        digest = profile.digest
        query = select(_P.c.id).where(_P.c.digest == digest)
        with self.tx() as conn:
            found = conn.execute(query).scalar()
            if found is not None:
                return int(found)
        try:
            with self.tx() as conn:
                values = {"digest": digest, "profile": profile.to_json(), "created_at": utcnow()}
                res = conn.execute(insert(_P).values(**values))
                assert res.inserted_primary_key is not None  # a one-row insert always has its key
                return int(res.inserted_primary_key[0])
        except IntegrityError:  # recorded meanwhile by another process
            with self.tx() as conn:
                return int(conn.execute(query).scalar_one())

    def get(self, profile_id: int) -> ChunkingProfile:
        with self.tx() as conn:
            data = conn.execute(select(_P.c.profile).where(_P.c.id == profile_id)).scalar()
        if data is None:
            raise LookupError(f"chunking profile {profile_id} is not in the state store")
        return ChunkingProfile.from_json(data)

    def of_model(self, version: int) -> int:
        """The id of the profile whose chunks model `version` (of the scope) reads."""
        with self.tx() as conn:
            found = conn.execute(
                select(_M.c.chunking_profile_id).where(and_(_M.c.version == version, self.owned(_M)))
            ).scalar()
        if found is None:
            raise LookupError(f"model version {version} is not in the registry")
        return int(found)

    def models_by_profile(self, versions: list[int]) -> dict[int, int]:
        """version -> profile id of those model versions (of the scope)."""
        if not versions:
            return {}
        with self.tx() as conn:
            rows = conn.execute(
                select(_M.c.version, _M.c.chunking_profile_id).where(and_(_M.c.version.in_(versions), self.owned(_M)))
            ).all()
        return {int(v): int(p) for v, p in rows}
