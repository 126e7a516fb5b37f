"""The ramp after approval through the real ops API: simulated users (golden questions, position-based clicks,
seeded) search and click while the approvals sensor ticks.

- a truly worse candidate (lsa with 2 dimensions against production's 128), approved by a person: stage 0's canary
  shows a loss, the ramp rolls back by itself, and production, the serving index, what /api/search serves, the
  audit chain and the approval page agree; no promotion run exists and none can be started (SQLite and PostgreSQL);
- a candidate that does not lose steps through every stage and is then promoted once (SQLite)."""

from __future__ import annotations

import json
import random
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from runtime_ops.approvals import links
from runtime_ops.cli import main as cli
from runtime_ops.components.loading import get_spec
from runtime_ops.demo import CORPUS_DIR
from runtime_ops.models.golden import load_golden_set
from runtime_ops.online.click_models import PositionBased, grades
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore
from runtime_ops.tags import APPROVAL_TAG
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer, operator_cli
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, Flow, serving_v1
from runtime_ops_tests.support.own_corpus import declare_pipeline
from runtime_ops_tests.support.slack_server import SlackServer

K = 5
CHANNEL = "C0RAMP"
LANDED = ("stdlib/data/", "stdlib/text/")
ROLLOUT = (
    # A few dozen users per stage: the loss rule is loose (max_loss 0.4) where the default 0.05 needs hundreds.
    "  rollout: {mode: canary, share: 0.05, min_queries: 25, max_duration: 2d, ramp: [0.5, 1.0], max_loss: 0.4}\n"
    f"  approvals: {{slack_channel: {CHANNEL}, approvers: [alice]}}\n"
)


def _candidate_pending(
    env: Any, instance: Any, tmp_path: Path, database_url: str | None, embedder: str = "", **settings: str
) -> tuple[StateStore, dict[str, Any], Flow]:
    """Production v1 (lsa, 128 dimensions) serving; then candidate v2 trained with `embedder` (defs.yaml's, when
    given) on the whole corpus, waiting for a person, its pre-approval canary running beside the request."""
    landing, pipelines = tmp_path / "landing", tmp_path / "pipelines"
    defs = declare_pipeline(pipelines, "demo", landing, ROLLOUT)
    env(
        landing=str(landing),
        RUNTIME_OPS_PIPELINES_DIR=str(pipelines),
        **NEEDS_A_HUMAN,
        RUNTIME_OPS_QUERY_LOG_FLUSH_S="0.2",  # a click waits for its request to be written
        **({"database_url": database_url} if database_url else {}),
        **settings,
    )
    store, _ = serving_v1(landing, instance)
    if embedder:
        defs.write_text(defs.read_text() + embedder)
    flow = Flow(instance)  # its definitions read defs.yaml again
    shutil.copytree(CORPUS_DIR / "stdlib" / "text", landing / "stdlib" / "text")
    flow.tick_and_run("landing_sensor")
    flow.tick_and_run("corpus_sensor")
    store = store.scoped("demo")
    [pending] = store.requests.list_requests(status="pending")
    assert pending["candidate_version"] == 2 and store.registry.alias("production") == 1
    assert store.rollouts.for_request(pending["id"]) is not None
    return store, pending, flow


def _users(api: ApiServer, store: StateStore, headers: dict[str, str], n: int, seed: int) -> dict[str, int]:
    """`n` sessions, one golden question each; a position-based user clicks what it finds relevant, once the query
    log holds every request (as people click a moment after the results arrive). Returns the arms that served them."""
    # The questions whose documents landed (stdlib/data and stdlib/text): production can answer them.
    questions = [q for q in load_golden_set(get_spec("demo").golden_set) if q.relevant[0].startswith(LANDED)]
    rng = random.Random(seed)
    model = PositionBased()
    arms: dict[str, int] = {}
    clicks: list[dict[str, Any]] = []
    asked: list[str] = []
    before = store.query_log.counts()["records"]
    for i in range(n):
        q = questions[i % len(questions)]
        body = {"query": q.question, "k": K, "session": f"user-{seed}-{i}"}
        resp = web.post(f"{api.url}/api/search", json=body, headers=headers, timeout=30)
        assert resp.status_code == 200, resp.text
        served = resp.json()
        shown = [r["document_key"] for r in served["results"]]
        for rank in model.clicks(grades(shown, set(q.relevant)), rng):
            chunk = served["results"][rank - 1]["chunk_id"]
            clicks.append({"request_id": served["request_id"], "chunk_id": chunk, "session": body["session"]})
        asked.append(served["request_id"])
    deadline = time.monotonic() + 30
    while store.query_log.counts()["records"] < before + n:  # the writer flushes every RUNTIME_OPS_QUERY_LOG_FLUSH_S
        assert time.monotonic() < deadline, "the query log did not write every request"
        time.sleep(0.2)
    for request_id in asked:  # the arm is the server's to know: the query log says it, the response does not
        logged = store.query_log.get(request_id)
        assert logged is not None
        arms[logged.record["arm"]] = arms.get(logged.record["arm"], 0) + 1
    for click in clicks:
        sent = web.post(f"{api.url}/api/feedback", json={**click, "signal": "click"}, headers=headers, timeout=30)
        assert sent.status_code in (200, 201), sent.text
    return arms


def _promotion_runs(instance: dg.DagsterInstance, request_id: str) -> list[Any]:
    return list(instance.get_runs(filters=dg.RunsFilter(tags={APPROVAL_TAG: request_id})))


def _page(request: dict[str, Any], api: ApiServer) -> str:
    token = links.issue(
        get_settings().resolved_link_secret(),
        request_id=request["id"],
        approver="alice",
        digest=request["candidate_digest"],
        expires_at=datetime.now(UTC) + timedelta(hours=1),
    )
    page = web.get(f"{api.url}/approvals/{token}", timeout=10)
    assert page.status_code == 409 and "Already decided" in page.text, page.text  # approved: the link shows the state
    return page.text


@pytest.mark.slow(seconds=25)  # alone on 2 cores (Dec 2026), each backend
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_ramp_rolls_back_by_itself_when_the_candidate_loses(
    backend: str,
    env: Any,
    dagster_instance: Any,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = request.getfixturevalue("postgres_url") if backend == "postgresql" else None
    slack = SlackServer().start()
    request.addfinalizer(slack.stop)
    store, pending, flow = _candidate_pending(
        env,
        dagster_instance,
        tmp_path,
        url,
        embedder="  embedder: {kind: lsa, dim: 2}\n",
        SLACK_BOT_TOKEN="xoxb-test-token",
        SLACK_APPROVAL_CHANNEL=CHANNEL,
        SLACK_API_URL=slack.base_url,
    )
    rid = pending["id"]
    assert flow.tick("approvals_sensor") == []  # announced in Slack
    announced = store.requests.get_request(rid)
    assert announced is not None and announced["slack_ts"]
    ts = announced["slack_ts"]
    assert operator_cli(["approvals", "approve", rid, "--as", "alice"]) == 0
    assert "starts the ramp (50%, 100% of sessions)" in capsys.readouterr().out

    # Approved: no promotion yet; the canary beside the request gives way to stage 0 of the ramp, at half the sessions.
    assert flow.tick("approvals_sensor") == []
    [stage0] = store.rollouts.stages(rid)
    assert (stage0["stage"], stage0["mode"], stage0["share"], stage0["status"]) == (0, "canary", 0.5, "active")
    assert stage0["candidate_version"] == 2 and stage0["production_version"] == 1
    before = [r for r in store.rollouts.history() if r["id"] != stage0["id"]]
    assert before[0]["status"] == "stopped" and before[0]["reason"] == "approved: ramp starts"
    assert "Ramping: the candidate serves stage 1 (50% of sessions)" in json.dumps(slack.messages[ts]["blocks"])

    headers = {"Authorization": f"Bearer {store.api_keys.create('ramp-users', ['search']).key}"}
    with ApiServer(get_settings()) as api:
        time.sleep(1.2)  # the API re-reads the active rollout every ROLLOUT_READ_EVERY_S
        arms = _users(api, store, headers, 120, seed=1)
        assert arms.get("candidate", 0) >= 25 and arms.get("production", 0) >= 25, arms
        # /metrics: the ramp stage's rollout and its evidence, as the gate is about to read them.
        scraped = web.get(f"{api.url}/metrics", headers=api.key_headers("read"), timeout=10).text
        for series in (
            'runtime_ops_rollout_active{pipeline="demo"} 1.0',
            'runtime_ops_rollout_mode{mode="canary",pipeline="demo"} 1.0',
            'runtime_ops_rollout_share{pipeline="demo"} 0.5',
            'runtime_ops_rollout_stage{pipeline="demo"} 1.0',
            'runtime_ops_rollout_min_queries{pipeline="demo"} 25.0',
            'runtime_ops_rollout_verdict{pipeline="demo",verdict="worse"} 1.0',
        ):
            assert series in scraped, series
        assert f'runtime_ops_rollout_decisive_queries{{pipeline="demo"}} {float(arms["candidate"])}' in scraped
        assert 'runtime_ops_rollout_preference{pipeline="demo"} -' in scraped

        # The loss shows at stage 0: rolled back by the sensor's own tick, no promotion run.
        assert flow.tick("approvals_sensor") == []
        [stage0] = store.rollouts.stages(rid)
        assert stage0["status"] == "rolled_back" and "loses online" in stage0["reason"], stage0
        assert store.rollouts.active() is None
        assert flow.tick("approvals_sensor") == []  # and stays so
        assert _promotion_runs(dagster_instance, rid) == []

        # Production, the serving index and what /api/search serves agree: v1, for every session.
        assert store.registry.alias("production") == 1
        serving = store.indexes.current_index()
        assert serving is not None and serving["model_version"] == 1
        time.sleep(1.2)
        served_ids: list[str] = []
        for i in range(10):
            body = {"query": "json dumps indent", "k": K, "session": f"user-1-{i}"}
            served = web.post(f"{api.url}/api/search", json=body, headers=headers, timeout=30).json()
            served_ids.append(served["request_id"])
        deadline = time.monotonic() + 30
        while any(store.query_log.get(i) is None for i in served_ids):
            assert time.monotonic() < deadline, "the query log did not write every request"
            time.sleep(0.2)
        for request_id in served_ids:
            logged = store.query_log.get(request_id)
            assert logged is not None
            record = logged.record
            assert (record["arm"], record["production_version"], record["production_index"]) == (
                "production", 1, serving["id"],
            )  # fmt: skip

        # Slack: the request's message says it, and one thread reply does (a tick run again says nothing twice).
        assert "Rolled back automatically" in json.dumps(slack.messages[ts]["blocks"])
        [reply] = slack.thread_replies(ts)
        assert "Rolled back automatically: stage 1/2 (50% of sessions): the candidate loses online" in reply["text"]

        # The approver's page says what happened and that this approval can never promote the candidate.
        page = _page(store.requests.get_request(rid) or pending, api)
        assert "Rolled back automatically: stage 1/2 (50% of sessions): the candidate loses online" in page, page
        assert "positive-feedback rate" in page and "never promote the candidate" in page, page
        assert "promotion-link" not in page  # no run to watch
        # Decided, the evidence stays: the stage's results on the page, in the JSON API, the CLI and `status`.
        stage_line = f"stage 1 (50% of sessions) rolled back: {arms['candidate']} candidate requests, positive-feedback"
        assert stage_line in page, page
        shown = web.get(f"{api.url}/api/approvals/{rid}", headers=api.key_headers("read"), timeout=10).json()
        ramp = shown["evidence"]["ramp"]
        assert ramp["outcome"] == "rolled back"
        [result] = ramp["stages"]
        assert (result["stage"], result["share"], result["outcome"], result["verdict"]) == (
            1,
            0.5,
            "rolled back",
            "worse",
        )
        assert result["queries"] == arms["candidate"] and result["min_queries"] == 25
        assert result["feedback_rate"]["high"] < 0 and result["ended_at"] is not None
        assert shown["evidence"]["online"]["rollout"]["reason"] == "approved: ramp starts"
        listed = web.get(f"{api.url}/api/approvals", headers=api.key_headers("read"), timeout=10).json()
        assert next(r for r in listed if r["id"] == rid)["evidence"]["ramp"]["outcome"] == "rolled back"
    capsys.readouterr()
    assert cli(["approvals", "show", rid, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evidence"]["ramp"]["stages"] == [result]
    assert cli(["approvals", "show", rid]) == 0
    assert stage_line in capsys.readouterr().out
    assert cli(["approvals", "list"]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if rid in line]
    assert "approved" in row and "rolled back" in row, row
    assert cli(["status"]) == 0
    assert stage_line in capsys.readouterr().out

    # The audit chain of the request tells the story, intact; a promotion by hand is refused.
    events = [(r["event"], r["outcome"], r["actor"]) for r in store.audit_log.records(rid)]
    assert ("rollout_stopped", "stopped", "policy:online") in events
    assert ("rollout_started", "canary", "policy:online") in events
    assert ("rollout_stopped", "rolled_back", "policy:online") in events
    assert store.audit_log.verify().ok
    assert cli(["promote", "--approval", rid]) == 1
    assert "its ramp rolled back at stage 1" in capsys.readouterr().err
    assert store.registry.alias("production") == 1


@pytest.mark.slow(seconds=28)  # alone on 2 cores (Dec 2026)
def test_a_candidate_that_does_not_lose_steps_through_the_ramp_and_is_promoted_once(
    env: Any, dagster_instance: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, pending, flow = _candidate_pending(env, dagster_instance, tmp_path, None)
    rid = pending["id"]
    assert operator_cli(["approvals", "approve", rid, "--as", "alice"]) == 0
    assert flow.tick("approvals_sensor") == []
    headers = {"Authorization": f"Bearer {store.api_keys.create('ramp-users', ['search']).key}"}
    with ApiServer(get_settings()) as api:
        time.sleep(1.2)
        _users(api, store, headers, 80, seed=2)
        assert flow.tick("approvals_sensor") == []  # stage 0 passed: stage 1 (all sessions) starts
        stages = store.rollouts.stages(rid)
        assert [(s["stage"], s["share"], s["status"]) for s in stages] == [(0, 0.5, "completed"), (1, 1.0, "active")]
        time.sleep(1.2)
        arms = _users(api, store, headers, 30, seed=3)
        assert arms == {"candidate": 30}
    [launch] = flow.tick("approvals_sensor")  # the last stage passed: the promotion, as without a ramp
    assert launch.run_key == rid
    capsys.readouterr()
    assert cli(["approvals", "list"]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if rid in line]
    assert "approved" in row and "passed" in row, row
    assert [s["status"] for s in store.rollouts.stages(rid)] == ["completed", "completed"]
    assert flow.run("approvals_sensor", launch).success
    assert flow.tick("approvals_sensor") == []  # records the run; launches nothing again
    assert len(_promotion_runs(dagster_instance, rid)) == 1
    assert store.registry.alias("production") == 2
    serving = store.indexes.current_index()
    assert serving is not None and serving["model_version"] == 2
