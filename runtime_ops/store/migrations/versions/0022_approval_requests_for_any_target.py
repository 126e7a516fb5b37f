"""approval_requests for any gated asset, not only a model promotion: `target` (the gated asset's label, e.g.
"scoring/ticket_labels" or "scoring/ticket_labels[2026-12-01]"; NULL for a model promotion, which every existing
row is) and `evidence` (the materialization's metadata shown to approvers); `candidate_version` and
`eval_report_id` become nullable, since an asset's materialization has neither. `candidate_digest` keeps its
meaning: the digest of what is approved.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

# SQLite's foreign keys are unnamed: batch mode names them by this convention when it copies the table.
NAMING = {"fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s"}


def upgrade() -> None:
    with op.batch_alter_table("approval_requests", naming_convention=NAMING) as batch:
        batch.add_column(sa.Column("target", sa.String(512), nullable=True))
        batch.add_column(sa.Column("evidence", sa.JSON(), nullable=True))
        batch.alter_column("candidate_version", existing_type=sa.Integer(), nullable=True)
        batch.alter_column("eval_report_id", existing_type=sa.Integer(), nullable=True)


def downgrade() -> None:
    gated = op.get_bind().execute(sa.text("SELECT id FROM approval_requests WHERE target IS NOT NULL LIMIT 1")).scalar()
    if gated is not None:
        # Before 0022 a request was always a model promotion: an asset gate's request has no model to name.
        raise RuntimeError(
            f"cannot downgrade below 0022: approval request {gated} gates an asset, not a model (delete the asset "
            "gates' requests first, or stay on 0022)"
        )
    with op.batch_alter_table("approval_requests", naming_convention=NAMING) as batch:
        batch.alter_column("eval_report_id", existing_type=sa.Integer(), nullable=False)
        batch.alter_column("candidate_version", existing_type=sa.Integer(), nullable=False)
        batch.drop_column("evidence")
        batch.drop_column("target")
