"""`/api/answer` on a document whose overlapping chunks are both retrieved: the model's prompt holds their shared
text once and cites the document once, and the extractive answer (when the endpoint fails) says it once too (the
embedded defaults: SQLite state store, LanceDB; the model endpoint is the local fault server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime_ops.serving.answerer import split_sentences
from runtime_ops.settings import get_settings
from runtime_ops_tests.support import web
from runtime_ops_tests.support.approvals_support import ApiServer
from runtime_ops_tests.support.fault_server import FaultServer, ok, status
from runtime_ops_tests.support.flow import serving_v1

KEY = "notes/quokka.md"
SHARED = "The quokka export is pretty-printed by piping the quokka payload into json.tool, then sorted."
OPENING = "Quokka exports arrive as one long line of JSON from the quokka tracker."
CLOSING = "Quokka fields that are empty are dropped by the quokka tracker before the export."
# Two chunks: SHARED ends the first and, as the chunker's shared context, starts the second.
PAGE = (
    f"# Quokka exports\n\n{OPENING} "
    + " ".join(f"Each quokka record {i} holds a name, a weight and a sighting date." for i in range(14))
    + f"\n\n{SHARED}\n\n"
    + " ".join(f"The quokka tracker writes record {i} with its sighting place." for i in range(14))
    + f" {CLOSING}\n"
)
QUESTION = "How is the quokka export pretty-printed with json.tool?"


def _ask(api: ApiServer, headers: dict[str, str]) -> dict[str, Any]:
    reply = web.post(f"{api.url}/api/answer", json={"question": QUESTION, "k": 20}, headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_overlapping_chunks_of_a_document_are_answered_from_and_cited_once(
    env: Any, dagster_instance: Any, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    (landing / KEY).parent.mkdir(parents=True)
    (landing / KEY).write_text(PAGE, encoding="utf-8")
    with FaultServer() as server:
        env(landing=str(landing), RUNTIME_OPS_MODEL_ENDPOINT=server.base_url)
        store, _ = serving_v1(landing, dagster_instance)  # the page lands with the first batch and is indexed
        page = [(chunk_id, text) for chunk_id, key, text in store.documents.current_chunks() if key == KEY]
        assert len(page) == 2 and all(SHARED in text for _, text in page), page  # the chunks overlap

        with ApiServer(get_settings()) as api:
            headers = api.key_headers("search")
            server.requests.clear()
            server.default = ok("Pipe it into json.tool [1].")
            answered = _ask(api, headers)
            assert answered["answerer"] == "model"
            [request] = server.requests
            prompt = request.body["messages"][-1]["content"]
            assert OPENING in prompt and CLOSING in prompt  # both chunks were retrieved...
            assert prompt.count(SHARED) == 1  # ...and their shared text is given once
            cited = [s for s in answered["sources"] if s["document_key"] == KEY]
            assert [s["chunk_ids"] for s in cited] == [[chunk_id for chunk_id, _ in page]]  # one passage, cited once
            # The sources are numbered as the prompt numbers its passages.
            number = answered["sources"].index(cited[0]) + 1
            assert f"[{number}] " in prompt and prompt.index(f"[{number}] ") < prompt.index(SHARED)
            assert f"[{len(answered['sources']) + 1}]" not in prompt

            server.default = status(400)  # fails at once: the answer is extractive
            fallback = _ask(api, headers)
            assert fallback["answerer"] == "extractive" and fallback["endpoint_error"]
            assert fallback["answer"].count(SHARED) == 1, fallback["answer"]
            parts = split_sentences(fallback["answer"])
            assert len(parts) == len(set(parts)), fallback["answer"]
