"""One soak, start to verdict: start the deployment, serve production v1, run the workload and the seeded faults for
the set time, let the work drain, read the final state, check the history and render the report.

    history, verdict, report = run_soak(SoakConfig(seed=7, minutes=30, out=Path(".soak/seed-7")), os.environ.update)

`out` receives `history.json` (re-checked with `python -m runtime_ops_tests.soak --check out/history.json`),
`report.md`, `faults.log` and the processes' logs (`deployment/topology/logs/`).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime_ops_tests.soak.checker import Verdict, check
from runtime_ops_tests.soak.deployment import APPROVERS, PREFIX, Deployment
from runtime_ops_tests.soak.fault_plan import plan
from runtime_ops_tests.soak.final_state import PIPELINE, read_final
from runtime_ops_tests.soak.history import History, Landed
from runtime_ops_tests.soak.injector import Injector
from runtime_ops_tests.soak.report import render
from runtime_ops_tests.soak.supervisor import DaemonSupervisor
from runtime_ops_tests.soak.workload import Keys, Recorder, Workload
from runtime_ops_tests.support.topology import wait_for

__all__ = ["SoakConfig", "run_soak"]

# Variables of the soak process that would leak into the deployment's settings if left set.
CLEARED_PREFIXES = ("RUNTIME_OPS_", "SLACK_", "DAGSTER_")
CLEARED_NAMES = ("REDIS_URL", "AWS_ENDPOINT_URL")


@dataclass(frozen=True)
class SoakConfig:
    seed: int
    minutes: float
    out: Path
    kinds: tuple[str, ...] | None = None  # fault kinds to draw from (default: all)
    gap: tuple[float, float] = (18.0, 36.0)  # seconds between faults
    warmup: float = 20.0  # seconds of workload before the first fault
    quiet_tail: float = 20.0  # seconds of workload after the last fault begins
    expire_after: str = "75s"
    drain_timeout: float = 420.0
    # An operator asks for a retrain once new documents are ingested, so that a candidate waits for the approvers
    # early even in a short soak (the retrain policy's growth and drift triggers take minutes of landing to fire).
    retrain_at_start: bool = True
    landing_gap: tuple[float, float] = (1.5, 4.0)  # seconds between landing operations


def run_soak(
    cfg: SoakConfig, set_env: Callable[[dict[str, str | None]], None], log: Callable[[str], None] = print
) -> tuple[History, Verdict, str]:
    """`set_env` applies variables to this process's environment (None deletes one): os.environ for the command,
    monkeypatch for a test."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    fault_log = open(cfg.out / "faults.log", "w")  # noqa: SIM115 - closed in finally

    def say(line: str) -> None:
        log(f"[soak] {line}")
        fault_log.write(line + "\n")
        fault_log.flush()

    deployment = Deployment(cfg.out / "deployment", expire_after=cfg.expire_after, log=say)
    supervisor: DaemonSupervisor | None = None
    try:
        deployment.start_servers()
        env = deployment.environment()
        set_env({**{k: None for k in os.environ if k.startswith(CLEARED_PREFIXES) or k in CLEARED_NAMES}, **env})
        from runtime_ops.settings import get_settings

        get_settings.cache_clear()
        say(f"seed {cfg.seed}: servers up; starting the code server, daemon, webserver and ops API")
        deployment.start_processes()
        supervisor = DaemonSupervisor(deployment, say).start()
        keys = _keys(deployment)
        recorder = Recorder()
        say("processes up; landing the first corpus and waiting for production v1")
        _serve_v1(deployment, recorder)
        setup = recorder.now()
        say(f"production v1 serving at t={setup:.0f}s; workload and faults for {cfg.minutes:g} min")

        duration = cfg.minutes * 60
        faults = plan(
            cfg.seed,
            recorder.now() + duration,
            cfg.kinds,
            cfg.gap,
            warmup=recorder.now() + cfg.warmup,
            quiet_tail=cfg.quiet_tail,
        )
        workload = Workload(deployment, keys, recorder, cfg.seed, landing_gap=cfg.landing_gap)
        injector = Injector(deployment, recorder, cfg.seed, say)
        workload.start()
        if cfg.retrain_at_start:
            asking = threading.Thread(target=_ask_for_a_retrain, args=(deployment, say), name="soak-retrain")
            asking.daemon = True
            asking.start()
        injecting = threading.Thread(target=injector.run, args=(faults,), name="soak-injector", daemon=True)
        injecting.start()
        end = time.monotonic() + duration
        while time.monotonic() < end:
            time.sleep(min(30.0, max(0.0, end - time.monotonic())))
            say(
                f"t={recorder.now():.0f}s: {len(injector.faults)} faults so far, {len(recorder.calls)} calls, "
                f"{len(recorder.landed)} landed"
            )
        injector.stop_event.set()
        injecting.join(60)
        injector.join()
        workload.stop_traffic()
        say(f"traffic stopped at t={recorder.now():.0f}s; draining (approvers still deciding)")
        drained = _drain(deployment, cfg.drain_timeout, say)
        # Quiescence for the final read: the sensors that start new work on their own (landing, retrain policy,
        # automation) stop; the approvals and run recovery sensors go on. What a last tick launched meanwhile
        # finishes before the state is read (a run caught STARTING would look stuck).
        deployment.topo.set_sensors(running={"demo__approvals_sensor", "run_recovery_sensor"})
        settled = _drain(deployment, cfg.drain_timeout, say, settle=5.0)
        drained = None if drained is None or settled is None else drained + settled
        workload.stop()
        supervisor.stop()
        say(f"drained in {drained:.0f}s" if drained is not None else "the work did not drain in time; checking anyway")

        direct_env = {**os.environ, "RUNTIME_OPS_DATABASE_URL": deployment.url(direct=True)}
        final = read_final(deployment.url(direct=True), deployment.topo.instance, direct_env)
        history = History(
            seed=cfg.seed,
            minutes=cfg.minutes,
            faults=injector.faults,
            landed=recorder.landed,
            calls=recorder.calls,
            final=final,
            skipped=[{"t": t, "kind": k, "why": why} for t, k, why in injector.skipped],
            diagnostics={
                **diagnostics(deployment),
                "phases": {"setup_s": round(setup), "soak_s": round(duration), "drain_s": drained and round(drained)},
                "daemon_restarts_by_supervisor": supervisor.restarts,
            },
        )
        history.save(cfg.out / "history.json")
        verdict = check(history)
        report = render(history, verdict)
        (cfg.out / "report.md").write_text(report + "\n")
        return history, verdict, report
    finally:
        if supervisor is not None:
            supervisor.stop()
        deployment.stop()
        fault_log.close()


def _keys(deployment: Deployment) -> Keys:
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store

    store = open_store(deployment.url(direct=True), get_settings())
    decide = {a: store.api_keys.create(f"soak approver {a}", ["decide"], approver=a).key for a in APPROVERS}
    return Keys(
        search=store.api_keys.create("soak application", ["search"]).key,
        read=store.api_keys.create("soak reader", ["read"]).key,
        decide=decide,
    )


def _serve_v1(deployment: Deployment, recorder: Recorder, timeout: float = 420) -> None:
    """The first half of the demo corpus into S3; the daemon ingests it, trains v1, the gate's policy approves
    the first model and the promotion serves it."""
    from runtime_ops.demo import CORPUS_DIR

    s3 = deployment.moto.client("s3")
    for path in sorted(p for p in (CORPUS_DIR / "stdlib" / "data").rglob("*") if p.is_file()):
        key = path.relative_to(CORPUS_DIR).as_posix()
        etag = s3.put_object(Bucket=deployment.bucket, Key=f"{PREFIX}/{key}", Body=path.read_bytes())["ETag"]
        recorder.land(Landed(t=recorder.now(), key=key, op="put", version=etag.strip('"')))
    store = _store(deployment)
    wait_for(
        lambda: store.registry.alias("production") is not None and store.registry.alias("retrieval_index"),
        timeout,
        "production v1 serving",
    )


def _ask_for_a_retrain(deployment: Deployment, say: Callable[[str], None], wait: float = 90.0) -> None:
    """What `runtime-ops retrain` does, as the soak's operator, once the workload's first documents are ingested
    (the corpus that trained v1 would train the same model again): the corpus sensor launches one train run."""
    from sqlalchemy import text

    from runtime_ops.models.sensors import request_retrain

    def ingested(store: Any) -> int:
        with store.engine.connect() as conn:
            return int(conn.execute(text("select count(*) from documents where status = 'ok'")).scalar_one())

    # Faults hit the operator too (a PostgreSQL restart refuses the poll or the request): like a person, the
    # operator tries again a few seconds later, for as long as the workload may still use a candidate.
    store, before = None, None
    deadline, give_up = time.monotonic() + wait, time.monotonic() + wait + 60.0
    while True:
        try:
            store = store or _store(deployment)
            before = ingested(store) if before is None else before
            if ingested(store) < before + 2 and time.monotonic() < deadline:
                time.sleep(2.0)
                continue
            reason = "soak: a candidate for the approvers"
            number = request_retrain(store.retraining, store.ledger, reason=reason, requested_by="soak")
            say(f"retrain request #{number}")
            return
        except Exception as exc:  # any failure a fault causes; the retrain policy's own triggers still run
            if time.monotonic() >= give_up:
                say(f"the retrain request failed for good: {type(exc).__name__}: {exc}")
                return
            say(f"the retrain request failed, trying again in 3 s: {type(exc).__name__}: {exc}".splitlines()[0])
            time.sleep(3.0)


def _store(deployment: Deployment) -> Any:
    from runtime_ops.settings import get_settings
    from runtime_ops.store import open_store

    return open_store(deployment.url(direct=True), get_settings(), pipeline=PIPELINE)


def _busy(deployment: Deployment, store: Any) -> str:
    """What still has work to do ("" when the deployment is idle): messages in the landing queue, batches not
    ingested, documents not processed, approval requests pending (the approvers decide them, or they expire), runs
    queued or in progress."""
    from dagster import DagsterRunStatus, RunsFilter
    from sqlalchemy import text

    attrs = deployment.moto.client("sqs").get_queue_attributes(
        QueueUrl=deployment.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    busy = []
    if messages := sum(int(v) for v in attrs.values()):
        busy.append(f"{messages} landing messages")
    with store.engine.connect() as conn:
        counts = conn.execute(
            text(
                "select (select count(*) from landing_batches where status in ('pending', 'launched')), "
                "(select count(*) from documents where status in ('pending', 'parsed')), "
                "(select count(*) from approval_requests where status = 'pending'), "
                "(select count(*) from approval_requests where status = 'approved' and kind = 'human' "
                "and promotion_run_id is null), "
                "(select count(*) from retrain_requests where status = 'pending')"
            )
        ).one()
    what = (
        "batches not ingested",
        "documents not processed",
        "requests pending (decided or expiring)",
        "approvals whose promotion run is not launched yet",
        "retrain requests not taken up yet",
    )
    busy += [f"{n} {label}" for n, label in zip(counts, what, strict=True) if n]
    statuses = [
        DagsterRunStatus.QUEUED,
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
    ]
    runs = deployment.topo.instance.get_runs(RunsFilter(statuses=statuses), limit=50)
    if runs:
        busy.append(f"{len(runs)} runs " + ", ".join(sorted({f"{r.job_name} {r.status.value}" for r in runs})))
    return "; ".join(busy)


def _drain(deployment: Deployment, timeout: float, say: Callable[[str], None], settle: float = 0.0) -> float | None:
    """Seconds until the deployment is idle (`_busy`), and has stayed idle for `settle` seconds, saying every 30 s
    what it still waits for."""
    store = _store(deployment)
    t0 = time.monotonic()
    last_said = t0
    idle_since: float | None = None
    busy = "not checked yet"
    while time.monotonic() - t0 < timeout:
        try:
            busy = _busy(deployment, store)
        except Exception as exc:  # a server still coming back
            busy = f"unreadable ({type(exc).__name__})"
        if busy:
            idle_since = None
        else:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= settle:
                return time.monotonic() - t0
        if time.monotonic() - last_said > 30:
            say(f"draining for {time.monotonic() - t0:.0f}s: {busy}")
            last_said = time.monotonic()
        time.sleep(2.0)
    say(f"not drained after {timeout:.0f}s: {busy}")
    return None


def diagnostics(deployment: Deployment) -> dict[str, Any]:
    """What explains a verdict: Dagster's runs by job and status, landing batches by status, and each batch not
    ingested with the runs of its retry group (status, and Dagster's word on retrying it)."""
    from collections import Counter

    from dagster import RunsFilter
    from sqlalchemy import text

    from runtime_ops.tags import BATCH_TAG

    instance = deployment.topo.instance
    runs = instance.get_runs(limit=5000)
    store = _store(deployment)
    with store.engine.connect() as conn:
        batches = dict(conn.execute(text("select status, count(*) from landing_batches group by status")).all())
        open_batches = [dict(r._mapping) for r in conn.execute(text(
            "select id, status, run_id, n_objects from landing_batches where status not in ('ingested') order by seq"
        ))]  # fmt: skip
    for batch in open_batches:
        tagged = instance.get_runs(RunsFilter(tags={BATCH_TAG: batch["id"]}))
        batch["runs"] = [
            {"run_id": r.run_id[:8], "status": r.status.value, "will_retry": r.tags.get("dagster/will_retry"),
             "parent": (r.tags.get("dagster/parent_run_id") or "")[:8]}
            for r in tagged
        ]  # fmt: skip
    by_run = Counter(f"{r.job_name} {r.status.value}" for r in runs)
    # Runs whose live worker hung, killed by run_recovery_sensor (recovery/stalls.py); their stacks are in the log.
    code_log = deployment.topo.root / "logs" / "code_server.log"
    text_ = code_log.read_text(errors="replace") if code_log.exists() else ""
    stalled = sorted({m.group(1) for m in re.finditer(r"Run ([0-9a-f]{8})-[0-9a-f-]+ \([^)]*\) was stalled:", text_)})
    proxies = {
        name: {"accepted": proxy.accepted, "resets": proxy.resets, "open": proxy.open_connections,
               "accept_errors": proxy.accept_errors[-5:], "accepting": proxy.accepting}
        for name, proxy in (("postgres", deployment.pg_proxy), ("redis", deployment.redis_proxy))
    }  # fmt: skip
    return {
        "proxies": proxies,
        "runs": dict(sorted(by_run.items())),
        "stalled_runs": stalled,
        "landing_batches": {str(k): int(v) for k, v in batches.items()},
        "batches_not_ingested": open_batches,
    }
