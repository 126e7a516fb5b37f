"""vector indexes and the corpus change feed: retrieval_indexes rows become vector indexes (backend, location,
dim, synced_seq, status; artifact optional), corpus_changes (documents that became or stopped being current, in
commit order per pipeline) and change_counters

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("retrieval_indexes") as batch:
        batch.alter_column("artifact_id", existing_type=sa.Integer(), nullable=True)
        batch.add_column(sa.Column("backend", sa.String(length=16), nullable=False, server_default="blob"))
        batch.add_column(sa.Column("location", sa.String(length=1024), nullable=False, server_default=""))
        batch.add_column(sa.Column("dim", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("synced_seq", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("status", sa.String(length=16), nullable=False, server_default="ready"))
        batch.add_column(sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_retrieval_indexes_pipeline_version", "retrieval_indexes", ["pipeline", "model_version"])
    op.create_table(
        "corpus_changes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("pipeline", sa.String(length=64), nullable=False, server_default="demo"),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("document_id", sa.Integer(), nullable=False),
        sa.Column("op", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("pipeline", "seq", name="uq_corpus_changes_pipeline_seq"),
    )
    op.create_table(
        "change_counters",
        sa.Column("pipeline", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("pipeline"),
    )


def downgrade() -> None:
    op.drop_table("change_counters")
    op.drop_table("corpus_changes")
    op.drop_index("ix_retrieval_indexes_pipeline_version", table_name="retrieval_indexes")
    with op.batch_alter_table("retrieval_indexes") as batch:
        for name in ("updated_at", "status", "synced_seq", "dim", "location", "backend"):
            batch.drop_column(name)
        batch.alter_column("artifact_id", existing_type=sa.Integer(), nullable=False)
