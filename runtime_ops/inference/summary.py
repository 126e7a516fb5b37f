"""What a labelled set says about itself (pure): the evidence an approver reads (accuracy on the labelled sample,
its size, tokens, cost, items called vs reused) and the digest that names exactly these labels.

The digest is the asset's data version, so an approval binds to these labels: the same tickets labelled the same
way have the same digest (nothing new to approve); any changed label, ticket or model is a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from runtime_ops.inference.completion import Labelling
from runtime_ops.inference.costs import total_cost, total_usage
from runtime_ops.inference.labels import accuracy
from runtime_ops.inference.tickets import Ticket


def label_set_digest(labelling: Labelling) -> str:
    """sha256 (hex) of the canonical JSON of the (ticket id, input digest, label) triples and the model."""
    triples = sorted((i.item_id, i.input_digest, i.label or "") for i in labelling.items)
    canonical = json.dumps({"model": labelling.model, "items": triples}, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def evidence(tickets: Sequence[Ticket], labelling: Labelling) -> dict[str, Any]:
    """The label set's numbers, by metadata name. `accuracy` is None when no ticket carries a reviewed label."""
    predicted = {i.item_id: i.label for i in labelling.items}
    measured = accuracy((t.label, predicted.get(t.id)) for t in tickets)
    usage = total_usage(i.usage for i in labelling.items)
    called = [i for i in labelling.items if not i.reused]
    return {
        "accuracy": None if measured.value is None else round(measured.value, 4),
        "labelled": measured.labelled,
        "correct": measured.correct,
        "items": len(labelling.items),
        "unparsed": sum(i.label is None for i in labelling.items),
        "items_called": len(called),
        "items_reused": labelling.reused,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost_usd": total_cost(i.cost_usd for i in labelling.items),
        "run_cost_usd": total_cost(i.cost_usd for i in called),
        "usage_unreported": labelling.usage_unreported,
        "model": labelling.model,
    }
