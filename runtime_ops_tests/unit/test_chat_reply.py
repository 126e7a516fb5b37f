"""A chat-completions reply read by `runtime_ops.http.chat` (shared by rag_answers and the inference pipeline): the
content, the token usage when the server reports it as counts, and which bad bodies are worth retrying."""

from __future__ import annotations

import json

import httpx
import pytest

from runtime_ops.http.chat import chat_completions_url, chat_reply
from runtime_ops.http.retry import InvalidResponse


def _reply(body: object) -> httpx.Response:
    return httpx.Response(200, content=body if isinstance(body, bytes) else json.dumps(body).encode())


def _choices(content: object) -> list[dict[str, object]]:
    return [{"message": {"role": "assistant", "content": content}}]


def test_content_and_usage_are_read_and_usage_is_none_when_missing_or_not_counts() -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 2}
    assert chat_reply(_reply({"choices": _choices("bug"), "usage": usage})).usage == (120, 2)
    assert chat_reply(_reply({"choices": _choices("bug")})).usage is None
    for bad in ({"prompt_tokens": "120", "completion_tokens": 2}, {"prompt_tokens": -1, "completion_tokens": 2}, []):
        reply = chat_reply(_reply({"choices": _choices("bug"), "usage": bad}))
        assert reply.content == "bug" and reply.usage is None


def test_a_cut_off_body_is_transient_and_a_wrong_shape_is_not() -> None:
    with pytest.raises(InvalidResponse) as cut:
        chat_reply(_reply(b'{"choices": [{"mess'))
    assert cut.value.transient
    for body in ({"choices": []}, {"choices": _choices(None)}, ["not", "an", "object"]):
        with pytest.raises(InvalidResponse) as wrong:
            chat_reply(_reply(body))
        assert not wrong.value.transient


def test_the_url_is_the_chat_completions_route_of_a_base_or_given_in_full() -> None:
    assert chat_completions_url("http://llm:8000/v1/") == "http://llm:8000/v1/chat/completions"
    assert chat_completions_url("https://x/v1/chat/completions") == "https://x/v1/chat/completions"
    with pytest.raises(ValueError, match="must be an http") as refused:
        chat_completions_url("ftp://user:secret@x/v1")
    assert "secret" not in str(refused.value)
