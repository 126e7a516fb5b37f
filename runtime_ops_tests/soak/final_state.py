"""The state a soak's deployment ended in, read once the faults have stopped and the work has drained: the
ledger, approvals and votes, production and the serving index, the audit log (and `runtime-ops audit verify`),
feedback, alerts, and Dagster's runs. Reads go to PostgreSQL directly, not through the fault proxy."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from runtime_ops_tests.soak.history import Final

__all__ = ["PIPELINE", "read_final", "unfinished_runs"]

PIPELINE = "demo"
BIN = Path(sys.executable).parent


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return value.astimezone(UTC).replace(microsecond=0).isoformat()
    return str(value)


def _rows(conn: Any, sql: str, **params: Any) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(text(sql), params)]


def read_final(database_url: str, instance: Any, env: dict[str, str]) -> Final:
    """`database_url`: the state store, directly; `instance`: the deployment's DagsterInstance; `env`: the
    environment `runtime-ops audit verify` runs with (the deployment's, with the direct database URL)."""
    engine = create_engine(database_url.replace("postgresql://", "postgresql+psycopg2://", 1))
    p = {"p": PIPELINE}
    try:
        with engine.connect() as conn:
            final = Final(
                documents=_rows(
                    conn, "select id, key, version, status, reason from documents where pipeline = :p order by id", **p
                ),
                requests=[
                    _live_digest(r)
                    for r in _rows(
                        conn,
                        "select r.id, r.candidate_version, r.candidate_digest, r.status, r.kind, r.required_approvals, "
                        "m.digest as model_digest, e.report_digest from approval_requests r "
                        "left join model_versions m on m.pipeline = r.pipeline and m.version = r.candidate_version "
                        "left join eval_reports e on e.id = r.eval_report_id "
                        "where r.pipeline = :p and r.target is null",
                        **p,
                    )
                ],
                votes=_rows(
                    conn,
                    "select v.request_id, v.actor, v.vote, v.channel from approval_votes v "
                    "join approval_requests r on r.id = v.request_id where r.pipeline = :p",
                    **p,
                ),
                deliveries=_rows(conn, "select dedupe_key, request_id, outcome from interaction_deliveries"),
                production_changes=_rows(
                    conn,
                    "select id, old_target, new_target, approval_id, actor, run_id "
                    "from alias_history where pipeline = :p and name = 'production' "
                    "order by id",
                    **p,
                ),
                feedback=_rows(conn, "select request_id, chunk_id, signal from feedback"),
                alerts=[
                    {**a, "starts_at": _iso(a["starts_at"])}
                    for a in _rows(conn, "select fingerprint, starts_at, status from alerts")
                ],
            )
            aliases = {
                r["name"]: r["target"] for r in _rows(conn, "select name, target from aliases where pipeline = :p", **p)
            }
            final.production = aliases.get("production")
            index = aliases.get("retrieval_index")
            if index is not None:
                [row] = _rows(conn, "select model_version from retrieval_indexes where id = :i", i=index)
                final.serving_version = row["model_version"]
            final.audit_production = _audit_production(conn)
    finally:
        engine.dispose()
    done = subprocess.run(
        [str(BIN / "runtime-ops"), "audit", "verify"], capture_output=True, text=True, env=env, timeout=300
    )
    final.audit_verified = done.returncode == 0
    final.audit_detail = (done.stdout + done.stderr).strip()[-2000:]
    final.unfinished_runs = unfinished_runs(instance)
    return final


def _live_digest(request: dict[str, Any]) -> dict[str, Any]:
    """The request with `live_digest`: the digest of the model now registered as its candidate and of its report
    (what a promotion would put live), to hold against the `candidate_digest` that was approved."""
    from runtime_ops.policies.digests import candidate_digest

    model, report = request.pop("model_digest"), request.pop("report_digest")
    request["live_digest"] = candidate_digest(model, report) if model and report else None
    return request


def _audit_production(conn: Any) -> int | None:
    """The version production is on by the audit log: the newest promotion, unless a retraction undid it."""
    records = _rows(
        conn, "select event, detail from audit_log where event in ('promoted', 'promotion_retracted') order by id"
    )
    current: Any = None
    previous: dict[Any, Any] = {}
    for record in records:
        detail = record["detail"] or {}
        version = detail.get("version")
        if record["event"] == "promoted":
            previous[version] = current if detail.get("previous") is None else detail.get("previous")
            current = version
        elif version == current:
            current = previous.get(version)
    return current


def unfinished_runs(instance: Any) -> list[dict[str, Any]]:
    from dagster import DagsterRunStatus, RunsFilter

    runs = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]))
    return [{"run_id": r.run_id, "job": r.job_name, "status": r.status.value} for r in runs]
