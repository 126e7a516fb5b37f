-- Runs once, when the PostgreSQL volume is first initialised: runtime_ops' state store gets its own database
-- beside Dagster's (`dagster`, created from POSTGRES_DB), owned by the same user.
CREATE DATABASE runtime_ops;
