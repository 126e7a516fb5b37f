"""chunking profiles: chunks are kept per (document, chunking profile) and every model version records the profile
it reads; existing chunks and models get profile 1, the character chunking (1,200 / 150) they were cut with

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05 10:00:00.000000
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# `runtime_ops.pipeline.chunking.LEGACY`, written out: a migration must not change when the code does (a test checks
# the two agree).
LEGACY_DIGEST = "6ef7b99d9a4c545c879d8fa8599c8524b2977a9caa36d33d5594c02b8089fe9a"
LEGACY_PROFILE = {
    "chunker": 1,
    "measure": {"kind": "chars"},
    "max_tokens": 1200,
    "overlap_tokens": 150,
    "locator": "",
}
NAMING = {"uq": "uq_%(table_name)s_%(column_0_N_name)s", "fk": "fk_%(table_name)s_%(column_0_name)s"}


def upgrade() -> None:
    profiles = op.create_table(
        "chunking_profiles",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("profile", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("digest"),
    )
    op.bulk_insert(
        profiles, [{"id": 1, "digest": LEGACY_DIGEST, "profile": LEGACY_PROFILE, "created_at": datetime.now(UTC)}]
    )
    if op.get_bind().dialect.name == "postgresql":  # an explicit id: move the serial sequence past it
        op.execute("SELECT setval(pg_get_serial_sequence('chunking_profiles', 'id'), 1)")
    with op.batch_alter_table("chunks", naming_convention=NAMING) as batch:
        batch.add_column(sa.Column("profile_id", sa.Integer(), nullable=False, server_default="1"))
        batch.drop_constraint("uq_chunks_document_ord", type_="unique")
        batch.create_unique_constraint("uq_chunks_document_profile_ord", ["document_id", "profile_id", "ord"])
        batch.create_foreign_key("fk_chunks_profile_id", "chunking_profiles", ["profile_id"], ["id"])
    with op.batch_alter_table("model_versions", naming_convention=NAMING) as batch:
        batch.add_column(sa.Column("chunking_profile_id", sa.Integer(), nullable=False, server_default="1"))
        batch.create_foreign_key(
            "fk_model_versions_chunking_profile_id", "chunking_profiles", ["chunking_profile_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("model_versions", naming_convention=NAMING) as batch:
        batch.drop_constraint("fk_model_versions_chunking_profile_id", type_="foreignkey")
        batch.drop_column("chunking_profile_id")
    op.execute("DELETE FROM chunks WHERE profile_id <> 1")
    with op.batch_alter_table("chunks", naming_convention=NAMING) as batch:
        batch.drop_constraint("fk_chunks_profile_id", type_="foreignkey")
        batch.drop_constraint("uq_chunks_document_profile_ord", type_="unique")
        batch.create_unique_constraint("uq_chunks_document_ord", ["document_id", "ord"])
        batch.drop_column("profile_id")
    op.drop_table("chunking_profiles")
