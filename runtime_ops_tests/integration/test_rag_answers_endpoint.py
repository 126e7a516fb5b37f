"""rag_answers through an OpenAI-compatible endpoint (the local fault server), and its extractive fallback."""

from __future__ import annotations

import shutil

from runtime_ops.demo import CORPUS_DIR
from runtime_ops.settings import get_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.fault_server import FaultServer, ok, status
from runtime_ops_tests.support.flow import Flow


def test_answers_come_from_the_endpoint_and_fall_back_when_it_fails(env, postgres_url, dagster_instance, tmp_path):
    landing = tmp_path / "landing"
    shutil.copytree(CORPUS_DIR / "stdlib" / "data", landing / "stdlib" / "data")
    with FaultServer() as server:
        env(
            database_url=postgres_url,
            landing=str(landing),
            RUNTIME_OPS_MODEL_ENDPOINT=server.base_url,
            RUNTIME_OPS_MODEL_API_KEY="sk-test-secret",
        )
        flow = Flow(dagster_instance)
        store = open_store(get_settings().resolved_database_url, get_settings())
        flow.tick_and_run("landing_sensor")
        server.default = ok("Use json.dumps [1].")
        [train] = flow.tick_and_run("corpus_sensor")
        assert train.success
        answers = store.answers.latest_answers(limit=5)
        assert answers and {a["answerer"] for a in answers} == {"model"}
        assert {a["answer"] for a in answers} == {"Use json.dumps [1]."}
        first = server.requests[0]
        assert first.headers.get("Authorization") == "Bearer sk-test-secret"
        user_message = first.body["messages"][-1]["content"]
        assert "[1]" in user_message and "Question: " in user_message  # numbered passages and the question

        server.default = status(503)
        result = flow.materialize(
            ["rag_answers"],
            run_config={
                "ops": {"demo__rag_answers": {"config": {"questions": ["How do I parse JSON?"], "timeout_s": 2.0}}}
            },
        )
        assert result.success
        [latest] = store.answers.latest_answers(limit=1)
        assert latest["answerer"] == "extractive" and latest["answer"]
        meta = result.asset_materializations_for_node("demo__rag_answers")[0].metadata
        assert meta["endpoint_fallbacks"].value == 1
        assert "sk-test-secret" not in str(meta)
