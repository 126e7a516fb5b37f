"""Signed Slack interactions against the real ops API vs. a bare FastAPI endpoint doing one INSERT.

Both servers run as their own uvicorn process (one worker each) on 127.0.0.1 against the same throwaway
PostgreSQL, and receive the same signed form bodies from 50 concurrent keep-alive clients:

- ours: `POST /slack/interactions` - slack_sdk signature verification over the raw body, block_actions
  parsing, then `store.votes.cast_vote` (one transaction: request row lock, vote, hash-chained audit record,
  delivery dedupe row).
- baseline: `POST /insert` in `bench/bare_app.py` - read the body, one INSERT.

The two are measured alternately, ROUNDS times each; throughput is all successful responses over all measured
time, latency percentiles are over all measured requests, and the per-round ratios are kept as a noise check.

Every click is a distinct, authorised attempt that is counted: 200 pending requests with a policy that
needs more approvals than the run sends, clicks spread round-robin over them, each from a user who has
not voted on that request yet. After the run the state store is checked: one vote per click.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections import Counter
from typing import Any

from bench.common import (
    BenchResult,
    Call,
    LoadStats,
    Target,
    UvicornServer,
    benchmark,
    combine,
    run_closed_loop,
    server_env,
)

CONCURRENCY = 50
PENDING_REQUESTS = 200
ROUNDS = 2  # baseline, ours, baseline, ours: drift on a shared machine hits both sides alike
WARMUP = 300  # per server and round, not measured
MEASURED = 4000  # per server and round
MAX_SECONDS = 25.0  # per server and round: the measured phase stops early past this
THROUGHPUT_RATIO_TARGET = 0.5
P99_TARGET_MS = 50.0
CLIENT = os.environ.get("BENCH_CLIENT", "raw")  # "httpx" to cross-check the load generator (see run_closed_loop)

SIGNING_SECRET = "bench-signing-secret-0123456789abcdef"
LINK_SECRET = "bench-link-secret-0123456789abcdef"
CHANNEL_ID = "C0BENCH01"
RESPONSE_URL = "https://hooks.slack.com/actions/T0TEST/1000000000001/benchresponseurl"
REQUESTER = "runtime_ops"


def _user(i: int) -> str:
    return f"UBENCH{i:04d}"


def _prepare(database_url: str, n_clicks: int) -> tuple[list[str], list[str], str]:
    """Open the pending requests through the store API; returns (request ids, approvers, a spare request id)."""
    from sqlalchemy import update

    from runtime_ops.policies.approvals import RequestPolicy
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store
    from runtime_ops.store import schema as t
    from runtime_ops_tests.support.approvals_support import open_pending

    store = open_store(database_url, get_settings())
    approvers = [_user(i) for i in range(math.ceil(n_clicks / PENDING_REQUESTS) + 1)]
    # required_approvals = every approver: no click in the run decides a request, so each one takes the
    # full "vote counted" path (authorise, insert vote, tally, audit record) and none is refused.
    policy = RequestPolicy(approvers=tuple(approvers), required_approvals=len(approvers))
    ids = [
        open_pending(store, policy, seed=f"bench-{i}", requested_by=REQUESTER)["id"]
        for i in range(PENDING_REQUESTS + 1)
    ]
    # Opening a request for a new candidate supersedes the pending one (one candidate at a time, by design).
    # The benchmark wants many open requests so that 50 concurrent clicks do not all queue on one row, so
    # it puts the superseded ones back to pending.
    with store.tx() as conn:
        conn.execute(
            update(t.approval_requests)
            .where(t.approval_requests.c.id.in_(ids))
            .values(status="pending", decided_at=None, superseded_by=None, decision_reason=None)
        )
    store.engine.dispose()
    return ids[:-1], approvers, ids[-1]


def _bodies(request_ids: list[str], n: int) -> list[bytes]:
    """n distinct approve clicks: click i is on request i mod R by a user who has not voted on it yet."""
    from runtime_ops_tests.support.slack_signing import interaction_body

    base = time.time()
    bodies = []
    for i in range(n):
        r = i % len(request_ids)
        bodies.append(
            interaction_body(
                request_ids[r],
                "approve",
                _user(i // len(request_ids)),
                message_ts=f"{1_700_000_000 + r}.000100",
                action_ts=f"{base + i / 1000:.6f}",
                channel_id=CHANNEL_ID,
                response_url=RESPONSE_URL,
            )
        )
    return bodies


def _signed(body: bytes) -> dict[str, str]:
    """Slack's headers, signed now: the ops API refuses timestamps older than 5 minutes."""
    from runtime_ops_tests.support.slack_signing import signed_headers

    return signed_headers(SIGNING_SECRET, body)


def _statements_per_click(database_url: str, request_id: str, actor: str) -> dict[str, Any]:
    """One click's `cast_vote`, in this process, counting the SQL statements it sends (pool ping excluded)."""
    from sqlalchemy import event

    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store

    store = open_store(database_url, get_settings(), migrate=False)
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement.split(None, 1)[0].upper())

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        result = store.votes.cast_vote(
            request_id, actor=actor, approve=True, channel="slack", dedupe_key=f"bench-probe:{request_id}:{actor}"
        )
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    return {"outcome": result.outcome, "statements": len(statements), "by_kind": dict(Counter(statements))}


def _outcomes(database_url: str) -> dict[str, Any]:
    from sqlalchemy import func, select

    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store
    from runtime_ops.store import schema as t

    store = open_store(database_url, get_settings(), migrate=False)
    with store.tx() as conn:
        rows = conn.execute(
            select(t.interaction_deliveries.c.outcome, func.count()).group_by(t.interaction_deliveries.c.outcome)
        ).all()
        votes = conn.execute(select(func.count()).select_from(t.approval_votes)).scalar_one()
    report = store.audit_log.verify()
    return {
        "delivery_outcomes": {o: n for o, n in rows},
        "votes": votes,
        "audit_records": report.records,
        "audit_ok": report.ok,
    }


def _measure(server: UvicornServer, path: str, bodies: list[bytes]) -> LoadStats:
    assert server.proc is not None
    calls = [Call(path, b, _signed) for b in bodies]
    return run_closed_loop(
        server.url,
        calls,
        concurrency=CONCURRENCY,
        warmup=WARMUP,
        max_seconds=MAX_SECONDS,
        server_pid=server.proc.pid,
        client=CLIENT,
    )


@benchmark("approvals", "signed Slack interactions vs a bare one-INSERT FastAPI endpoint, same PostgreSQL")
def signed_interaction() -> list[BenchResult]:
    from runtime_ops_tests.support.servers import PostgresServer

    n_clicks = ROUNDS * (WARMUP + MEASURED)
    load_at_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if load_at_start > 0.5 * (os.cpu_count() or 1):
        print(f"   note: host load is {load_at_start:.1f} on {os.cpu_count()} CPUs before starting; expect noise")
    pg = PostgresServer()
    servers: list[UvicornServer] = []
    home = tempfile.TemporaryDirectory(prefix="bench_runtime_ops_home_")
    try:
        pg.start()
        url = pg.create_database("bench_approvals")
        request_ids, approvers, spare = _prepare(url, n_clicks)
        bodies = _bodies(request_ids, n_clicks)

        ours = UvicornServer(
            "bench.ops_app:create_app",
            server_env(
                RUNTIME_OPS_HOME=home.name,
                RUNTIME_OPS_DATABASE_URL=url,
                SLACK_SIGNING_SECRET=SIGNING_SECRET,
                RUNTIME_OPS_LINK_SECRET=LINK_SECRET,
                RUNTIME_OPS_APPROVERS=",".join(approvers),
            ),
            name="ops",
        )
        bare = UvicornServer("bench.bare_app:create_app", server_env(BENCH_DATABASE_URL=url), name="bare")
        for server in (ours, bare):
            servers.append(server)
            server.start()

        base_runs: list[LoadStats] = []
        our_runs: list[LoadStats] = []
        per_round = WARMUP + MEASURED
        for r in range(ROUNDS):
            # Both get the same bodies (the bare endpoint ignores them); ours gets fresh clicks every round.
            base_runs.append(_measure(bare, "/insert", bodies[r * per_round : (r + 1) * per_round]))
            our_runs.append(_measure(ours, "/slack/interactions", bodies[r * per_round : (r + 1) * per_round]))
        for server in servers:
            server.stop()
        checks = _outcomes(url)
        probe = _statements_per_click(url, spare, approvers[0])
    finally:
        for server in servers:
            server.stop()
        with contextlib.suppress(Exception):
            pg.close()
        home.cleanup()

    base, mine = combine(base_runs), combine(our_runs)
    sent = sum(WARMUP + run.requests for run in our_runs)
    details = {
        "concurrency": CONCURRENCY,
        "pending_requests": PENDING_REQUESTS,
        "rounds": ROUNDS,
        "warmup_per_round": WARMUP,
        "load_generator": CLIENT,
        "host_load_1m_at_start": round(load_at_start, 2),
        "ours": mine.summary(),
        "baseline": base.summary(),
        "throughput_ratio_per_round": [
            round(o.throughput / b.throughput, 3) if b.throughput else None
            for o, b in zip(our_runs, base_runs, strict=True)
        ],
        "state_check": {**checks, "clicks_sent": sent, "one_vote_per_click": checks["votes"] == sent},
        "one_click_in_process": probe,
    }
    return [
        BenchResult(
            "approvals.signed_interaction",
            mine.throughput,
            base.throughput,
            "req/s",
            Target("ratio", ">=", THROUGHPUT_RATIO_TARGET),
            details,
        ),
        BenchResult(
            "approvals.signed_interaction.p99",
            mine.p(99),
            base.p(99),
            "ms",
            Target("ours", "<=", P99_TARGET_MS),
            {"p50_ms": {"ours": round(mine.p(50), 2), "baseline": round(base.p(50), 2)}},
        ),
    ]
