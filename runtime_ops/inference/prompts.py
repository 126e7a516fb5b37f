"""The chat-completions request that labels one ticket, and its digest (pure).

The digest covers everything the answer depends on except the model (a column of its own): the messages (so the
instructions, the label set and the ticket's text) and the sampling parameters. A stored result is reused only for
the same digest and model, so changing the prompt or a ticket's text labels that ticket again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

MAX_TOKENS = 8  # a label is one short word; a longer reply is cut rather than paid for
PROMPT_VERSION = 1  # bump when the wording changes meaning without changing the text (e.g. parsing rules)


def system_prompt(labels: Sequence[str]) -> str:
    return (
        "You label customer support tickets. Reply with exactly one label from this list and nothing else: "
        + ", ".join(labels)
        + "."
    )


def build_request(text: str, labels: Sequence[str]) -> dict[str, Any]:
    """The request body without `model`: messages and sampling parameters (temperature 0: the same ticket gets the
    same label from a deterministic model)."""
    return {
        "messages": [
            {"role": "system", "content": system_prompt(labels)},
            {"role": "user", "content": f"Ticket:\n{text.strip()}\n\nLabel:"},
        ],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
    }


def request_digest(request: dict[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of a request body (without `model`) and the prompt version."""
    canonical = json.dumps({"v": PROMPT_VERSION, **request}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
