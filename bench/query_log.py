"""The request path with the query log on vs off, with the request limits and feedback binding on vs off, and
feedback writes per second.

Uvicorn processes (one worker each) serve the real ops API from the same throwaway PostgreSQL state store and
the same LanceDB index (a small lsa model: the cheaper the search, the larger the query log's share of it, so the
ratio is conservative):
- ours: `POST /api/search` as shipped: a request id, and the record (hashes, shown items) queued for the writer
  thread, which writes a batch every RUNTIME_OPS_QUERY_LOG_FLUSH_S (1 s).
- baseline: the same app with the query log taken out of the request path
  (`bench.ops_app:create_app_without_query_log`), on the demo pipeline as declared (no rollout).
- ours + interleaving: the shipped app on a copy of the demo pipeline that declares `rollout: {mode: interleave,
  share: 1.0}`, with a rollout of a second model active: every request searches both models' indexes and is served
  a team-draft interleaving of the two, logged with each item's team.
- previous release: the shipped app with this release's request limits (`api/request_limits.py`: a token from the
  key's and the session's bucket per request) and the feedback's binding to the key and session that searched
  (`online/feedback_binding.py`) taken out (`bench.ops_app:create_app_without_limits`). The limits are on in ours
  at their defaults, but for the key's, set above the offered load: one key sends every client's requests here (as
  no application does), so its bucket is spent on each request but refuses none.
Each gets the same query bodies from 50 concurrent keep-alive clients, measured alternately ROUNDS times; the
targets are on p50 (issue 27: at most 1.10x; issue 39, against the previous release: at most 1.05x) and p99.
Afterwards every answered request of ours must be in the
query log (none dropped), whole.

Then feedback: `POST /api/feedback` (key check, limits, the logged request and its items read, the binding to its key
and session, one INSERT ... ON CONFLICT), one click per logged request naming its session, from 50 clients, against
a bare FastAPI endpoint doing one INSERT into the same PostgreSQL (`bench/bare_app.py`): feedback writes per second
and the ratio; and ours against the previous release's, alternately ROUNDS times (each on requests of its own: a
repeat writes nothing), on p50 (at most 1.05x).

The previous release's own figures (`PREVIOUS_RELEASE`, measured on another day: only a same-run ratio is a target)
are kept in the details beside ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
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
ROUNDS = 3  # baseline, ours, ... alternately: drift on a shared machine hits both alike
WARMUP = 200  # per server and round, not measured
MEASURED = 2500  # per server and round
MAX_SECONDS = 20.0
P50_RATIO_TARGET = 1.10
LIMITS_P50_RATIO_TARGET = 1.05  # issue 39: limits and bindings cost the request path at most 5% at p50
# bench/results/latest.md's query_log rows of the release before the limits and bindings (run 2026-12-05 08:50:47)
PREVIOUS_RELEASE = {"search_p50_ms": 617.75, "feedback_p50_ms": 280.63, "feedback_writes_per_s": 163.7}
P99_RATIO_TARGET = 1.25
FEEDBACK_RATIO_TARGET = 0.4
CLIENT = os.environ.get("BENCH_CLIENT", "raw")
LINK_SECRET = "bench-link-secret-0123456789abcdef"
SESSIONS = 500
WORDS = ("quokka", "tracker", "export", "json", "pretty", "printing", "csv", "dialect", "sniffing", "sqlite", "cursor")


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """This process's runtime_ops settings pointed at the benchmark's store and home while it prepares them."""
    from runtime_ops.settings import get_settings

    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    get_settings.cache_clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        get_settings.cache_clear()


def _prepare(env: dict[str, str]) -> str:
    """The demo pipeline serving a small lsa model's index, a second model's index ready beside it with an
    interleaving rollout of it active (read only by a server whose pipeline declares a rollout); a search key."""
    from datetime import timedelta

    from runtime_ops.components.loading import get_spec
    from runtime_ops.serving.vector_index import ensure_index
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store
    from runtime_ops.vectors.factory import pipeline_vector_store
    from runtime_ops_tests.support.serving_index import serve_new_model

    with _environment(**env):
        store = open_store(get_settings().resolved_database_url, get_settings())
        vectors = pipeline_vector_store(get_spec("demo").vector_store)
        serve_new_model(store, vectors, seed=2)  # v1: the candidate once v2 serves
        serve_new_model(store, vectors, seed=1)  # v2: production
        candidate = ensure_index(store, vectors, 1)  # brought up to the documents v2's set added
        store.rollouts.start(
            approval_id=None,
            candidate_version=1,
            candidate_index_id=candidate.index_id,
            production_version=2,
            mode="interleave",
            share=1.0,
            max_duration=timedelta(days=1),
            actor="bench",
        )
        key = store.api_keys.create("bench", ["search"]).key
        store.engine.dispose()
    return key


def _interleaving_pipelines(root: str) -> str:
    """A pipelines folder holding the demo pipeline with an interleaving rollout declared."""
    from runtime_ops.demo import CORPUS_DIR

    folder = os.path.join(root, "demo")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "defs.yaml"), "w") as f:
        f.write(
            "type: runtime_ops.components.RetrievalPipeline\n"
            "attributes:\n"
            "  name: demo\n"
            f"  landing: {{uri: '{CORPUS_DIR}'}}\n"
            "  rollout: {mode: interleave, share: 1.0, max_duration: 1d}\n"
        )
    return root


def _queries(n: int) -> list[bytes]:
    return [
        json.dumps({"query": f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7 + 3) % len(WORDS)]}", "k": 5,
                    "session": f"user-{i % SESSIONS}"}).encode()
        for i in range(n)
    ]  # fmt: skip


def _measure(server: UvicornServer, path: str, bodies: list[bytes], key: str) -> LoadStats:
    assert server.proc is not None
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
    return run_closed_loop(
        server.url,
        [Call(path, b, lambda _: headers) for b in bodies],
        concurrency=CONCURRENCY,
        warmup=WARMUP,
        max_seconds=MAX_SECONDS,
        server_pid=server.proc.pid,
        client=CLIENT,
    )


def _interleaved_share(server: UvicornServer, key: str, url: str) -> float:
    """The share of sample answers the interleaving server served interleaved (1.0 when the rollout routes), as its
    query log says (a response does not name its arm)."""
    import time

    import httpx
    from sqlalchemy import create_engine, select

    from runtime_ops.store import schema as t

    bodies = _queries(20)
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
    ids = [
        httpx.post(server.url + "/api/search", content=b, headers=headers, timeout=10).json()["request_id"]
        for b in bodies
    ]
    engine = create_engine(url)
    q = t.query_records
    try:
        deadline = time.monotonic() + 30
        while True:
            with engine.connect() as conn:
                arms = conn.execute(select(q.c.arm).where(q.c.request_id.in_(ids))).scalars().all()
            if len(arms) == len(ids) or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # the writer flushes every RUNTIME_OPS_QUERY_LOG_FLUSH_S
    finally:
        engine.dispose()
    return list(arms).count("interleaved") / len(ids)


def _logged(url: str) -> dict[str, Any]:
    """What the query log holds: records, whether each has all its items, and per record served by production
    alone the click that feedback sends (its rank-1 chunk, naming the request's session)."""
    from sqlalchemy import create_engine, select

    from runtime_ops.online.hashing import session_hash, session_key
    from runtime_ops.store import schema as t

    q = t.query_records
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            records = conn.execute(select(q.c.request_id, q.c.n_results, q.c["items"], q.c.arm,
                                          q.c.session_hash)).all()  # fmt: skip
    finally:
        engine.dispose()
    key = session_key(LINK_SECRET)
    sessions = {session_hash(key, f"user-{i}"): f"user-{i}" for i in range(SESSIONS)}
    return {
        "records": len(records),
        "whole": all(len(items) == n for _, n, items, _, _ in records),
        "clicks": [
            json.dumps({"request_id": rid, "chunk_id": int(items[0]["chunk_id"]), "signal": "click",
                        "session": sessions[session]}).encode()
            for rid, _, items, arm, session in records
            if items and arm == "production"
        ],
    }  # fmt: skip


@benchmark(
    "query_log",
    "/api/search with the query log (and interleaving) on vs off (p50, p99); feedback writes vs a bare INSERT",
)
def query_log() -> list[BenchResult]:
    from runtime_ops_tests.support.servers import PostgresServer

    pg = PostgresServer()
    home = tempfile.TemporaryDirectory(prefix="bench_runtime_ops_home_")
    servers: list[UvicornServer] = []
    try:
        pg.start()
        url = pg.create_database("bench_query_log")
        env = {"RUNTIME_OPS_HOME": home.name, "RUNTIME_OPS_DATABASE_URL": url, "RUNTIME_OPS_LINK_SECRET": LINK_SECRET,
               # One key sends every client's requests: its limits are spent on each request (their cost is in the
               # figures) but set above the offered load, so that none is refused.
               "RUNTIME_OPS_KEY_SEARCHES_PER_S": "1000000", "RUNTIME_OPS_KEY_FEEDBACK_PER_S": "1000000"}  # fmt: skip
        key = _prepare(env)
        ours = UvicornServer("bench.ops_app:create_app", server_env(**env), name="logged")
        base = UvicornServer("bench.ops_app:create_app_without_query_log", server_env(**env), name="unlogged")
        pipelines = _interleaving_pipelines(os.path.join(home.name, "pipelines"))
        mixed = UvicornServer(
            "bench.ops_app:create_app", server_env(**env, RUNTIME_OPS_PIPELINES_DIR=pipelines), name="interleaved"
        )
        prior = UvicornServer("bench.ops_app:create_app_without_limits", server_env(**env), name="previous release")
        bare = UvicornServer("bench.bare_app:create_app", server_env(BENCH_DATABASE_URL=url), name="bare")
        for server in (ours, base, mixed, prior, bare):
            servers.append(server)
            server.start()
        bodies = _queries(WARMUP + MEASURED)
        base_runs: list[LoadStats] = []
        our_runs: list[LoadStats] = []
        mixed_runs: list[LoadStats] = []
        prior_runs: list[LoadStats] = []
        for _ in range(ROUNDS):
            base_runs.append(_measure(base, "/api/search", bodies, key))
            our_runs.append(_measure(ours, "/api/search", bodies, key))
            mixed_runs.append(_measure(mixed, "/api/search", bodies, key))
            prior_runs.append(_measure(prior, "/api/search", bodies, key))
        interleaved = _interleaved_share(mixed, key, url)
        mixed.stop()
        for server in (ours, prior):
            server.stop()  # writes what waits
        logged = _logged(url)
        for server in (ours, prior):
            server.start()
        feedback: list[bytes] = logged["clicks"]
        # Each feedback phase on requests of its own: ours and the previous release's alternately, then the bare one.
        slices = [feedback[i :: 2 * ROUNDS + 1] for i in range(2 * ROUNDS + 1)]
        fed_runs: list[LoadStats] = []
        prior_fed_runs: list[LoadStats] = []
        for i in range(ROUNDS):
            fed_runs.append(_measure(ours, "/api/feedback", slices[2 * i], key))
            prior_fed_runs.append(_measure(prior, "/api/feedback", slices[2 * i + 1], key))
        inserted = _measure(bare, "/insert", slices[-1], key)
    finally:
        for server in servers:
            server.stop()
        with contextlib.suppress(Exception):
            pg.close()
        home.cleanup()

    mine, theirs, both = combine(our_runs), combine(base_runs), combine(mixed_runs)
    before, fed, fed_before = combine(prior_runs), combine(fed_runs), combine(prior_fed_runs)
    answered = sum(WARMUP + r.ok for r in our_runs)
    details = {
        "concurrency": CONCURRENCY,
        "rounds": ROUNDS,
        "load_generator": CLIENT,
        "ours": mine.summary(),
        "baseline": theirs.summary(),
        "p50_ratio_per_round": [
            round(o.p(50) / b.p(50), 3) if b.p(50) else None for o, b in zip(our_runs, base_runs, strict=True)
        ],
        "query_log": {"answered": answered, "records": logged["records"], "every_record_whole": logged["whole"]},
    }
    return [
        BenchResult("query_log.search_p50", mine.p(50), theirs.p(50), "ms", Target("ratio", "<=", P50_RATIO_TARGET),
                    details),
        BenchResult("query_log.search_p99", mine.p(99), theirs.p(99), "ms", Target("ratio", "<=", P99_RATIO_TARGET),
                    {"throughput_req_s": {"ours": round(mine.throughput, 1), "baseline": round(theirs.throughput, 1)}}),
        BenchResult("query_log.search_p50_interleaved", both.p(50), theirs.p(50), "ms",
                    Target("ratio", "<=", P50_RATIO_TARGET),
                    {"ours": both.summary(), "baseline": theirs.summary(), "interleaved_share": interleaved,
                     "p50_ratio_per_round": [round(o.p(50) / b.p(50), 3) if b.p(50) else None
                                             for o, b in zip(mixed_runs, base_runs, strict=True)]}),
        BenchResult("query_log.search_p99_interleaved", both.p(99), theirs.p(99), "ms",
                    Target("ratio", "<=", P99_RATIO_TARGET), {}),
        BenchResult("query_log.feedback_writes", fed.throughput, inserted.throughput, "req/s",
                    Target("ratio", ">=", FEEDBACK_RATIO_TARGET),
                    {"ours": fed.summary(), "baseline": inserted.summary(), "feedback_sent": len(feedback)}),
        BenchResult("query_log.search_p50_limits", mine.p(50), before.p(50), "ms",
                    Target("ratio", "<=", LIMITS_P50_RATIO_TARGET),
                    _against_previous(mine, before, our_runs, prior_runs, PREVIOUS_RELEASE["search_p50_ms"])),
        BenchResult("query_log.feedback_p50_bound", fed.p(50), fed_before.p(50), "ms",
                    Target("ratio", "<=", LIMITS_P50_RATIO_TARGET),
                    _against_previous(fed, fed_before, fed_runs, prior_fed_runs, PREVIOUS_RELEASE["feedback_p50_ms"])),
    ]  # fmt: skip


def _against_previous(
    ours: LoadStats, before: LoadStats, our_runs: list[LoadStats], prior_runs: list[LoadStats], recorded: float
) -> dict[str, Any]:
    """Ours against the previous release's request path in this run, per round, and against its recorded p50."""
    return {
        "ours": ours.summary(),
        "baseline": before.summary(),
        "p50_ratio_per_round": [
            round(o.p(50) / b.p(50), 3) if b.p(50) else None for o, b in zip(our_runs, prior_runs, strict=True)
        ],
        "previous_release_recorded_p50_ms": recorded,
        "ratio_to_recorded": round(ours.p(50) / recorded, 3),
    }
