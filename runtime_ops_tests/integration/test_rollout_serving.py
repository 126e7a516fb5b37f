"""A candidate meeting live traffic through the real ops API (SQLite state store, LanceDB): the gate opens a request
for a person, the human_approval check readies the candidate's index (the serving alias untouched) and starts the
pipeline's declared rollout; then, per mode, what `/api/search` answers:
- interleave: items of both versions, each with its team, and the same request id rebuilds the same list;
- canary: a session stays on its arm, about `share` of the sessions get the candidate alone;
- shadow: what is served is production's, unchanged, while the candidate's comparison adds up in the store;
- no rollout: responses as before plus `arm: production`;
and a swap of the `retrieval_index` alias between a request's two reads changes nothing for that request."""

from __future__ import annotations

import random
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from runtime_ops.components.loading import get_spec
from runtime_ops.online.credit import common_prefix
from runtime_ops.online.interleaving import team_draft
from runtime_ops.serving.rollout_search import ROLLOUT_READ_EVERY_S, RolloutSearch
from runtime_ops.serving.search import Searcher
from runtime_ops.settings import get_settings
from runtime_ops.store import StateStore
from runtime_ops.store.serving.query_log import LoggedRequest
from runtime_ops.vectors.factory import pipeline_vector_store
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.fencing import promotion_lock
from runtime_ops_tests.support.flow import NEEDS_A_HUMAN, pending_candidate
from runtime_ops_tests.support.own_corpus import declare_pipeline

QUERIES = ("json dumps indent sort_keys", "csv writer quoting dialect", "decode bytes base64", "struct pack format")
K = 6
SESSIONS = 200


def _search(api: ApiServer, headers: dict[str, str], query: str, **body: Any) -> dict[str, Any]:
    resp = web.post(f"{api.url}/api/search", json={"query": query, "k": K, **body}, headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    found = resp.json()
    # What served it is the server's to know: a caller that knew the arm or the teams could click one side only.
    assert not {"arm", "served_by", "model_version", "index_id"} & set(found), found
    assert all(set(r) == {"chunk_id", "document_key", "title", "text"} for r in found["results"]), found
    return found


def _logged(store: StateStore, request_id: str) -> LoggedRequest:
    """The request as the query log keeps it (arm, versions, each item's team), once the writer has flushed it."""
    deadline = time.monotonic() + 30
    while (logged := store.query_log.get(request_id)) is None:
        assert time.monotonic() < deadline, f"the query log never wrote {request_id}"
        time.sleep(0.05)
    return logged


def _switch(store: StateStore, mode: str | None, share: float = 1.0) -> dict[str, Any] | None:
    """End the active rollout and start one in `mode` beside the same request (None: none); the API sees it within
    ROLLOUT_READ_EVERY_S."""
    active = store.rollouts.active()
    assert active is not None or mode is None
    if active is not None:
        store.rollouts.stop(reason=f"test: now {mode}", actor="test")
    started = None
    if mode is not None and active is not None:
        started = store.rollouts.start(
            approval_id=active["approval_id"],
            candidate_version=active["candidate_version"],
            candidate_index_id=active["candidate_index_id"],
            production_version=active["production_version"],
            mode=mode,
            share=share,
            max_duration=timedelta(hours=1),
            actor="test",
        )
    time.sleep(ROLLOUT_READ_EVERY_S + 0.2)
    return started


@pytest.mark.slow(seconds=71)  # alone on 2 cores (Dec 2026)
def test_rollout_modes_through_the_api(env: Any, dagster_instance: Any, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    pipelines = tmp_path / "pipelines"
    declare_pipeline(pipelines, "demo", landing, "  rollout: {mode: interleave, share: 1.0, max_duration: 2d}\n")
    # One key sends every search here, as fast as it can: over the default per-key limit (50/s), which is not tested.
    env(landing=str(landing), RUNTIME_OPS_PIPELINES_DIR=str(pipelines), RUNTIME_OPS_KEY_SEARCHES_PER_S="10000",
        **NEEDS_A_HUMAN)  # fmt: skip
    store, pending, _ = pending_candidate(landing, dagster_instance)
    store = store.scoped("demo")

    # The check started the declared rollout beside the pending request, on a ready index of v2; serving did not move.
    rollout = store.rollouts.active()
    assert rollout is not None and rollout["approval_id"] == pending["id"]
    assert (rollout["mode"], rollout["share"], rollout["candidate_version"], rollout["production_version"]) == (
        "interleave", 1.0, 2, 1,
    )  # fmt: skip
    candidate_index = store.indexes.get_index(rollout["candidate_index_id"])
    assert candidate_index is not None and candidate_index["status"] == "ready"
    serving = store.indexes.current_index()
    assert serving is not None and serving["model_version"] == 1 and serving["id"] != candidate_index["id"]
    assert [r["event"] for r in store.audit_log.records(pending["id"])].count("rollout_started") == 1

    searcher = Searcher(store, pipeline_vector_store(get_spec("demo").vector_store))

    def rankings(query: str) -> tuple[list[int], list[int]]:
        production = searcher.search([query], K).hits[0]
        candidate = searcher.search_index(searcher.index_row(candidate_index["id"]), [query], K).hits[0]
        return [h.chunk_id for h in production], [h.chunk_id for h in candidate]

    headers = {"Authorization": f"Bearer {store.api_keys.create('rollout-test', ['search']).key}"}
    with ApiServer(get_settings()) as api:
        # Interleave: both versions, each item's team in the query log (not in the response); the request id
        # rebuilds the list.
        teams_seen: set[str] = set()
        with_candidate: dict[str, Any] = {}
        asked = ""
        for query in QUERIES:
            body = _search(api, headers, query)
            assert body["request_id"].startswith("q_")
            logged = _logged(store, body["request_id"])
            record = logged.record
            assert (record["arm"], record["production_version"], record["production_index"]) == (
                "interleaved", 1, serving["id"],
            )  # fmt: skip
            assert (record["candidate_version"], record["candidate_index"]) == (2, candidate_index["id"])
            production, candidate = rankings(query)
            rebuilt = team_draft(production, candidate, K, random.Random(body["request_id"]))
            assert [r["chunk_id"] for r in body["results"]] == [d.item for d in rebuilt]
            assert [(i["chunk_id"], i["team"]) for i in logged.items] == [(d.item, d.team) for d in rebuilt]
            teams_seen |= {i["team"] for i in logged.items}
            if any(i["team"] == "candidate" for i in logged.items):
                with_candidate, asked = body, query
        assert teams_seen == {"production", "candidate"}
        # The query log keeps the arm, both versions and each shown item's team; a click credits the item's team.
        body = with_candidate
        logged = _logged(store, body["request_id"])
        clicked = next(i for i in logged.items if i["team"] == "candidate")
        feedback = {"request_id": body["request_id"], "chunk_id": clicked["chunk_id"], "signal": "click"}
        resp = web.post(f"{api.url}/api/feedback", json=feedback, headers=headers, timeout=30)
        assert resp.status_code == 201, resp.text
        assert logged.record["rollout_id"] == rollout["id"]
        # The rankings' shared leading prefix is logged with it: clicks there will credit neither team.
        assert logged.record["shared_prefix"] == common_prefix(*rankings(asked))
        inputs = store.query_log.online_inputs(rollout["id"])
        assert len(inputs.interleaved) == len(QUERIES)  # every interleaved request, flushed with the clicked one
        assert [q.clicked for q in inputs.interleaved if q.clicked] == [(clicked["rank"],)]
        reader = {"Authorization": f"Bearer {store.api_keys.create('rollout-read', ['read']).key}"}
        metrics = web.get(f"{api.url}/metrics", headers=reader, timeout=30).text
        credited = 'runtime_ops_feedback_total{arm="interleaved",model_version="2",pipeline="demo",signal="click"} 1.0'
        assert credited in metrics, [line for line in metrics.splitlines() if "feedback_total" in line]
        resp = web.post(f"{api.url}/api/answer", json={"question": QUERIES[0]}, headers=headers, timeout=30)
        assert resp.status_code == 200, resp.text
        answer = resp.json()
        assert not {"arm", "served_by", "model_version", "index_id"} & set(answer)
        assert answer["sources"] and all(set(s) == {"document_key", "title", "chunk_id", "chunk_ids"}
                                         for s in answer["sources"])  # fmt: skip
        assert _logged(store, answer["request_id"]).record["arm"] == "interleaved"

        # Canary: sticky per session, about half of the sessions on the candidate alone.
        canary = _switch(store, "canary", 0.5)
        assert canary is not None
        arms: dict[str, str] = {}
        asked_in: dict[str, str] = {}
        for i in range(SESSIONS):
            body = _search(api, headers, QUERIES[i % len(QUERIES)], session=f"user-{i}")
            asked_in[f"user-{i}"] = body["request_id"]
        for i, (session, request_id) in enumerate(asked_in.items()):
            record = _logged(store, request_id).record
            arms[session] = record["arm"]
            production, candidate = rankings(QUERIES[i % len(QUERIES)])
            expected = {"production": (1, production), "candidate": (2, candidate)}[record["arm"]]
            version = record["candidate_version"] if record["arm"] == "candidate" else record["production_version"]
            assert (version, [item["chunk_id"] for item in _logged(store, request_id).items]) == expected
        again = {session: _search(api, headers, QUERIES[0], session=session) for session in list(arms)[:40]}
        for session, body in again.items():  # the same session again: the same arm
            assert _logged(store, body["request_id"]).record["arm"] == arms[session]
        share = sum(a == "candidate" for a in arms.values()) / SESSIONS
        assert abs(share - 0.5) < 5 * (0.25 / SESSIONS) ** 0.5, share
        # The rollout's evidence reads its requests by the arm that served them alone (none were clicked).
        deadline = time.monotonic() + 30
        while (inputs := store.query_log.online_inputs(canary["id"])).requests < SESSIONS + 40:
            assert time.monotonic() < deadline, f"the query log never wrote the canary's requests: {inputs.requests}"
            time.sleep(0.1)
        on_candidate = sum(a == "candidate" for a in arms.values()) + sum(
            arms[s] == "candidate" for s in list(arms)[:40]
        )
        assert (inputs.candidate.requests, inputs.candidate.positive) == (on_candidate, 0)
        assert inputs.production.requests == SESSIONS + 40 - on_candidate and not inputs.interleaved

        # Shadow: production's answer, unchanged; the candidate's comparison is recorded off the response path.
        shadow = _switch(store, "shadow", 1.0)
        assert shadow is not None
        served = {q: _search(api, headers, q) for q in QUERIES}
        for query, body in served.items():
            assert _logged(store, body["request_id"]).record["arm"] == "production"
            assert [r["chunk_id"] for r in body["results"]] == rankings(query)[0]
        deadline = time.monotonic() + 30
        while (row := store.rollouts.get(shadow["id"])) is not None and row["shadow_queries"] < len(QUERIES):
            assert time.monotonic() < deadline, f"shadow comparisons not recorded: {row}"
            time.sleep(0.1)
        assert row is not None and 0 <= row["shadow_overlap_sum"] <= len(QUERIES)
        while (inputs := store.query_log.online_inputs(shadow["id"])).requests < len(QUERIES):
            assert time.monotonic() < deadline, "the query log never wrote the shadowed requests"
            time.sleep(0.1)
        sums = inputs.shadow  # the sums from the rollout row, k from its requests
        assert (sums.queries, sums.overlap_sum, sums.k) == (row["shadow_queries"], row["shadow_overlap_sum"], K)

        # No rollout: as before; the response has the same fields as during any rollout (none says which).
        _switch(store, None)
        for query, before in served.items():
            body = _search(api, headers, query)
            assert body["results"] == before["results"] and set(body) == set(before)
            assert set(body) == {"pipeline", "results", "took_ms", "request_id"}
            record = _logged(store, body["request_id"]).record
            assert (record["arm"], record["production_version"], record["production_index"]) == (
                "production", 1, serving["id"],
            )  # fmt: skip


@pytest.mark.slow(seconds=24)
def test_an_alias_swap_between_a_requests_reads_changes_nothing_for_it(
    env: Any, dagster_instance: Any, tmp_path: Path
) -> None:
    from runtime_ops.serving.index_swap import move_retrieval_index

    landing = tmp_path / "landing"
    pipelines = tmp_path / "pipelines"
    declare_pipeline(pipelines, "demo", landing, "  rollout: {mode: interleave, share: 1.0}\n")
    env(landing=str(landing), RUNTIME_OPS_PIPELINES_DIR=str(pipelines), **NEEDS_A_HUMAN)
    store, _, _ = pending_candidate(landing, dagster_instance)
    store = store.scoped("demo")
    rollout = store.rollouts.active()
    assert rollout is not None
    spec = get_spec("demo")
    searcher = Searcher(store, pipeline_vector_store(spec.vector_store))
    routed = RolloutSearch(spec, searcher)
    v1_index = store.indexes.current_index()
    assert v1_index is not None
    expected_v1 = [h.chunk_id for h in searcher.search([QUERIES[0]], K).hits[0]]

    # Between the request's read of the alias and its read of the index, v2 is promoted and served.
    opened = searcher._index
    swapped: list[str] = []

    def open_then_swap(row: dict[str, Any], dim: int) -> Any:
        index = opened(row, dim)
        if not swapped:
            with promotion_lock(store) as lease:
                store.registry.set_alias("production", 2, actor="test", fence=lease.fence)
                move = move_retrieval_index(
                    store.registry, store.indexes, lease, int(rollout["candidate_index_id"]), actor="test"
                )
            swapped.append(move.message)
        return index

    searcher._index = open_then_swap  # type: ignore[method-assign]
    served = routed.search(QUERIES[0], K, request_id="q_swap", session=None)
    assert swapped and store.indexes.current_index()["id"] == rollout["candidate_index_id"]  # type: ignore[index]
    # The request kept what it read: production is v1's index, the candidate v2's; nothing else mixed in.
    assert served.served_by == [
        {"team": "production", "model_version": 1, "index_id": v1_index["id"]},
        {"team": "candidate", "model_version": 2, "index_id": rollout["candidate_index_id"]},
    ]
    production_items = [h.chunk_id for h, t in zip(served.hits, served.teams, strict=True) if t == "production"]
    assert set(production_items) <= set(expected_v1)
    # Production moved: the rollout ended with it, and the next read (past the cache) serves v2 alone.
    assert store.rollouts.active() is None
    time.sleep(ROLLOUT_READ_EVERY_S + 0.1)
    after = routed.search(QUERIES[0], K, request_id="q_after", session=None)
    assert (after.arm, after.served_by[0]["model_version"]) == ("production", 2)
    routed.close()
