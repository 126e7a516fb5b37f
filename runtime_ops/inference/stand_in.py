"""`LocalKeywordClassifier`: the local deterministic stand-in model, used when no endpoint is configured.

It is not a language model: it counts keywords per label in the ticket's text and answers the label with the most
hits (ties: the label declared first; no hit: the label declared last, the catch-all). It exists so `make dev` and
the tests run the whole flow (labelling, accuracy, the gate, publishing) without an endpoint or a key, and it says
so everywhere it appears: its model id is `local-deterministic-stand-in` and it costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from runtime_ops.inference.completion import Completion
from runtime_ops.inference.costs import Usage

STAND_IN_MODEL = "local-deterministic-stand-in"

# Keywords of the demo's labels (runtime_ops/defs/tickets/defs.yaml); any other label is matched by its own name.
KEYWORDS: Mapping[str, tuple[str, ...]] = {
    "billing": ("invoice", "charged", "charge", "refund", "payment", "bill", "billing", "price", "subscription", "vat"),
    "bug": ("error", "crash", "crashes", "broken", "fails", "failed", "bug", "exception", "500", "blank", "stuck"),
    "account": ("password", "login", "log in", "locked", "account", "email address", "2fa", "sign in", "delete my"),
    "feature_request": ("would be great", "please add", "feature", "could you add", "wish", "support for", "option to"),
    "question": ("how do i", "how can i", "where", "what is", "is there a way", "can i"),
}
_WORDS = re.compile(r"[a-z0-9']+")


class LocalKeywordClassifier:
    """The stand-in model (see the module docstring); safe to share between threads (it keeps no state)."""

    model = STAND_IN_MODEL

    def __init__(self, labels: Sequence[str]) -> None:
        if not labels:
            raise ValueError("the stand-in model needs at least one label")
        self.labels = tuple(labels)

    def __repr__(self) -> str:
        return f"LocalKeywordClassifier({self.model!r}, labels={self.labels})"

    def label(self, text: str) -> str:
        lowered = " ".join(_WORDS.findall(text.lower()))
        padded = f" {lowered} "
        scores = []
        for label in self.labels:
            keywords = KEYWORDS.get(label, (label.replace("_", " "),))
            scores.append(sum(padded.count(f" {k} ") for k in keywords))
        best = max(scores)
        return self.labels[scores.index(best)] if best else self.labels[-1]

    def complete(self, request: dict[str, Any], *, item_id: str) -> Completion:
        """The label of the ticket in `request`'s last (user) message, with usage counted in words."""
        messages = request["messages"]
        text = str(messages[-1]["content"]).removeprefix("Ticket:\n").removesuffix("\n\nLabel:")
        prompt_tokens = sum(len(str(m["content"]).split()) for m in messages)
        return Completion(self.label(text), Usage(prompt_tokens, 1))
