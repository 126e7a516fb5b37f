"""Generated questions written by the pipeline's chat endpoint (a local server of the tests): each is asked
once per chunk digest and reused by later runs; a failing call is retried, and where the endpoint gives up the
offline question stays (real PostgreSQL state store, Dagster instance and HTTP server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime_ops.components.loading import get_spec
from runtime_ops.definitions import build_definitions
from runtime_ops.models.question_set import QUESTION_PROMPT, current_question_set
from runtime_ops.settings import get_settings, load_settings
from runtime_ops.store import open_store
from runtime_ops_tests.support.fault_server import Behaviour, FaultServer, completion_body, status
from runtime_ops_tests.support.flow import Flow
from runtime_ops_tests.support.own_corpus import declare_pipeline, write_own_corpus


class QuestionWriter(FaultServer):
    """Answers a question-writing prompt with a question built from the passage's first words."""

    def reply(self, behaviour: Behaviour, request: Any) -> Any:
        messages = request.get("messages", []) if isinstance(request, dict) else []
        if messages and messages[0].get("content") == QUESTION_PROMPT:
            words = messages[-1]["content"].split()[:6]
            return completion_body(f"What does the guide say about {' '.join(words)}?")
        return super().reply(behaviour, request)


@pytest.fixture
def server() -> Iterator[QuestionWriter]:
    with QuestionWriter() as srv:
        yield srv


def _asked(server: FaultServer) -> int:
    return sum(
        1
        for r in server.requests
        if isinstance(r.body, dict) and r.body.get("messages", [{}])[0].get("content") == QUESTION_PROMPT
    )


def test_endpoint_writes_questions_once_per_chunk(
    env, postgres_url, dagster_instance, tmp_path: Path, server: QuestionWriter
) -> None:
    pipelines, landing = tmp_path / "pipelines", tmp_path / "landing"
    declare_pipeline(
        pipelines,
        "acme",
        landing,
        "  evaluation: {min_questions: 20, endpoint_questions: true}\n"
        f"  answers: {{endpoint: '{server.base_url}', model_name: writer-1}}\n",
    )
    env(database_url=postgres_url, RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    flow = Flow(dagster_instance, defs=build_definitions(load_settings()), pipeline="acme")
    write_own_corpus(landing, 40)
    assert all(r.success for r in flow.tick_and_run("landing_sensor"))

    server.push(status(503))  # the first question's call fails once and is retried
    first = flow.materialize(["golden_questions"])
    assert first.success
    asked = _asked(server)
    assert asked >= 10
    [event] = first.get_asset_materialization_events()
    meta: dict[str, Any] = {k: v.value for k, v in event.materialization.metadata.items()}
    assert meta["provenance/endpoint"] >= 10 and meta["changed"] is True
    assert "endpoint writer-1 wrote" in meta["notes"]

    store = open_store(get_settings().resolved_database_url, get_settings(), pipeline="acme")
    spec = get_spec("acme", load_settings())
    written = [q for q in current_question_set(store, spec).questions if q.provenance["method"] == "endpoint"]
    assert written and all(q.question.question.startswith("What does the guide say about") for q in written)
    assert all(q.provenance["model"] == "writer-1" and q.provenance["chunk_sha256"] for q in written)

    # A second run asks nothing again: every question is reused from its (model, chunk digest) effect.
    again = flow.materialize(["golden_questions"])
    assert again.success and _asked(server) == asked
    [event] = again.get_asset_materialization_events()
    assert event.materialization.metadata["version"].value == meta["version"], "the same set, the same version"
