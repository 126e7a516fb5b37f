-- Runs once, when the PostgreSQL volume is first initialised: runtime_ops' state store gets its own database
-- beside Dagster's (`dagster`, created from POSTGRES_DB), owned by the same user.
CREATE DATABASE runtime_ops;
-- The vector indexes live in the state store's database (RUNTIME_OPS_VECTOR_STORE): enable pgvector there.
\connect runtime_ops
CREATE EXTENSION IF NOT EXISTS vector;
