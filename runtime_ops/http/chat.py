"""OpenAI-compatible chat completions, the parts every client shares (pure but for httpx's response type): the
endpoint URL from a base, and a reply's content and token usage.

Used by `serving/endpoint.py` (`rag_answers`) and `inference/client.py` (the labelling pipeline).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from runtime_ops.http.retry import InvalidResponse
from runtime_ops.http.urls import endpoint_url

__all__ = ["ChatReply", "chat_completions_url", "chat_reply"]

_SUFFIX = "/chat/completions"


def chat_completions_url(url: str) -> str:
    """The chat-completions URL for a base (`http://host/v1`) or a full `.../chat/completions` URL."""
    return endpoint_url(url, _SUFFIX, "model endpoint")


@dataclass(frozen=True)
class ChatReply:
    content: str  # choices[0].message.content
    usage: tuple[int, int] | None  # (usage.prompt_tokens, usage.completion_tokens); None: not reported as counts


def chat_reply(response: httpx.Response) -> ChatReply:
    """The content and usage of a chat-completions reply. Undecodable JSON is transient (a cut-off body), JSON of
    the wrong shape is not; a missing or malformed `usage` is None (some servers omit it; the caller decides)."""
    try:
        data: Any = json.loads(response.content)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidResponse(f"invalid JSON body ({len(response.content)} bytes): {exc}", transient=True) from exc
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise InvalidResponse("JSON body has no choices[0].message.content", transient=False) from None
    if not isinstance(content, str):
        raise InvalidResponse(f"choices[0].message.content is {type(content).__name__}, not text", transient=False)
    usage = data.get("usage") if isinstance(data, dict) else None
    counts = [usage.get(name) for name in ("prompt_tokens", "completion_tokens")] if isinstance(usage, dict) else []
    if len(counts) == 2 and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return ChatReply(content, (int(counts[0] or 0), int(counts[1] or 0)))
    return ChatReply(content, None)
