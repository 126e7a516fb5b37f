"""A local OpenAI-compatible chat-completions server that labels tickets, misbehaves on a schedule and counts calls
per item, for the inference pipeline's tests.

    with LabellingServer() as server:
        server.push(status(429, retry_after=0.2), status(503), reset())   # the next three calls, in arrival order
        ...                                                               # then every call answers
        server.calls_per_item()     # Counter: item id -> requests received (failed attempts included)
        server.answered_per_item()  # Counter: item id -> 200 replies sent

It is a `FaultServer` (same queue of behaviours, records and `max_in_flight`; `default` is what a call gets when
the queue is empty, e.g. `slow(0.1)` to keep calls in flight). A 200 labels the ticket in the user message the way
`LocalKeywordClassifier` does (`expected_label`) and reports usage: the words of the messages as prompt tokens,
one completion token. The item of a request is read from its `X-Client-Request-Id` header
(`<quoted item id>:<digest prefix>`, as `runtime_ops.inference.client` sends it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote

from runtime_ops.inference.client import ITEM_HEADER
from runtime_ops.inference.stand_in import LocalKeywordClassifier
from runtime_ops_tests.support.fault_server import Behaviour, FaultServer, Request, completion_body, ok

LABELS = ("billing", "bug", "account", "feature_request", "question")


def ticket_text(request: Any) -> str:
    """The ticket in a labelling request's user message."""
    content = str(request["messages"][-1]["content"])
    return content.removeprefix("Ticket:\n").removesuffix("\n\nLabel:")


def expected_label(text: str, labels: Sequence[str] = LABELS) -> str:
    return LocalKeywordClassifier(labels).label(text)


def prompt_tokens(request: Any) -> int:
    return sum(len(str(m["content"]).split()) for m in request["messages"])


def item_of(request: Request) -> str | None:
    header = next((v for k, v in request.headers.items() if k.lower() == ITEM_HEADER.lower()), None)
    return unquote(header.rsplit(":", 1)[0]) if header else None


@dataclass
class LabellingServer(FaultServer):
    name: ClassVar[str] = "labelling-server"

    def reply(self, behaviour: Behaviour, request: Any) -> Any:
        if behaviour.kind != "ok":
            raise AssertionError(f"unknown behaviour {behaviour.kind!r}")
        body = completion_body(expected_label(ticket_text(request)), request.get("model", self.name))
        body["usage"] = {"prompt_tokens": prompt_tokens(request), "completion_tokens": 1}
        body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"] + 1
        return body

    def calls_per_item(self) -> Counter[str]:
        with self._lock:
            return Counter(item for r in self.requests if (item := item_of(r)) is not None)

    def answered_per_item(self) -> Counter[str]:
        with self._lock:
            return Counter(item for r in self.requests if r.behaviour in ("ok", "slow") and (item := item_of(r)))


__all__ = ["LABELS", "LabellingServer", "expected_label", "ok", "prompt_tokens", "ticket_text"]
