"""Issue 39's three forging attacks on the online gate, replayed against the real ops API over HTTP (PostgreSQL state
store), each beside honest users of other keys; the gate's verdict and ruling stay those of the honest traffic alone:

- (a) one key clicks the candidate's items of interleaved lists, heavily (as responses used to name each item's
  team; here the attacker is told the teams anyway, from the server's own query log): its evidence dominates the
  rollout's and is left out, so a worse candidate is still rejected; counted as it is, it would have won.
- (b) one key picks canary sessions and would answer only where production served them: no response names an arm,
  a team, a model version, an index or a score, and the two arms' responses have the same shape, so it cannot
  pick; answering blindly everywhere, its evidence is left out too and a better candidate stays "better".
- (c) feedback on other keys' requests, or naming another session or none, is refused (403, saying why),
  audited, and counted nowhere.

Pipelines: `clicks` (interleaving at 100%: a 2-dimension lsa candidate against a 12-dimension production) and
`canary` (canary at 50% of sessions: the 12-dimension candidate against a 2-dimension production), both with the
default `max_key_share` / `max_session_share`. Honest users: 40 sessions per pipeline over four keys, each asking
two golden questions and clicking by a position-based click model.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from runtime_ops.approvals.online_gate import RequestEvidence, request_evidence
from runtime_ops.components.loading import get_spec
from runtime_ops.online.click_models import PositionBased, grades
from runtime_ops.online.evidence import online_evidence
from runtime_ops.online.statistics import ProportionDifference
from runtime_ops.policies.gate_rule import OnlineRuling, judge_online
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore, open_store
from runtime_ops.store import schema as t
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.own_corpus import declare_pipeline
from runtime_ops_tests.support.word_pipeline import GOLDEN, GOOD, WEAK, serve_pair

# pipeline -> (rollout, production model, candidate model)
PIPELINES = {
    "clicks": ("{mode: interleave, share: 1.0, max_duration: 2d}", GOOD, WEAK),
    "canary": ("{mode: canary, share: 0.5, max_duration: 2d}", WEAK, GOOD),
}
K, MIN_QUERIES, SESSIONS, HONEST_KEYS = 5, 20, 40, 4
# What a response could tell a caller about the side that served it (none may appear, at any depth).
TELLING_FIELDS = {"arm", "team", "served_by", "model_version", "index_id", "score", "candidate", "production"}
ARMS = {"production", "candidate", "interleaved"}


def _serve(store: StateStore, name: str) -> dict[str, Any]:
    """The pipeline's production and candidate (`PIPELINES`), the candidate's request pending beside its rollout."""
    _, production, candidate = PIPELINES[name]
    return serve_pair(store, get_spec(name), production, candidate)[0]


@dataclass
class World:
    store: StateStore  # unscoped
    api: ApiServer
    requests: dict[str, dict[str, Any]]  # by pipeline
    keys: dict[str, str]  # name -> bearer token

    def client(self, key: str) -> httpx.Client:
        """One application's keep-alive HTTP client, authenticated with its key."""
        return httpx.Client(base_url=self.api.url, headers={"Authorization": f"Bearer {self.keys[key]}"}, timeout=30)

    def evidence(self, pipeline: str) -> tuple[RequestEvidence, OnlineRuling]:
        """What the gate reads of `pipeline`'s request now, and what it would do with it."""
        store, spec = self.store.scoped(pipeline), get_spec(pipeline)
        request = self.requests[pipeline]
        found = request_evidence(store, request, spec.gate.online)
        assert found.evidence is not None, found.error
        report = store.evaluations.get_eval_report(request["eval_report_id"]) or {}
        ruling = judge_online(
            policy=spec.gate.online, offline_auto_approve=bool(report["verdict"]["auto_approve"]), first_model=False,
            verdict=found.verdict, decides=found.evidence.decides, caveat=found.evidence.caveat,
        )  # fmt: skip
        return found, ruling

    def logged(self, request_id: str) -> dict[str, Any]:
        """The query log's record of a request (what the server keeps: arm, teams), once its writer flushed it."""
        deadline = time.monotonic() + 30
        while (found := self.store.query_log.get(request_id)) is None:
            assert time.monotonic() < deadline, f"the query log never wrote {request_id}"
            time.sleep(0.05)
        return found.record


@pytest.fixture
def world(env: Any, tmp_path: Path, postgres_url: str) -> Iterator[World]:
    pipelines = tmp_path / "pipelines"
    for name, (rollout, _, _) in PIPELINES.items():
        declare_pipeline(pipelines, name, tmp_path / "landing" / name,
                         f"  rollout: {rollout}\n"
                         # The worse candidate waits for a person offline; the better one for the online half.
                         f"  gate: {{auto_approve_margin: 0.05, max_regression: 1.0, online: {{required: "
                         f"{str(name == 'canary').lower()}, min_queries: {MIN_QUERIES}}}}}\n")  # fmt: skip
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines), RUNTIME_OPS_QUERY_LOG_FLUSH_S="0.2")
    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline=None)
    pending = {name: _serve(store.scoped(name), name) for name in PIPELINES}
    names = [f"honest-{i}" for i in range(HONEST_KEYS)] + ["mallory", "eve", "trudy"]
    keys = {name: store.api_keys.create(name, ["search"]).key for name in names}
    with ApiServer(get_settings()) as api:
        yield World(store, api, pending, keys)
    store.engine.dispose()


def _send(client: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    """POST as a well-behaved client: after a 409 (not in the query log yet) or a 429 (over a limit), retry."""
    deadline = time.monotonic() + 60
    while (reply := client.post(path, json=body)).status_code in (409, 429):
        assert time.monotonic() < deadline, f"{path} still answers {reply.status_code}: {reply.text}"
        # The query log flushes every 0.2 s here; a limit's Retry-After is whole seconds.
        time.sleep(0.2 if reply.status_code == 409 else float(reply.headers["Retry-After"]))
    return reply


def _search(client: httpx.Client, pipeline: str, question: str, session: str) -> dict[str, Any]:
    reply = _send(client, "/api/search", {"query": question, "k": K, "pipeline": pipeline, "session": session})
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def _click(client: httpx.Client, request_id: str, chunk_id: int, session: str) -> None:
    body = {"request_id": request_id, "chunk_id": chunk_id, "signal": "click", "session": session}
    reply = _send(client, "/api/feedback", body)
    assert reply.status_code == 201, reply.text


def _honest(world: World, pipeline: str, rng: random.Random) -> list[tuple[str, str]]:
    """SESSIONS honest users over HONEST_KEYS keys, two questions each, clicking by a position-based model; the
    (request id, session) of each search."""
    users, clients = PositionBased(), [world.client(f"honest-{i}") for i in range(HONEST_KEYS)]
    clicks, asked = [], []
    for s in range(SESSIONS):
        session = f"{pipeline}-user-{s}"
        for question in rng.sample(sorted(GOLDEN), 2):
            body = _search(clients[s % HONEST_KEYS], pipeline, question, session)
            shown = body["results"]
            asked.append((body["request_id"], session))
            for rank in users.clicks(grades([r["document_key"] for r in shown], {GOLDEN[question]}), rng):
                clicks.append((s % HONEST_KEYS, body["request_id"], shown[rank - 1]["chunk_id"], session))
    for key, request_id, chunk_id, session in clicks:
        _click(clients[key], request_id, chunk_id, session)
    for client in clients:
        client.close()
    return asked


def _telling(value: Any, path: str = "") -> list[str]:
    """Where a response names an arm or what served it (field names, or values naming an arm)."""
    if isinstance(value, dict):
        return [f"{path}.{k}" for k in value if k in TELLING_FIELDS] + [
            hit for k, v in value.items() for hit in _telling(v, f"{path}.{k}")
        ]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in _telling(v, f"{path}[{i}]")]
    return [f"{path}={value}"] if isinstance(value, str) and value in ARMS else []


def _shape(value: Any) -> Any:
    """A response's structure without its values: what differs between two responses' shapes could tell them apart."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return type(value).__name__


def _counts(rate: ProportionDifference) -> tuple[int, int, int, int]:
    return rate.candidate_positive, rate.candidate_n, rate.production_positive, rate.production_n


def _feedback_rows(world: World, request_ids: list[str]) -> int:
    with world.store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).where(t.feedback.c.request_id.in_(request_ids))).scalar_one())


@pytest.mark.slow(seconds=60)  # the file, on 2 busy cores (Dec 2026)
def test_one_key_cannot_forge_the_online_verdict(world: World) -> None:
    rng = random.Random(39)
    asked = {pipeline: _honest(world, pipeline, rng) for pipeline in PIPELINES}
    honest = {pipeline: world.evidence(pipeline) for pipeline in PIPELINES}
    clicks_before, canary_before = honest["clicks"][0].evidence, honest["canary"][0].evidence
    assert clicks_before is not None and canary_before is not None
    # The honest traffic decides: the worse candidate loses (rejected), the better one wins (approved).
    assert (clicks_before.verdict, honest["clicks"][1].action) == ("worse", "reject"), clicks_before.to_dict()
    assert (canary_before.verdict, honest["canary"][1].action) == ("better", "approve"), canary_before.to_dict()
    assert clicks_before.left_out == canary_before.left_out == 0 and clicks_before.caveat is None

    # (a) One key clicks the candidate's items, about twice as often as every honest user together.
    mallory, forged = world.client("mallory"), []
    for i in range(100):
        question, session = rng.choice(sorted(GOLDEN)), f"mallory-{i}"  # a new session per search: no session limit
        forged.append((_search(mallory, "clicks", question, session)["request_id"], session))
    for request_id, session in forged:
        record = world.logged(request_id)  # the teams, as responses used to tell them
        theirs = [i for i in record["items"] if i["team"] == "candidate" and i["rank"] > (record["shared_prefix"] or 0)]
        if theirs:
            _click(mallory, request_id, int(theirs[0]["chunk_id"]), session)
    mallory.close()
    clicks_after, ruling = world.evidence("clicks")
    assert clicks_after.evidence is not None and clicks_after.evidence.preference is not None
    after, pref = clicks_after.evidence, clicks_after.evidence.preference
    assert (after.verdict, ruling) == (clicks_before.verdict, honest["clicks"][1])
    assert clicks_before.preference is not None
    before = clicks_before.preference
    assert (pref.wins, pref.ties, pref.losses) == (before.wins, before.ties, before.losses)
    assert after.concentration is not None and after.concentration.top_key_share > 0.5
    assert after.left_out > 50 and after.caveat is not None and "evidence dominated by one key (" in after.caveat
    counted_as_is = online_evidence(
        world.store.scoped("clicks").query_log.online_inputs(int(after.rollout_id or 0)),
        mode="interleave", min_queries=MIN_QUERIES,
    )  # fmt: skip
    assert counted_as_is.verdict == "better", counted_as_is.to_dict()  # the attack is real: it would have won

    # (b) One key picks canary sessions, to answer only where production served: nothing says where.
    eve, bodies = world.client("eve"), []
    for i in range(80):
        body = _search(eve, "canary", rng.choice(sorted(GOLDEN)), f"eve-{i}")
        assert _telling(body) == [], body
        bodies.append((body, f"eve-{i}"))
    replies = [(body, session, world.logged(body["request_id"])["arm"]) for body, session in bodies]
    served = {arm: [body for body, _, a in replies if a == arm] for arm in ("candidate", "production")}
    assert served["candidate"] and served["production"]  # both arms served it, told apart by nothing:
    assert _shape(served["candidate"][0]) == _shape(served["production"][0])
    for body, session, _ in replies:  # so it answers blindly, everywhere
        _click(eve, body["request_id"], body["results"][0]["chunk_id"], session)
    eve.close()
    canary_after, ruling = world.evidence("canary")
    assert canary_after.evidence is not None and canary_after.evidence.feedback_rate is not None
    rate, rate_before = canary_after.evidence.feedback_rate, canary_before.feedback_rate
    assert (canary_after.verdict, ruling) == (canary_before.verdict, honest["canary"][1])
    assert rate_before is not None and _counts(rate) == _counts(rate_before)
    assert canary_after.evidence.sample_ratio is not None and not canary_after.evidence.sample_ratio.mismatch
    assert "evidence dominated by one key" in (canary_after.evidence.caveat or "")

    # (c) Feedback on another key's requests, or naming another session (or none): refused, and counted nowhere.
    made = asked["clicks"][:10]
    honest_ids = [request_id for request_id, _ in made]
    rows = _feedback_rows(world, honest_ids)
    trudy, owners = world.client("trudy"), [world.client(f"honest-{i}") for i in range(HONEST_KEYS)]
    for request_id, session in made:
        owner = owners[int(session.rsplit("-", 1)[1]) % HONEST_KEYS]  # the key that searched (as `_honest` chose)
        chunk = world.logged(request_id)["items"][0]["chunk_id"]
        body = {"request_id": request_id, "chunk_id": chunk, "signal": "click", "session": session}
        attempts = {
            "another key": (trudy, body),
            "another session": (owner, {**body, "session": "someone-else"}),
            "no session": (owner, {k: v for k, v in body.items() if k != "session"}),
        }
        for what, (client, sent) in attempts.items():
            reply = client.post("/api/feedback", json=sent)
            assert reply.status_code == 403 and "feedback" in reply.json()["detail"], (what, reply.text)
        assert "made by another API key" in trudy.post("/api/feedback", json=body).json()["detail"]
    for client in (trudy, *owners):
        client.close()
    assert _feedback_rows(world, honest_ids) == rows
    audited = [r for r in world.store.audit_log.records() if r["event"] in ("attempt", "refusals")]
    assert any("made by another API key" in str(r["detail"]) for r in audited), audited
    for pipeline in PIPELINES:
        final, _ = world.evidence(pipeline)
        assert final.evidence is not None and final.verdict == honest[pipeline][0].verdict
