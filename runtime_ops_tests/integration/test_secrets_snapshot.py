"""Secrets inside connection URLs never reach what Dagster stores and renders: the repository snapshot the code
server hands to the webserver (the UI, GraphQL) names the environment variable instead."""

from __future__ import annotations

from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._serdes import serialize_value

from runtime_ops.definitions import build_definitions
from runtime_ops.settings import load_settings

DB_PASSWORD = "db-Pa55-0f1a7c"
REDIS_PASSWORD = "redis-Pa55-9b2e4d"
INFERENCE_KEY = "sk-inference-Pa55-5c3d"


def test_repository_snapshot_holds_no_url_password(env, postgres_server, redis_server) -> None:
    database_url = postgres_server.url_for("postgres").replace("//postgres@", f"//postgres:{DB_PASSWORD}@", 1)
    redis_url = redis_server.url.replace("redis://", f"redis://:{REDIS_PASSWORD}@", 1)
    env(database_url=database_url, REDIS_URL=redis_url, RUNTIME_OPS_INFERENCE_API_KEY=INFERENCE_KEY)
    defs = build_definitions(load_settings())
    repo = defs.get_repository_def()
    snapshot = serialize_value(RepositorySnap.from_def(repo))
    assert DB_PASSWORD not in snapshot and REDIS_PASSWORD not in snapshot and INFERENCE_KEY not in snapshot
    # The resources point at the variables, read when a run uses them.
    assert "RUNTIME_OPS_DATABASE_URL" in snapshot and "REDIS_URL" in snapshot
    state = defs.resources["state"]
    assert state.database_url.env_var_name == "RUNTIME_OPS_DATABASE_URL"  # type: ignore[union-attr]
    inference = defs.resources["inference"]
    assert inference.api_key.env_var_name == "RUNTIME_OPS_INFERENCE_API_KEY"  # type: ignore[union-attr]
