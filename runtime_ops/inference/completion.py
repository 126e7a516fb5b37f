"""What one labelling call yields (`Completion`), the classifier interface both models satisfy, and a labelled batch
(`Labelling`: one `LabelledItem` per ticket). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runtime_ops.inference.costs import Usage


@dataclass(frozen=True)
class Completion:
    text: str  # the reply's content, as the model wrote it
    usage: Usage
    usage_reported: bool = True  # False: the endpoint reported no usage (counted as 0 tokens)


class Classifier(Protocol):
    """A model that answers a chat-completions request body (without `model`) for one item."""

    model: str

    def complete(self, request: dict[str, Any], *, item_id: str) -> Completion: ...


@dataclass(frozen=True)
class LabelledItem:
    item_id: str
    input_digest: str
    label: str | None  # None: the reply named no declared label
    usage: Usage
    cost_usd: float
    reused: bool  # True: stored by an earlier run (or a concurrent one), not called now


@dataclass(frozen=True)
class Labelling:
    items: list[LabelledItem]  # one per ticket, in the tickets' order
    model: str
    usage_unreported: int  # calls whose reply carried no token usage (counted as 0 tokens)

    @property
    def called(self) -> int:
        return sum(not i.reused for i in self.items)

    @property
    def reused(self) -> int:
        return sum(i.reused for i in self.items)
