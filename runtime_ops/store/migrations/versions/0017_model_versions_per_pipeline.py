"""model versions per pipeline: a model is (pipeline, version), numbered v1, v2, ... in each pipeline.

Existing rows keep their numbers (globally unique until now, so unique per pipeline too). The primary key of
model_versions becomes (pipeline, version), and the rows that name a model (evaluation reports, approval requests,
retrieval indexes, drift signals) refer to it by (pipeline, version). chunk_embeddings has no pipeline column (its
chunk's document holds it): its foreign key on the version alone is dropped, not replaced.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 10:00:00.000000
"""

from __future__ import annotations

import warnings

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# (table, column) of every row that names a model version, and whether the table carries `pipeline` (then it refers
# to (pipeline, version); otherwise its key on the version alone goes and none replaces it).
REFERENCES = (
    ("eval_reports", "candidate_version", True),
    ("eval_reports", "production_version", True),
    ("approval_requests", "candidate_version", True),
    ("retrieval_indexes", "model_version", True),
    ("drift_signals", "model_version", True),
    ("chunk_embeddings", "model_version", False),
)
# SQLite's foreign and primary keys are unnamed: reflection names them by this convention, so batch mode can drop
# them.
NAMING = {"fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s", "pk": "pk_%(table_name)s"}
PER_PIPELINE = ["pipeline", "version"]


def _global_fk(table: str, column: str) -> str:
    """The name of `table`'s foreign key from `column` to model_versions.version."""
    for fk in sa.inspect(op.get_bind()).get_foreign_keys(table):
        if fk["referred_table"] == "model_versions" and list(fk["constrained_columns"]) == [column] and fk.get("name"):
            return str(fk["name"])
    return f"fk_{table}_{column}_model_versions"  # unnamed (SQLite): the naming convention's name


def _pipeline_fk(table: str, column: str) -> str:
    return f"fk_{table}_{column}_model"


def _model_key(columns: list[str]) -> None:
    """model_versions' primary key on `columns`."""
    bind = op.get_bind()
    old = sa.inspect(bind).get_pk_constraint("model_versions").get("name") or "pk_model_versions"
    with warnings.catch_warnings():
        # SQLite's batch copy reflects the old key, then takes the new one (and says so): that is the intent.
        warnings.filterwarnings("ignore", message=".*specifies columns .* as primary_key=True")
        with op.batch_alter_table("model_versions", naming_convention=NAMING) as batch:
            if bind.dialect.name != "sqlite":
                batch.drop_constraint(str(old), type_="primary")
            batch.create_primary_key("pk_model_versions", columns)


def _rekey(new: list[str]) -> None:
    """Move model_versions' primary key to the `new` columns, and every reference with it. In three steps, each
    leaving valid keys behind (SQLite refuses to write a table whose foreign key names no key of its parent, and
    PostgreSQL to drop a key a foreign key uses): references go, the key moves, references come back."""
    per_pipeline = new == PER_PIPELINE
    for table, column, has_pipeline in REFERENCES:
        if has_pipeline or per_pipeline:
            name = _global_fk(table, column) if per_pipeline else _pipeline_fk(table, column)
            with op.batch_alter_table(table, naming_convention=NAMING) as batch:
                batch.drop_constraint(name, type_="foreignkey")
    _model_key(new)
    for table, column, has_pipeline in REFERENCES:
        if per_pipeline and not has_pipeline:
            continue  # chunk_embeddings: no pipeline column to refer with
        with op.batch_alter_table(table, naming_convention=NAMING) as batch:
            if per_pipeline:
                batch.create_foreign_key(_pipeline_fk(table, column), "model_versions", ["pipeline", column], new)
            else:
                batch.create_foreign_key(_global_fk(table, column), "model_versions", [column], new)


def upgrade() -> None:
    _rekey(PER_PIPELINE)
    if op.get_bind().dialect.name == "postgresql":
        # The version was a SERIAL, one sequence for every pipeline: versions are now given per pipeline.
        op.alter_column("model_versions", "version", server_default=None)
        op.execute("DROP SEQUENCE IF EXISTS model_versions_version_seq")


def downgrade() -> None:
    clash = (
        op.get_bind()
        .execute(sa.text("SELECT version FROM model_versions GROUP BY version HAVING count(*) > 1 LIMIT 1"))
        .scalar()
    )
    if clash is not None:
        raise RuntimeError(
            f"cannot downgrade below 0017: model version {clash} exists in several pipelines (before 0017 a version "
            "number was global)"
        )
    _rekey(["version"])
