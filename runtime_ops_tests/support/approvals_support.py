"""Helpers for approval tests: a movable clock, the ops API on a real uvicorn server, pending requests."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from runtime_ops.models.golden import GoldenQuestion
from runtime_ops.policies.approvals import RequestPolicy
from runtime_ops.policies.bootstrap import Interval
from runtime_ops.policies.changed_questions import changed_questions
from runtime_ops.policies.gate_policy import GatePolicy
from runtime_ops.policies.gate_rule import judge_interval
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore
from runtime_ops_tests.support import web
from runtime_ops_tests.support.servers import free_port


@dataclass
class FakeClock:
    current: datetime = field(default_factory=lambda: datetime.now(UTC).replace(microsecond=0))

    def now(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> datetime:
        self.current += timedelta(**delta)
        return self.current


class ApiServer:
    """`create_app(settings, clock)` served by uvicorn on 127.0.0.1:free port in a background thread, configured as
    `runtime-ops serve` configures it (`runtime_ops.api.server.server_config`).

        `serve_logging=True` runs it the way `runtime-ops serve` does: our logging on the root logger (uvicorn's
        own log config off) and uvicorn's access log on, for tests of what the process writes."""

    def __init__(
        self, settings: Any, clock: Any = None, *, port: int | None = None, serve_logging: bool = False
    ) -> None:
        self.settings, self.clock = settings, clock
        self.serve_logging = serve_logging
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> ApiServer:
        import uvicorn

        from runtime_ops.api.app import create_app
        from runtime_ops.api.server import server_config

        app = create_app(self.settings, clock=self.clock.now if self.clock else None)
        logging_opts: dict[str, Any] = (
            {"log_level": "info", "access_log": True, "log_config": None}
            if self.serve_logging
            else {"log_level": "warning", "access_log": False}
        )
        config = server_config(app, self.settings, host="127.0.0.1", port=self.port, **logging_opts)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if web.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    # As a deployment does, send traffic once the serving indexes are loaded (/readyz).
                    ready(lambda: web.get(f"{self.url}/readyz", timeout=5))
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("the ops API did not start within 30 s")

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._server = self._thread = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def key_headers(self, scope: str = "read") -> dict[str, str]:
        """An `Authorization` header with a fresh API key of `scope` (in this server's state store)."""
        return key_headers(self.settings.resolved_database_url, scope)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def ready(probe: Callable[[], Any], timeout: float = 60.0) -> Any:
    """`probe()` (a GET of /readyz) once the ops API is past warming up its serving indexes: its answer then (ready,
    or what else is wrong). The deadline only stops a test that would hang."""
    deadline = time.monotonic() + timeout
    while True:
        reply = probe()
        if reply.status_code != 503 or not str(reply.json().get("status", "")).startswith("warming up"):
            return reply
        if time.monotonic() > deadline:
            raise RuntimeError(f"the ops API was still warming up after {timeout:.0f} s: {reply.text}")
        time.sleep(0.05)


def key_headers(database_url: str, scope: str = "read") -> dict[str, str]:
    """An `Authorization` header with a fresh API key of `scope`, made in the state store at `database_url`."""
    from runtime_ops.store import open_store

    store = open_store(database_url, get_settings(), pipeline=None)
    try:
        return {"Authorization": f"Bearer {store.api_keys.create(f'test-{scope}', [scope]).key}"}
    finally:
        store.engine.dispose()


QUESTION_SET = hashlib.sha256(b"golden questions").hexdigest()  # the evaluation set of make_candidate's reports
QUESTIONS = 45


def gate_evidence() -> dict[str, Any]:
    """The verdict's evidence in make_candidate's reports, written by the gate's own code: ndcg@5 better by 0.010
    with an interval above 0 but below the default margin 0.020, and two changed questions (one better, one
    worse) with their relevant document's rank under each model."""
    verdict = judge_interval(Interval(0.01, 0.002, 0.018, QUESTIONS, 2000, 0.95), GatePolicy())
    questions = [
        GoldenQuestion("q-keys", "how do I rotate the signing keys", ("guide/keys.md",)),
        GoldenQuestion("q-lease", "what does a lease protect", ("guide/lease.md",)),
    ]
    changed = changed_questions(
        [["guide/keys.md", "guide/x.md"], ["guide/y.md", "guide/z.md"]],
        [["guide/x.md", "guide/z.md", "guide/keys.md"], ["guide/lease.md", "guide/y.md"]],
        questions,
        [1.0, 0.2],
        [0.5, 1.0],
        depth=10,
    )
    assert verdict.interval is not None
    return {
        "reason": verdict.reason,
        "outcome": str(verdict.outcome),
        "interval": {**verdict.interval.to_dict(), "metric": "ndcg@5"},
        "changed_questions": [c.to_dict() for c in changed],
    }


def _register(store: StateStore, name: str) -> dict[str, Any]:
    data = name.encode()
    digest = hashlib.sha256(data).hexdigest()
    artifact = store.artifacts.put_artifact("embedder", data, digest)
    model, _ = store.registry.register_model(
        digest=digest, artifact_id=artifact, params={}, n_documents=1, n_chunks=1, corpus_revision=1, run_id=None
    )
    return model


def make_candidate(
    store: StateStore,
    *,
    version_seed: str = "a",
    candidate: float = 0.61,
    production: float | None = 0.60,
    production_model: bool = False,
) -> dict[str, Any]:
    """A registered candidate model with an evaluation report (no training: the gate only needs the rows), scored
    on QUESTION_SET's QUESTIONS questions; `production_model` registers the model the production column names."""
    production_version = _register(store, "model-production")["version"] if production_model else None
    model = _register(store, f"model-{version_seed}")
    count = {"questions": float(QUESTIONS)}
    cand = {"ndcg@5": candidate, "recall@5": candidate + 0.1, "mrr": candidate - 0.05, **count}
    prod = (
        None
        if production is None
        else {"ndcg@5": production, "recall@5": production + 0.1, "mrr": production - 0.05, **count}
    )
    return store.evaluations.record_eval_report(
        candidate_version=model["version"],
        production_version=production_version,
        candidate_metrics=cand,
        production_metrics=prod,
        verdict={
            "meets_policy": True,
            "auto_approve": False,
            **gate_evidence(),
            "delta": 0.01,
            "primary_metric": "ndcg@5",
            "question_set": QUESTION_SET,
        },
        markdown="| metric | candidate | production |",
        report_digest=f"r-{version_seed}",
        candidate_digest=hashlib.sha256(f"cand-{version_seed}".encode()).hexdigest(),
        run_id="run-1",
    )


def open_pending(
    store: StateStore,
    policy: RequestPolicy,
    *,
    now: datetime | None = None,
    seed: str = "a",
    requested_by: str = "runtime_ops",
    production_model: bool = False,
) -> dict[str, Any]:
    report = make_candidate(store, version_seed=seed, production_model=production_model)
    request, created = store.requests.open_request(
        candidate_version=report["candidate_version"],
        candidate_digest=report["candidate_digest"],
        eval_report_id=report["id"],
        requested_by=requested_by,
        kind="human",
        policy=policy,
        compensation="remove_canary",
        now=now,
        run_id="run-1",
    )
    assert created
    store.registry.set_alias("canary", report["candidate_version"], actor="gate", approval_id=request["id"])
    return request


def operator_cli(args: list[str]) -> int:
    """`runtime-ops <args>` (an approve, reject or retrain with `--as APPROVER`) run by that approver's operator:
    a fresh key with the decide scope mapped to APPROVER, handed over in a key file."""
    import tempfile
    from pathlib import Path

    from runtime_ops.cli import main as cli
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store

    approver = args[args.index("--as") + 1]
    store = open_store(get_settings().resolved_database_url, get_settings())
    key = store.api_keys.create(f"operator {approver}", ["decide"], approver=approver).key
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "operator.key"
        path.write_text(key)
        return cli([*args, "--key-file", str(path)])
