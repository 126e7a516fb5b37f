"""pipelines: several retrieval pipelines share one state store; every pipeline-owned row carries `pipeline`
(existing rows belong to 'demo'), and uniqueness is per pipeline.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 20:30:00.000000
"""

from __future__ import annotations

import warnings

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

DEFAULT = "demo"
OWNED = (
    "landing_batches",
    "documents",
    "model_versions",
    "eval_reports",
    "aliases",
    "alias_history",
    "approval_requests",
    "sagas",
    "retrieval_indexes",
    "answers",
    "alerts",
    "effects",
)
# table -> (old unique columns, new constraint name): the old ones were unnamed on SQLite (named by PostgreSQL).
UNIQUES = {
    "landing_batches": (["seq"], "uq_landing_batches_pipeline_seq"),
    "documents": (["key", "version"], "uq_documents_pipeline_key_version"),
    "model_versions": (["digest"], "uq_model_versions_pipeline_digest"),
    "approval_requests": (["candidate_digest"], "uq_approval_requests_pipeline_candidate_digest"),
}
PRIMARY_KEYS = {"aliases": ["name"], "effects": ["key"]}
# Reflection names SQLite's unnamed constraints by this convention, so batch mode can drop them.
NAMING = {"uq": "uq_%(table_name)s_%(column_0_N_name)s", "pk": "pk_%(table_name)s"}


def _unique_name(table: str, columns: list[str]) -> str:
    for uq in sa.inspect(op.get_bind()).get_unique_constraints(table):
        if list(uq["column_names"]) == columns and uq.get("name"):
            return str(uq["name"])
    return f"uq_{table}_{'_'.join(columns)}"  # unnamed (SQLite): the naming convention's name


def _pk_name(table: str) -> str:
    return str(sa.inspect(op.get_bind()).get_pk_constraint(table).get("name") or f"pk_{table}")


def _replace_primary_key(table: str, columns: list[str]) -> None:
    old = _pk_name(table)
    with warnings.catch_warnings():
        # SQLite's batch copy reflects the old key, then takes the new one (and says so): that is the intent.
        warnings.filterwarnings("ignore", message=".*specifies columns .* as primary_key=True")
        with op.batch_alter_table(table, naming_convention=NAMING) as batch:
            if op.get_bind().dialect.name != "sqlite":
                batch.drop_constraint(old, type_="primary")
            batch.create_primary_key(f"pk_{table}", columns)


def upgrade() -> None:
    for table in OWNED:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("pipeline", sa.String(length=64), nullable=False, server_default=DEFAULT))
    for table, (columns, name) in UNIQUES.items():
        old = _unique_name(table, columns)
        with op.batch_alter_table(table, naming_convention=NAMING) as batch:
            batch.drop_constraint(old, type_="unique")
            batch.create_unique_constraint(name, ["pipeline", *columns])
    for table, columns in PRIMARY_KEYS.items():
        _replace_primary_key(table, ["pipeline", *columns])


def downgrade() -> None:
    for table, columns in PRIMARY_KEYS.items():
        _replace_primary_key(table, columns)
    for table, (columns, name) in UNIQUES.items():
        with op.batch_alter_table(table, naming_convention=NAMING) as batch:
            batch.drop_constraint(name, type_="unique")
            batch.create_unique_constraint(f"uq_{table}_{'_'.join(columns)}", columns)
    for table in OWNED:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("pipeline")
