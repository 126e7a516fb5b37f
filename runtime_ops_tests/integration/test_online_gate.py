"""The acceptance test of issue 27's online gate, on SQLite and on PostgreSQL, through the real ops API over HTTP and
the local Slack server: two pipelines, each with a candidate beside a pending approval request and an interleaved
rollout; simulated users ask a golden set's questions and click by a position-based click model on what they are
shown; then one approvals-sensor tick decides what no person has:

- `loses`: the candidate is a deliberately weak model (lsa in 2 dimensions against 12): the offline verdict leaves it
  to a person (max_regression 1.0), online it loses with confidence and is rejected by `policy:online` (the policy
  does not even require online evidence), its rollout stopped with the reason, audited;
- `wins`: the candidate is the 12-dimension model against a 2-dimension production: the offline verdict clears the
  auto-approve margin, but `gate.online.required` keeps the request pending until the rollout wins on live traffic;
  then `policy:online` approves it.

The approval page and the Slack message show the offline and the online evidence side by side, with counts."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import delete

from runtime_ops.approvals.announce import announcer_for
from runtime_ops.approvals.sensors import approvals_tick
from runtime_ops.components.loading import get_spec
from runtime_ops.definitions import build_resources
from runtime_ops.online.click_models import PositionBased, grades
from runtime_ops.online.query_records import QueryRecord, ShownItem
from runtime_ops.online.request_ids import new_request_id
from runtime_ops.pipeline.spec import PipelineSpec
from runtime_ops.resources.approvals import ApprovalsResource
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store import schema as t
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.own_corpus import declare_pipeline
from runtime_ops_tests.support.servers import free_port
from runtime_ops_tests.support.slack_server import SlackServer
from runtime_ops_tests.support.word_pipeline import GOLDEN, GOOD, WEAK, serve_pair

CHANNEL, APPROVER, K, MIN_QUERIES, QUERIES = "C0ONLINE", "U2", 5, 25, 90
# pipeline -> (production model, candidate model, gate.online.required)
PIPELINES = {"loses": (GOOD, WEAK, False), "wins": (WEAK, GOOD, True)}


def _yaml(required: bool) -> str:
    return (
        "  rollout: {mode: interleave, share: 1.0, max_duration: 2d}\n"
        # One application key sends every simulated user's traffic (without sessions): no key may be left out.
        f"  gate: {{auto_approve_margin: 0.05, max_regression: 1.0, online: {{required: {str(required).lower()}, "
        f"min_queries: {MIN_QUERIES}, max_key_share: 1.0}}}}\n"
        f"  approvals: {{slack_channel: {CHANNEL}, approvers: [{APPROVER}]}}\n"
    )


def _serve(store: StateStore, spec: PipelineSpec) -> dict[str, Any]:
    """The pipeline's production and candidate (`PIPELINES`), the candidate's request pending beside its rollout."""
    production, candidate, _ = PIPELINES[spec.name]
    request, message = serve_pair(store, spec, production, candidate)
    assert ("clears the offline gate" in message) == spec.gate.online.required  # why "wins" waits
    return request


@dataclass
class World:
    store: StateStore  # unscoped
    slack: SlackServer
    api: ApiServer
    requests: dict[str, dict[str, Any]]  # by pipeline
    headers: dict[str, str]

    def tick(self, pipeline: str, instance: Any) -> None:
        """One approvals-sensor evaluation of `pipeline` (the sensor's own body, with its resources)."""
        import dagster as dg

        spec, store = get_spec(pipeline), self.store.scoped(pipeline)
        resource = cast(ApprovalsResource, build_resources(load_settings())["approvals"])
        announcer = announcer_for(resource, store, spec.approvals.slack_channel, spec.gate.online)
        with dg.build_sensor_context(instance=instance) as context:
            approvals_tick(context, store, announcer, spec)

    def message(self, pipeline: str) -> str:
        request = self.store.requests.get_request(self.requests[pipeline]["id"])
        assert request is not None and request["slack_ts"]
        return json.dumps(self.slack.messages[request["slack_ts"]]["blocks"])


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, env: Any, tmp_path: Path) -> Iterator[World]:
    pipelines = tmp_path / "pipelines"
    for name, (_, _, required) in PIPELINES.items():
        declare_pipeline(pipelines, name, tmp_path / "landing" / name, _yaml(required))
    database = {"database_url": request.getfixturevalue("postgres_url")} if request.param == "postgresql" else {}
    port = free_port()
    with SlackServer() as slack:
        env(
            RUNTIME_OPS_PIPELINES_DIR=str(pipelines),
            RUNTIME_OPS_QUERY_LOG_FLUSH_S="0.2",
            RUNTIME_OPS_PUBLIC_URL=f"http://127.0.0.1:{port}",
            SLACK_BOT_TOKEN="xoxb-test-token",
            SLACK_APPROVAL_CHANNEL=CHANNEL,
            SLACK_API_URL=slack.base_url,
            **database,
        )
        store = open_store(get_settings().resolved_database_url, get_settings(), pipeline=None)
        pending = {name: _serve(store.scoped(name), get_spec(name)) for name in PIPELINES}
        headers = {"Authorization": f"Bearer {store.api_keys.create('app', ['search']).key}"}
        api = ApiServer(get_settings(), port=port)
        with api:
            yield World(store, slack, api, pending, headers)
        store.engine.dispose()


def _ask(world: World, pipeline: str, rng: random.Random) -> list[tuple[str, int]]:
    """QUERIES golden questions asked; the (request id, chunk id) each simulated user clicked."""
    users = PositionBased()
    clicks = []
    for _ in range(QUERIES):
        question = rng.choice(sorted(GOLDEN))
        reply = web.post(f"{world.api.url}/api/search", json={"query": question, "k": K, "pipeline": pipeline},
                           headers=world.headers, timeout=30)  # fmt: skip
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert "arm" not in body and all("team" not in r for r in body["results"])
        shown = body["results"]
        for rank in users.clicks(grades([r["document_key"] for r in shown], {GOLDEN[question]}), rng):
            clicks.append((body["request_id"], shown[rank - 1]["chunk_id"]))
    return clicks


def _feedback(world: World, clicks: list[tuple[str, int]]) -> None:
    deadline = time.monotonic() + 30
    for request_id, chunk_id in clicks:
        body = {"request_id": request_id, "chunk_id": chunk_id, "signal": "click"}
        while (
            reply := web.post(f"{world.api.url}/api/feedback", json=body, headers=world.headers, timeout=30)
        ).status_code == 409:  # not flushed yet
            assert time.monotonic() < deadline, "the query log never wrote the request"
            time.sleep(0.1)
        assert reply.status_code == 201, reply.text


@pytest.mark.slow(seconds=60)  # alone on 2 cores (Dec 2026)
def test_live_traffic_rejects_a_worse_candidate_and_approves_a_better_one(world: World, dagster_instance: Any) -> None:
    rng = random.Random(27)
    for pipeline in PIPELINES:  # announced: the online half waits for queries
        world.tick(pipeline, dagster_instance)
        assert f"waiting for {MIN_QUERIES} more" in world.message(pipeline)
    wins = world.store.scoped("wins")
    assert wins.evaluations.latest_eval_report()["verdict"]["auto_approve"]  # offline alone would have approved it
    assert world.store.requests.get_request(world.requests["wins"]["id"])["status"] == "pending"

    for pipeline in PIPELINES:
        _feedback(world, _ask(world, pipeline, rng))

    # Before any tick: the page shows both halves, with counts.
    announcer = announcer_for(cast(ApprovalsResource, build_resources(load_settings())["approvals"]), world.store,
                              CHANNEL)  # fmt: skip
    for pipeline, expected in (("loses", "worse"), ("wins", "better")):
        request = world.requests[pipeline]
        page = web.get(announcer.link(request, APPROVER, datetime.now(UTC)), timeout=30)
        assert page.status_code == 200, page.text
        assert "id=verdict" in page.text and "ndcg@5" in page.text
        assert "Online evidence (live traffic)" in page.text and "queries with a click" in page.text
        assert f": {expected}" in page.text and "interleave at 100% of traffic, active" in page.text

    # Fail closed: a record the evidence cannot read (a team that is neither) makes the winner wait, never pass.
    wins_rollout = wins.rollouts.active()
    assert wins_rollout is not None
    now = datetime.now(UTC)
    broken = QueryRecord(new_request_id(now), "wins", "search", "interleaved", now, K, 1.0, 1, 1, candidate_version=2,
                         candidate_index=int(wins_rollout["candidate_index_id"]), rollout_id=int(wins_rollout["id"]),
                         items=(ShownItem(1, 1, 1, "docs/amber.md", "robot"),))  # fmt: skip
    wins.query_log.record([broken])
    world.tick("wins", dagster_instance)
    assert world.store.requests.get_request(world.requests["wins"]["id"])["status"] == "pending"
    page = web.get(announcer.link(world.requests["wins"], APPROVER, now), timeout=30).text
    assert "online evidence unavailable (ValueError: teams must be" in page
    with wins.tx() as conn:
        conn.execute(delete(t.query_records).where(t.query_records.c.request_id == broken.request_id))

    for pipeline in PIPELINES:
        world.tick(pipeline, dagster_instance)

    loses, won = (world.store.requests.get_request(world.requests[p]["id"]) for p in ("loses", "wins"))
    assert loses is not None and won is not None
    assert (loses["status"], loses["decided_by"]) == ("rejected", "policy:online")
    assert (won["status"], won["decided_by"]) == ("approved", "policy:online")
    assert "loses to production on live traffic" in loses["decision_reason"]
    assert "better offline" in won["decision_reason"] and ": better" in won["decision_reason"]
    for request in (loses, won):
        [decided] = [r for r in world.store.audit_log.records(request["id"]) if r["event"] == "decided"]
        assert decided["actor"] == "policy:online" and decided["channel"] == "policy"
        assert decided["detail"]["online"]["queries"] >= MIN_QUERIES
    stopped = world.store.scoped("loses").rollouts.for_request(loses["id"])
    assert stopped is not None and stopped["status"] == "stopped" and stopped["reason"].startswith("lost online")
    assert world.store.scoped("wins").rollouts.active() is not None  # until the promotion moves production

    # The Slack messages were updated on the same tick: the outcome, the offline verdict and the online counts.
    lost_message, won_message = world.message("loses"), world.message("wins")
    assert "Rejected by policy:online" in lost_message and "Approved by policy:online" in won_message
    for message in (lost_message, won_message):
        assert "ndcg@5" in message and "Online (live traffic)" in message
        assert "queries with a click: candidate wins" in message and "requests logged" in message
    assert '"action_id": "approve"' not in lost_message + won_message  # decided: no buttons left
